"""The installer refuses hostile artifacts before writing anything (defence in depth: the
artifact is hash-checked, but a name from it must never become a path outside the state dir)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Callable, Dict, Optional

import pytest
from deploy_helpers import run_installer, stop_gateways


@pytest.fixture(autouse=True)
def _stop_gateways(tmp_path):
    """A wrongly accepted artifact starts a gateway: never leave it running."""
    yield
    stop_gateways([p.parent.parent for p in tmp_path.rglob("run/gateway.pid")])


def rewrite(src: Path, dst: Path, change: Optional[Dict[str, bytes]] = None,
            extra: Optional[Callable[[zipfile.ZipFile], None]] = None,
            manifest_edit: Optional[Callable[[dict], None]] = None) -> str:
    """Copy an artifact zip, replacing members (and their hashes in the manifest); its SHA-256."""
    change = dict(change or {})
    with zipfile.ZipFile(src) as zin:
        manifest = json.loads(zin.read("fleet_manifest.json"))
        for name, data in change.items():
            if name in (manifest.get("files") or {}):
                manifest["files"][name] = hashlib.sha256(data).hexdigest()
        if manifest_edit:
            manifest_edit(manifest)
        change["fleet_manifest.json"] = json.dumps(manifest).encode()
        with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
            for info in zin.infolist():
                zout.writestr(info, change.get(info.filename, zin.read(info)))
            if extra:
                extra(zout)
    return hashlib.sha256(dst.read_bytes()).hexdigest()


def install(path: Path, sha: str, state: Path):
    return run_installer(path, "install", "--state-dir", str(state), "--sha256", sha,
                         "--timeout", "20", "--manager", "fleet")


def tree(root: Path) -> set:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


@pytest.mark.parametrize("version", ["../../escaped", "/tmp/absolute-escape", "1.0\n"])
def test_a_manifest_version_that_is_a_path_is_refused(artifacts, tmp_path, version):
    state = tmp_path / "host" / "state"
    art = tmp_path / "evil.pyz"
    sha = rewrite(artifacts().path, art, manifest_edit=lambda m: m.update(version=version))
    code, data = install(art, sha, state)
    assert code != 0 and data["result"] == "failed", data
    assert "version" in data["reason"] and "refusing" in data["reason"]
    assert not (state / "fleet" / "releases").exists()
    assert tree(tmp_path / "host") <= {"state", "state/fleet", "state/fleet/deploy.lock",
                                       "state/fleet/audit.jsonl"}, tree(tmp_path / "host")


def test_a_plugin_id_that_is_a_path_is_refused(artifacts, tmp_path):
    state = tmp_path / "host" / "state"
    victim = tmp_path / "host" / "victim.txt"
    victim.parent.mkdir(parents=True)
    victim.write_text("keep me")
    base = artifacts()
    name = "fleet/plugins/mc/openclaw.plugin.json"
    with zipfile.ZipFile(base.path) as zf:
        manifest = json.loads(zf.read(name))
    manifest["id"] = "../../victim.txt"
    art = tmp_path / "evil.pyz"
    sha = rewrite(base.path, art, change={name: json.dumps(manifest).encode()})
    code, data = install(art, sha, state)
    assert code != 0 and "plugin id" in data["reason"], data
    assert victim.read_text() == "keep me" and not victim.is_symlink()
    assert not (state / "fleet" / "releases").exists()


def _bomb_member(size: int, name: str = "fleet/bomb.bin") -> Callable[[zipfile.ZipFile], None]:
    def add(zf: zipfile.ZipFile) -> None:
        with zf.open(zipfile.ZipInfo(name), "w", force_zip64=True) as fh:
            chunk = b"\0" * (1 << 20)
            for _ in range(size >> 20):
                fh.write(chunk)
    return add


def _many(zf: zipfile.ZipFile) -> None:
    for i in range(10_001):
        zf.writestr(f"fleet/many/{i}.txt", b"")


@pytest.mark.parametrize("extra,why", [
    (_bomb_member(80 << 20), "unpacks to"),
    (_many, "members"),
])
def test_a_zip_bomb_is_refused_before_unpacking(artifacts, tmp_path, extra, why):
    state = tmp_path / "state"
    art = tmp_path / "bomb.pyz"
    sha = rewrite(artifacts().path, art, extra=extra)
    code, data = install(art, sha, state)
    assert code != 0 and why in data["reason"] and "limit" in data["reason"], data
    assert not (state / "fleet" / "releases").exists()


def test_total_unpacked_size_is_bounded(artifacts, tmp_path):
    def five(zf: zipfile.ZipFile) -> None:
        for i in range(5):
            _bomb_member(60 << 20, f"fleet/bomb{i}.bin")(zf)

    state = tmp_path / "state"
    art = tmp_path / "bomb.pyz"
    sha = rewrite(artifacts().path, art, extra=five)
    code, data = install(art, sha, state)
    assert code != 0 and "more than" in data["reason"], data
    assert not (state / "fleet" / "releases").exists()
