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
