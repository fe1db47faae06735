"""A new release sent as a patch of the one the host runs: the host rebuilds exactly the artifact
that was built, from a small share of its bytes, or keeps nothing and says so (then the control
side sends the artifact whole)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import zipfile
import zlib

import pytest

from fleet.deploy import artifactpatch
from fleet.deploy.artifactpatch import Base


def rebuild(base_path, where, built, patch) -> subprocess.CompletedProcess:
    """The host's side, as the upload command runs it: APPLY_PY in its own Python process,
    which rebuilds `where/new.pyz` and runs it (here: `--version`)."""
    return subprocess.run([sys.executable, "-I", "-S", "-c", artifactpatch.APPLY_PY,
                           str(base_path), str(where / "new.pyz.part"), str(where / "new.pyz"),
                           built.sha256, str(built.path.stat().st_size), "--version"],
                          input=patch.data, capture_output=True, text=False, timeout=60)


def base_of(path, sha256: str) -> Base:
    """What a host that runs the artifact at `path` says of it in the lease take."""
    return artifactpatch.base_of({"sha256": sha256,
                                  "records": artifactpatch.zip_records(str(path))})


def test_a_release_is_rebuilt_exactly_from_a_small_patch_of_the_one_before(artifacts, tmp_path):
    old, new = artifacts(), artifacts(bump="5.0.1")
    patch = artifactpatch.plan(new.path, base_of(old.path, old.sha256))
    size = new.path.stat().st_size
    assert patch is not None and patch.base_sha256 == old.sha256
    assert len(patch.data) < size / 10, (len(patch.data), size)
    assert patch.reused > size / 2
    proc = rebuild(old.path, tmp_path, new, patch)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "new.pyz").read_bytes() == new.path.read_bytes()
    assert b"5.0.1" in proc.stdout  # the rebuilt artifact's installer ran, in the same process
    assert not (tmp_path / "new.pyz.part").exists()


def test_a_base_whose_bytes_changed_since_it_was_described_rebuilds_nothing(artifacts,
                                                                           tmp_path):
    """Its records no longer describe it (the file was damaged after the take, or two records
    share a CRC-32): the SHA-256 of the rebuilt file is not the one built, so the host keeps
    nothing under the artifact's name and the control side sends it whole."""
    old, new = artifacts(), artifacts(bump="5.0.1")
    base = base_of(old.path, old.sha256)
    patch = artifactpatch.plan(new.path, base)
    copied = next(op for op in _ops(patch) if op[0] == "copy")
    damaged = tmp_path / "base.pyz"
    data = bytearray(old.path.read_bytes())
    data[copied[1] + copied[2] // 2] ^= 0x01
    damaged.write_bytes(bytes(data))
    for base in (damaged, tmp_path / "gone.pyz"):  # damaged, or no base at all
        proc = rebuild(base, tmp_path, new, patch)
        assert proc.returncode == 1
        assert proc.stdout.decode().split()[-1] == artifactpatch.PATCH_FAILED
        assert sorted(p.name for p in tmp_path.iterdir()) == ["base.pyz"]  # nothing kept


def test_a_patch_that_would_save_less_than_half_is_not_made(artifacts, tmp_path):
    new = artifacts(bump="5.0.1")
    unrelated = tmp_path / "other.zip"
    with zipfile.ZipFile(unrelated, "w") as zf:
        zf.writestr("fleet/__init__.py", "other\n")
    assert artifactpatch.plan(new.path, base_of(unrelated, "a" * 64)) is None
    assert artifactpatch.plan(new.path, None) is None


def test_records_are_the_members_of_a_zipapp_and_nothing_else_is_one(artifacts, tmp_path):
    built = artifacts()
    records = artifactpatch.zip_records(str(built.path))
    data = built.path.read_bytes()
    assert records and data.startswith(b"#!")  # offsets count the shebang before the zip
    for offset, length, crc in records:
        assert data[offset:offset + 4] == b"PK\x03\x04"
        assert zlib.crc32(data[offset:offset + length]) == crc
    (tmp_path / "text").write_text("not a zip\n")
    (tmp_path / "cut.pyz").write_bytes(data[: len(data) // 2])
    os.mkfifo(tmp_path / "fifo")  # never waited on
    for path in ("text", "cut.pyz", "missing", "fifo"):
        assert artifactpatch.zip_records(str(tmp_path / path)) is None


@pytest.mark.parametrize("answer", [
    None, "x", {"sha256": "../../etc/passwd", "records": [[0, 1, 2]]},
    {"sha256": "A" * 64, "records": [[0, 1, 2]]},  # not the lowercase hex a SHA-256 is sent as
    {"sha256": "a" * 64, "records": []}, {"sha256": "a" * 64, "records": [[0, 1]]},
    {"sha256": "a" * 64, "records": [[0, -1, 2]]}, {"sha256": "a" * 64, "records": [[0, 1, 2.0]]},
    {"sha256": "a" * 64, "records": [[0, True, 2]]}, {"sha256": "a" * 64, "records": "0,1,2"},
    {"sha256": "a" * 64, "records": [[0, 1, 1 << 32]]},
])
def test_what_a_host_says_of_its_base_is_checked_before_it_is_used(answer):
    assert artifactpatch.base_of(answer) is None


def test_hosts_reaching_their_upload_together_share_one_plan(artifacts, monkeypatch):
    """A fleet's first wave reaches its upload at once: the artifact is read, summed and
    planned once for all of them, not once per host that missed the cache."""
    old, new = artifacts(), artifacts(bump="5.0.2")
    reads = []
    real = artifactpatch.zip_records

    def slow_records(path):
        reads.append(path)
        time.sleep(0.05)  # long enough for every other host to arrive meanwhile
        return real(path)

    monkeypatch.setattr(artifactpatch, "zip_records", slow_records)
    base = base_of(old.path, old.sha256)
    reads.clear()
    start, patches = threading.Barrier(16), []

    def upload() -> None:
        start.wait(timeout=10)
        patches.append(artifactpatch.plan(new.path, base))

    threads = [threading.Thread(target=upload) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(patches) == 16 and patches[0] is not None
    assert all(p is patches[0] for p in patches)
    assert reads == [str(new.path)]


def _ops(patch) -> list:
    return json.loads(patch.data.split(b"\n", 1)[0])
