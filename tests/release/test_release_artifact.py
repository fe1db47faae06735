"""`build`: a reproducible host-only zipapp that runs on a bare python3."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile

import pytest
from release_fixtures import MAIN, make_repo, task_env

from fleet.release.artifact import (
    MANIFEST_NAME,
    build_artifact,
    current_artifact,
    ensure_artifact,
)
from fleet.release.component import load_project
from fleet.release.error import ReleaseError
from fleet.release.verify import verify

HOST_TREES = ("fleet/continuity", "fleet/plugins", "fleet/gateway", "fleet/installer")


@pytest.fixture
def project(tmp_path):
    repo = make_repo(tmp_path, extra_trees=HOST_TREES)
    # clutter that must never reach the artifact
    root = repo.path
    (root / "fleet/gateway/__pycache__").mkdir(exist_ok=True)
    (root / "fleet/gateway/__pycache__/loader.cpython-311.pyc").write_bytes(b"\0junk")
    (root / "fleet/plugins/mc/tests").mkdir(exist_ok=True)
    (root / "fleet/plugins/mc/tests/test_mc.py").write_text("assert False\n")
    (root / "fleet/continuity/.scratch.py").write_text("x = 1\n")
    (root / "fleet/release").mkdir(exist_ok=True)
    (root / "fleet/release/secret.py").write_text("CONTROL_SIDE = True\n")
    return root


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_two_builds_are_byte_identical(project, tmp_path):
    first = build_artifact(project, tmp_path / "out1")
    # touch every source (new mtimes) and change a mode: neither may leak into the bytes
    for path in project.rglob("*.py"):
        os.utime(path, (1_900_000_000, 1_900_000_000))
    (project / "fleet/__init__.py").chmod(0o600)
    second = build_artifact(project, tmp_path / "out2")
    assert first.path.name == second.path.name
    assert first.path.read_bytes() == second.path.read_bytes()
    assert first.sha256 == second.sha256 == sha(first.path.read_bytes())
    assert (tmp_path / "out1" / (first.path.name + ".sha256")).read_text().strip() == first.sha256


def test_name_version_and_manifest(project, tmp_path):
    art = build_artifact(project, tmp_path / "dist")
    versions = verify(load_project(project)).versions
    assert art.version == versions["memory-continuity"]
    assert art.path.name == f"fleet-{art.version}.pyz"
    assert art.components == versions
    with zipfile.ZipFile(art.path) as zf:
        manifest = json.loads(zf.read(MANIFEST_NAME))
        names = zf.namelist()
        assert manifest["version"] == art.version and manifest["components"] == versions
        assert set(manifest["files"]) == set(names) - {MANIFEST_NAME}
        for name, digest in manifest["files"].items():
            assert sha(zf.read(name)) == digest


def test_only_host_side_files_with_fixed_metadata(project, tmp_path):
    art = build_artifact(project, tmp_path / "dist")
    with zipfile.ZipFile(art.path) as zf:
        infos = zf.infolist()
    names = [i.filename for i in infos]
    assert names == sorted(names)
    assert "__main__.py" in names and "fleet/__init__.py" in names
    assert "fleet/installer/cli.py" in names
    for plugin in ("mc", "memory_continuity"):
        assert f"fleet/plugins/{plugin}/openclaw.plugin.json" in names
        assert f"fleet/plugins/{plugin}/package.json" in names
    # a .pyc only as the build's bytecode beside its source (tests/release/test_bytecode.py)
    bad = [n for n in names if "__pycache__" in n or "/tests/" in n
           or (n.endswith(".pyc") and n[:-1] not in names)
           or "/." in n or n.startswith(("fleet/release", "fleet/cli", "fleet/deploy"))]
    assert bad == []
    for info in infos:
        assert info.date_time == (1980, 1, 1, 0, 0, 0)
        assert info.external_attr >> 16 == 0o100644
        assert info.compress_type == zipfile.ZIP_DEFLATED
    assert art.path.read_bytes().startswith(b"#!/usr/bin/env python3\n")


def test_runs_isolated_without_site_packages(project, tmp_path):
    art = build_artifact(project, tmp_path / "dist")
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run(["python3", "-I", "-S", str(art.path), "--version"], cwd=empty,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {"version": art.version, "components": art.components}


def test_source_date_epoch_sets_the_timestamps(project, tmp_path, monkeypatch):
    default = build_artifact(project, tmp_path / "a")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000001")
    one = build_artifact(project, tmp_path / "b")
    two = build_artifact(project, tmp_path / "c")
    assert one.sha256 == two.sha256 != default.sha256
    with zipfile.ZipFile(one.path) as zf:
        assert {i.date_time for i in zf.infolist()} == {(2023, 11, 14, 22, 13, 20)}
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "soon")
    with pytest.raises(ReleaseError, match="SOURCE_DATE_EPOCH"):
        build_artifact(project, tmp_path / "d")


def test_current_build_is_recognised_and_a_change_is_not(project, tmp_path):
    out = tmp_path / "dist"
    assert current_artifact(project, out) is None
    art, reused = ensure_artifact(project, out)
    assert not reused
    again, reused = ensure_artifact(project, out)
    assert reused and again == art
    handlers = project / "fleet/continuity/document.py"
    handlers.write_text(handlers.read_text() + "\n# changed\n")
    assert current_artifact(project, out) is None
    rebuilt, reused = ensure_artifact(project, out)
    assert not reused and rebuilt.sha256 != art.sha256
    (out / (rebuilt.path.name + ".sha256")).write_text("0" * 64 + "\n")
    assert current_artifact(project, out) is None


def test_inconsistent_versions_refuse_to_build(project, tmp_path):
    path = project / "fleet/plugins/mc/package.json"
    data = json.loads(path.read_text())
    data["version"] = "0.0.1"
    path.write_text(json.dumps(data))
    with pytest.raises(ReleaseError, match=r"(?s)refusing to build.*disagree"):
        build_artifact(project, tmp_path / "dist")
    assert not (tmp_path / "dist").exists()


def test_build_task_prints_the_sha256(project, tmp_path):
    def task(*args):
        return subprocess.run([sys.executable, "-m", "invoke", "-r", str(MAIN), "build", *args],
                              cwd=project, capture_output=True, text=True, timeout=120,
                              env=task_env())

    out = tmp_path / "dist"
    proc = task("--out", str(out), "--check")
    assert proc.returncode == 1 and "no current build" in proc.stderr
    proc = task("--out", str(out))
    assert proc.returncode == 0, proc.stderr
    digest = (next(out.glob("*.pyz.sha256"))).read_text().strip()
    assert f"sha256 {digest}" in proc.stdout
    proc = task("--out", str(out), "--check", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["artifact"]["sha256"] == digest


def test_a_build_from_uncommitted_sources_says_so_in_its_version(project, tmp_path):
    clean = build_artifact(project, tmp_path / "clean")
    assert "+" not in clean.version
    target = project / "fleet/gateway/layout.py"
    target.write_text(target.read_text() + "# local experiment\n")
    dirty = build_artifact(project, tmp_path / "dirty")
    base, _, local = dirty.version.partition("+")
    assert base == clean.version and local.startswith("dirty.") and len(local) == 14
    assert dirty.path.name == f"fleet-{dirty.version}.pyz"
    assert dirty.components == clean.components  # plugin versions are what they say
    from packaging.version import Version
    assert Version(dirty.version).local == local  # a PEP 440 local version
    # same uncommitted sources -> same version and bytes; a new untracked module is dirty too
    assert build_artifact(project, tmp_path / "again").sha256 == dirty.sha256
    target.write_text(target.read_text().replace("# local experiment\n", ""))
    (project / "fleet/gateway/extra.py").write_text("X = 1\n")
    assert "+dirty." in build_artifact(project, tmp_path / "untracked").version


def test_installed_package_builds_the_same_artifact_as_its_checkout(tmp_path):
    """`pip install .` ships no pyproject.toml: components come from the plugin manifests."""
    from fleet.release.component import INSTALLED_MAIN, installed_project
    from fleet.release.hostside import HOST_FILES, HOST_PACKAGES

    site = tmp_path / "site-packages"
    for rel in (*HOST_FILES, *HOST_PACKAGES, "fleet/plugins"):
        src = MAIN / rel
        if src.is_dir():
            import shutil
            shutil.copytree(src, site / rel, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_bytes(src.read_bytes())
    checkout = load_project(MAIN)
    installed = installed_project(site)
    assert installed.main == checkout.main == INSTALLED_MAIN
    assert set(installed.components) == set(checkout.components)
    assert verify(installed).versions == verify(checkout).versions
    art = build_artifact(site, tmp_path / "dist")
    assert art.version == verify(checkout).versions[checkout.main]
    with zipfile.ZipFile(art.path) as zf:
        assert "fleet/installer/cli.py" in zf.namelist()
