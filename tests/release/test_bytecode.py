"""`build` ships checked-hash bytecode beside every source: zipimport uses it, never a stale one."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from release_fixtures import make_repo

from fleet.release.artifact import MANIFEST_NAME, build_artifact, current_artifact

HOST_TREES = ("fleet/continuity", "fleet/plugins", "fleet/gateway", "fleet/installer")
PROBE = """\
import json, runpy, sys
pyz = sys.argv[1]
sys.argv = [pyz, "--version"]
try:
    runpy.run_path(pyz, run_name="__main__")
except SystemExit as exc:
    assert not exc.code, exc.code
cli = sys.modules["fleet.installer.cli"]
print(json.dumps({"co_filename": cli.main.__code__.co_filename,
                  "tampered": getattr(cli, "TAMPERED", False)}), file=sys.stderr)
"""


@pytest.fixture
def project(tmp_path):
    return make_repo(tmp_path, extra_trees=HOST_TREES).path


def members(path) -> dict:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def rewrite(src, dst, changes: dict) -> None:
    """A copy of the artifact with some members replaced (the manifest hashes updated too)."""
    files = members(src)
    files.update(changes)
    manifest = json.loads(files[MANIFEST_NAME])
    for name, data in changes.items():
        manifest["files"][name] = hashlib.sha256(data).hexdigest()
    files[MANIFEST_NAME] = json.dumps(manifest).encode()
    with open(dst, "wb") as fh:
        fh.write(b"#!/usr/bin/env python3\n")
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            for name in sorted(files):
                zf.writestr(name, files[name])


def probe(pyz, tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", PROBE, str(pyz)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stderr.strip().splitlines()[-1])


def test_every_source_has_checked_hash_bytecode(project, tmp_path):
    art = build_artifact(project, tmp_path / "dist")
    files = members(art.path)
    manifest = json.loads(files[MANIFEST_NAME])
    sources = sorted(n for n in files if n.endswith(".py"))
    assert "__main__.py" in sources and "fleet/installer/cli.py" in sources
    assert sorted(n for n in files if n.endswith(".pyc")) == sorted(n + "c" for n in sources)
    for rel in sources:
        pyc = files[rel + "c"]
        assert pyc[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(pyc[4:8], "little") == 0b11  # hash-based, checked (PEP 552)
        assert pyc[8:16] == importlib.util.source_hash(files[rel])
        assert marshal.loads(pyc[16:]).co_filename == rel  # no build-machine path
        assert str(tmp_path).encode() not in pyc
        assert manifest["files"][rel + "c"] == hashlib.sha256(pyc).hexdigest()


def test_same_bytes_from_another_checkout_and_hash_seed(project, tmp_path, monkeypatch):
    first = build_artifact(project, tmp_path / "out1")
    other = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(project, other, symlinks=True)  # as a clone has them: the bridge links
    monkeypatch.setenv("PYTHONHASHSEED", "12345")
    second = build_artifact(other, tmp_path / "out2")
    assert first.path.read_bytes() == second.path.read_bytes()
    assert current_artifact(other, tmp_path / "out1") == first  # reuse sees the same manifest


def test_zipimport_uses_the_bytecode_and_rejects_it_for_a_changed_source(project, tmp_path):
    art = build_artifact(project, tmp_path / "dist")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run(["python3", "-I", "-S", str(art.path), "--version"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["version"] == art.version
    # loaded from the pyc, code keeps the build's relative name; compiled from source, the
    # archive path
    assert probe(art.path, tmp_path) == {"co_filename": "fleet/installer/cli.py",
                                         "tampered": False}
    source = members(art.path)["fleet/installer/cli.py"]
    tampered = tmp_path / "tampered.pyz"
    rewrite(art.path, tampered, {"fleet/installer/cli.py": source + b"\nTAMPERED = True\n"})
    assert probe(tampered, tmp_path) == {"co_filename": f"{tampered}/fleet/installer/cli.py",
                                         "tampered": True}


def test_bytecode_of_another_python_is_ignored(project, tmp_path):
    art = build_artifact(project, tmp_path / "dist")
    pyc = members(art.path)["fleet/installer/cli.pyc"]
    foreign = tmp_path / "foreign.pyz"
    rewrite(art.path, foreign, {"fleet/installer/cli.pyc": b"\x00\x00\r\n" + pyc[4:]})
    assert probe(foreign, tmp_path)["co_filename"] == f"{foreign}/fleet/installer/cli.py"


def test_reuse_check_does_not_compile_and_refuses_foreign_or_stale_bytecode(project, tmp_path,
                                                                             monkeypatch):
    """Every `invoke deploy` asks whether the build is current: that answer reads the pyc
    headers (magic, checked-hash flag, source hash) instead of compiling everything again."""
    import fleet.release.artifact as artifact

    out = tmp_path / "out"
    built = build_artifact(project, out)

    def no_compiling(sources):
        raise AssertionError("current_artifact compiled the sources")

    monkeypatch.setattr(artifact, "_bytecode", no_compiling)
    assert current_artifact(project, out) == built
    name = "fleet/installer/cli.pyc"
    original = members(built.path)[name]
    for changed in (b"\x00\x00\r\n" + original[4:],                       # another Python
                    original[:8] + bytes(8) + original[16:]):             # another source
        rewrite(built.path, built.path, {name: changed})
        built.path.with_name(built.path.name + ".sha256").write_text(
            hashlib.sha256(built.path.read_bytes()).hexdigest() + "\n")
        assert current_artifact(project, out) is None
