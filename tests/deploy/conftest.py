"""Fixtures for deploy tests: source trees with chosen versions, artifacts, sandbox hosts.

Artifacts come from `fleet.release.artifact.build_artifact` when it exists, else from a minimal
zipapp builder here with the same layout (docs/architecture.md, "Artifact").
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAKEGW = Path(__file__).with_name("fakegw.py")
HOST_SIDE = ("__init__.py", "continuity", "plugins", "gateway", "installer")


@dataclass
class Built:
    path: Path
    sha256: str
    version: str
    components: dict


def make_tree(dst: Path, bump: str | None = None, broken: bool = False) -> Path:
    """Copy the repo's sources; optionally set memory-continuity's version or break its import."""
    shutil.copytree(REPO / "fleet", dst / "fleet",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        if (REPO / name).exists():
            shutil.copy(REPO / name, dst / name)
    plugin = dst / "fleet" / "plugins" / "memory_continuity"
    if bump:
        for name in ("openclaw.plugin.json", "package.json"):
            data = json.loads((plugin / name).read_text())
            data["version"] = bump
            (plugin / name).write_text(json.dumps(data, indent=2) + "\n")
    if broken:
        main = json.loads((plugin / "package.json").read_text()).get("main", "plugin.py")
        (plugin / main).write_text('raise RuntimeError("broken release: import fails")\n')
    return dst


def _local_build(root: Path, out_dir: Path) -> Built:
    files = {}
    for top in HOST_SIDE:
        base = root / "fleet" / top
        paths = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for path in paths:
            if "__pycache__" in path.parts:
                continue
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    components = {}
    for manifest in sorted((root / "fleet" / "plugins").glob("*/openclaw.plugin.json")):
        data = json.loads(manifest.read_text())
        components[data["id"]] = data["version"]
    version = components["memory-continuity"]
    files["__main__.py"] = b"from fleet.installer.cli import main\nraise SystemExit(main())\n"
    manifest = {"version": version, "components": components,
                "files": {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}}
    files["fleet_manifest.json"] = json.dumps(manifest, sort_keys=True).encode()
    buf = io.BytesIO()
    buf.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, files[name])
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"fleet-{version}.pyz"
    path.write_bytes(buf.getvalue())
    return Built(path, hashlib.sha256(buf.getvalue()).hexdigest(), version, components)


def build(root: Path, out_dir: Path) -> Built:
    try:
        from fleet.release.artifact import build_artifact
    except ImportError:
        return _local_build(root, out_dir)
    art = build_artifact(root, out_dir)
    return Built(Path(art.path), art.sha256, str(art.version), dict(art.components))


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory):
    """Builds on demand, cached per (bump, broken): base, bumped, broken releases."""
    cache = {}

    def get(bump: str | None = None, broken: bool = False) -> Built:
        key = (bump, broken)
        if key not in cache:
            work = tmp_path_factory.mktemp("src")
            cache[key] = build(make_tree(work / "tree", bump, broken), work / "dist")
        return cache[key]

    return get


def gateway_pids(state_dirs) -> None:
    """Stop any gateway still running under these state dirs (fixture finalizer)."""
    for state in state_dirs:
        pidfile = Path(state) / "run" / "gateway.pid"
        try:
            pid = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def fake_manager_args():
    """Installer flags that use the stand-in gateway through the `command` manager."""
    py = sys.executable
    return ["--manager", "command",
            "--manager-opt", f'restart={py} {FAKEGW} restart "$FLEET_STATE_DIR"',
            "--manager-opt", f'stop={py} {FAKEGW} stop "$FLEET_STATE_DIR"']


@pytest.fixture
def host_states(tmp_path):
    """Three state dirs; every gateway started under them is stopped afterwards."""
    dirs = [tmp_path / "hosts" / name for name in ("a", "b", "c")]
    yield dirs
    gateway_pids(dirs)


def run_installer(artifact: Path, *args: str, python: str = sys.executable,
                  timeout: float = 120) -> tuple[int, dict]:
    proc = subprocess.run([python, str(artifact), *args], capture_output=True, text=True,
                          timeout=timeout)
    try:
        return proc.returncode, json.loads(proc.stdout)
    except ValueError:
        return proc.returncode, {"stdout": proc.stdout, "stderr": proc.stderr}
