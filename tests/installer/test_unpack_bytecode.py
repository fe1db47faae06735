"""`unpack` installs the artifact's bytecode into `__pycache__` for a matching Python only."""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fleet.continuity.statelayout import StateLayout
from fleet.installer import releasedirs

MODULES = ("fleet.gateway.service", "fleet.gateway.daemon")
PROBE = """\
import json, sys
for name in sys.argv[1:]:
    __import__(name)
print(json.dumps({n: {"file": m.__file__, "tampered": getattr(m, "TAMPERED", False)}
                  for n, m in sys.modules.items() if n.startswith("fleet")}))
"""


def install(tmp_path: Path, art) -> Path:
    path = Path(art.path)
    return releasedirs.unpack(tmp_path / "state", path, art.sha256,
                              releasedirs.read_artifact_manifest(path))


def zipped_sources(art) -> dict:
    with zipfile.ZipFile(str(art.path)) as zf:
        names = set(zf.namelist())
        return {n: zf.read(n + "c") for n in names if n.endswith(".py") and n + "c" in names}


def run_import(release: Path, *modules: str) -> tuple:
    """(modules -> info, bytecode files the import used): `-v` names each one it loads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(release), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-S", "-v", "-c", PROBE, *modules], cwd="/", env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    used = {line.split("code object from ", 1)[1].strip().strip("'")
            for line in proc.stderr.splitlines() if "code object from " in line}
    return json.loads(proc.stdout), used


def test_matching_bytecode_lands_in_pycache_and_is_used(tmp_path, artifacts):
    art = artifacts()
    release = install(tmp_path, art)
    sources = zipped_sources(art)
    assert "fleet/gateway/service.py" in sources
    assert list(release.rglob("*.pyc")) and not [
        p for p in release.rglob("*.pyc") if p.parent.name != "__pycache__"]
    for rel, pyc in sources.items():
        cached = release / importlib.util.cache_from_source(rel, optimization="")
        assert cached.read_bytes() == pyc, rel
    loaded, used = run_import(release, *MODULES)
    fleet_files = [info["file"] for info in loaded.values()]
    assert all(f.startswith(str(release)) for f in fleet_files)
    assert len(fleet_files) > 5
    for path in fleet_files:
        assert importlib.util.cache_from_source(path) in used, path


def test_a_changed_source_is_compiled_not_the_shipped_bytecode(tmp_path, artifacts):
    release = install(tmp_path, artifacts())
    service = release / "fleet" / "gateway" / "service.py"
    service.write_text(service.read_text() + "\nTAMPERED = True\n")
    loaded, used = run_import(release, *MODULES)
    assert loaded["fleet.gateway.service"]["tampered"] is True
    assert importlib.util.cache_from_source(str(service)) not in used
    assert importlib.util.cache_from_source(
        str(release / "fleet" / "gateway" / "daemon.py")) in used


def test_bytecode_of_another_python_is_not_installed(tmp_path, artifacts, monkeypatch):
    art = artifacts()
    monkeypatch.setattr(importlib.util, "MAGIC_NUMBER", b"\x00\x00\r\n")
    release = install(tmp_path, art)
    assert list(release.rglob("*.pyc")) == [] and list(release.rglob("__pycache__")) == []
    assert (release / "fleet" / "gateway" / "service.py").is_file()
    monkeypatch.undo()
    loaded, _ = run_import(release, *MODULES)
    assert "fleet.gateway.daemon" in loaded


def test_bytecode_not_matching_the_manifest_is_refused(tmp_path, artifacts):
    art = artifacts()
    bad = tmp_path / "bad.pyz"
    with zipfile.ZipFile(str(art.path)) as src, zipfile.ZipFile(str(bad), "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "fleet/gateway/service.pyc":
                data = data[:-1] + bytes([data[-1] ^ 1])
            dst.writestr(info, data)
    digest = hashlib.sha256(bad.read_bytes()).hexdigest()
    manifest = releasedirs.read_artifact_manifest(bad)
    with pytest.raises(releasedirs.UnusableRelease, match="service.pyc does not match"):
        releasedirs.unpack(tmp_path / "state", bad, digest, manifest)
    assert [p.name for p in StateLayout(tmp_path / "state").releases_dir.iterdir()] == []


UNPACK = """\
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from fleet.installer import releasedirs
art = Path(sys.argv[3])
manifest = releasedirs.read_artifact_manifest(art)
print(releasedirs.unpack(Path(sys.argv[2]), art, sys.argv[4], manifest))
"""
PY39 = next(iter(sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9")))),
            None)


@pytest.mark.skipif(PY39 is None, reason="no Python 3.9 interpreter on this machine")
def test_python_3_9_installs_no_foreign_bytecode(tmp_path, artifacts):
    art = artifacts()
    with zipfile.ZipFile(str(art.path)) as zf:  # the installer's own code, as a host runs it
        zf.extractall(str(tmp_path / "host"))
    proc = subprocess.run([PY39, "-I", "-c", UNPACK, str(tmp_path / "host"),
                           str(tmp_path / "state"),
                           str(art.path), art.sha256],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 0, proc.stderr
    release = Path(proc.stdout.strip())
    assert list(release.rglob("*.pyc")) == []
    meta = json.loads((release / releasedirs.META).read_text())
    assert meta["sha256"] == hashlib.sha256(Path(art.path).read_bytes()).hexdigest()
