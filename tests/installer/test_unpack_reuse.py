"""A new release reuses (hard-links) the files the active one already has, checked first.

Through deploys on a sandbox host: the second release's unchanged files are the first's inodes,
its changed ones are its own, and a damaged file of the active release is never carried over.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

from deploy_helpers import release_of

from fleet.continuity.statelayout import StateLayout


def release_dir(sandbox, built) -> Path:
    return sandbox.state("a") / StateLayout.RELEASES / release_of(built)


def manifest_files(root: Path) -> dict[str, str]:
    return json.loads((root / StateLayout.MANIFEST).read_text())["files"]


def test_unchanged_files_are_linked_from_the_active_release(sandbox, artifacts):
    one, two = artifacts(bump="5.0.1"), artifacts(bump="5.0.2")
    assert sandbox.deploy(one, hosts="a")["a"].result == "installed"
    assert sandbox.deploy(two, hosts="a")["a"].result == "installed"
    old, new = release_dir(sandbox, one), release_dir(sandbox, two)
    old_hashes, new_hashes = manifest_files(old), manifest_files(new)
    same = [rel for rel, digest in new_hashes.items()
            if old_hashes.get(rel) == digest and not rel.endswith(".pyc")]
    changed = [rel for rel, digest in new_hashes.items() if old_hashes.get(rel) != digest]
    assert same and changed
    for rel in same:
        assert os.stat(new / rel).st_ino == os.stat(old / rel).st_ino, rel
    for rel in changed:
        if (new / rel).exists():
            assert os.stat(new / rel).st_ino != os.stat(old / rel).st_ino, rel
    for rel, digest in new_hashes.items():  # every file is what the manifest says
        if (new / rel).exists():
            assert hashlib.sha256((new / rel).read_bytes()).hexdigest() == digest, rel


def test_a_damaged_file_of_the_active_release_is_not_carried_over(sandbox, artifacts):
    one, two = artifacts(bump="5.0.1"), artifacts(bump="5.0.2")
    sandbox.deploy(one, hosts="a")
    old = release_dir(sandbox, one)
    with zipfile.ZipFile(two.path) as zf:
        coming = json.loads(zf.read(StateLayout.MANIFEST))["files"]
    old_hashes = manifest_files(old)
    rel = next(r for r in sorted(old_hashes) if r.endswith(".py") and "plugins" in r
               and coming.get(r) == old_hashes[r])  # a file the new release would reuse
    good = (old / rel).read_bytes()
    damaged = bytes([good[0] ^ 1]) + good[1:]  # same size, other bytes
    (old / rel).write_bytes(damaged)
    result = sandbox.deploy(two, hosts="a")["a"]
    assert result.result == "installed", result.note
    new = release_dir(sandbox, two)
    new_hashes = manifest_files(new)
    assert hashlib.sha256((new / rel).read_bytes()).hexdigest() == new_hashes[rel]
    assert os.stat(new / rel).st_ino != os.stat(old / rel).st_ino
    assert (old / rel).read_bytes() == damaged  # the old release is left as it was


def foreign_bytecode(built, out: Path):
    """`built` as another Python version's build would be: its bytecode has a magic number no
    interpreter has, so this one compiles the sources itself (as a 3.9 host does with a 3.11
    build), writing its own `__pycache__` in the release."""
    from deploy_helpers import Built

    buf = out / built.path.name
    with zipfile.ZipFile(built.path) as src, zipfile.ZipFile(buf, "w") as dst:
        manifest = json.loads(src.read(StateLayout.MANIFEST))
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".pyc"):
                data = b"\0\0\r\n" + data[4:]
                manifest["files"][info.filename] = hashlib.sha256(data).hexdigest()
            if info.filename == StateLayout.MANIFEST:
                continue
            dst.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
        dst.writestr(StateLayout.MANIFEST, json.dumps(manifest, indent=2, sort_keys=True))
    digest = hashlib.sha256(buf.read_bytes()).hexdigest()
    return Built(buf, digest, built.version, built.components)


def test_bytecode_the_host_compiled_is_kept_for_the_sources_a_release_reuses(sandbox, artifacts,
                                                                          tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)  # a host's Python writes it
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = foreign_bytecode(artifacts(bump="5.0.1"), tmp_path / "one")
    two = foreign_bytecode(artifacts(bump="5.0.2"), tmp_path / "two")
    assert sandbox.deploy(one, hosts="a")["a"].result == "installed"
    old = sandbox.state("a") / StateLayout.RELEASES / f"5.0.1-{one.sha256[:12]}"
    compiled = sorted(old.rglob("__pycache__/*.pyc"))  # what the gateway's start compiled
    assert any("daemon" in p.name for p in compiled), compiled
    assert sandbox.deploy(two, hosts="a")["a"].result == "installed"
    assert sandbox.health("a")["ready"]
    new = sandbox.state("a") / StateLayout.RELEASES / f"5.0.2-{two.sha256[:12]}"
    old_hashes, new_hashes = manifest_files(old), manifest_files(new)
    for pyc in compiled:
        rel = pyc.relative_to(old)
        source = f"{rel.parent.parent}/{pyc.name.split('.')[0]}.py"
        if old_hashes.get(source) == new_hashes.get(source):  # a source the release reused
            assert os.stat(new / rel).st_ino == pyc.stat().st_ino, rel
        elif (new / rel).exists():  # a changed one: compiled again, never the old bytecode
            assert os.stat(new / rel).st_ino != pyc.stat().st_ino, rel
