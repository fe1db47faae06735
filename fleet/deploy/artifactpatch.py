"""A new artifact sent as a patch of the one the host already runs: only the bytes that changed.

Why: a release mostly repeats the one before it. The artifact is a zip whose members are
compressed one by one, so a member whose file did not change has the same bytes in both builds
(reproducible builds: fleet.release.artifact), yet a full upload sent all ~0.9 MB to every host:
~30 SSH packets per host, each built and encrypted in paramiko's Python on the control side,
and every byte over each host's own link.

How, in the round trips a deploy already makes:
1. A deploy's lease take (fleet.deploy.lease) asks a host that lacks the new artifact for the
   records of the one its current release came from (`zip_records`: each member's offset, length
   and CRC-32 of its bytes, read from the host's stored copy).
2. `plan` matches the new artifact's records to those: a record found there is copied on the
   host, everything else (changed members, the zip's directory) is sent. No patch when the host
   gave no usable records or the patch would not save at least half.
3. The upload command rebuilds the artifact on the host (`apply`, run by APPLY_PY) into a temp
   file, hashing as it writes, and keeps it only if it has exactly the size and SHA-256 built
   here, then runs its installer in the same process; else it says PATCH_FAILED, nothing is
   kept, and the control side sends the artifact whole. The installer checks the SHA-256
   again, as after any upload. A wrong or stale record from the host can cost a second
   upload, never a wrong artifact.

`zip_records` and `apply` run on hosts (shipped as their source: standard library only, Python
3.9); the rest runs here.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import threading
from pathlib import Path
from typing import Any, NamedTuple

PATCH_FAILED = "FLEET-PATCH-FAILED"
MAX_RECORDS = 65535  # a zip without ZIP64 holds no more members
WORTH = 0.5  # a patch is sent only when it is at most this share of the artifact


def zip_records(path):
    """[[offset, length, crc32], ...] of each member's record (local header and data) in the
    zip at `path` (a zipapp's leading shebang allowed), in the order of its directory; None when
    it is not a regular file (a FIFO is never waited on) or a plain zip of at most 64 MB. Runs
    on hosts: standard library only."""
    import os
    import stat
    import struct
    import zlib
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = fh.read((64 << 20) + 1)
    except OSError:
        return None
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 22 - 65535))
    if len(data) > 64 << 20 or end < 0 or len(data) < end + 22:
        return None
    count, cd_size, cd_off = struct.unpack_from("<HLL", data, end + 10)
    concat, pos = end - cd_size - cd_off, end - cd_size  # bytes before the zip (the shebang)
    view, records = memoryview(data), []
    for _ in range(count):
        if concat < 0 or pos < 0 or data[pos:pos + 4] != b"PK\x01\x02":
            return None
        (size,) = struct.unpack_from("<L", data, pos + 20)
        names, extra, comment = struct.unpack_from("<HHH", data, pos + 28)
        (offset,) = struct.unpack_from("<L", data, pos + 42)
        offset += concat
        if data[offset:offset + 4] != b"PK\x03\x04":
            return None
        local_names, local_extra = struct.unpack_from("<HH", data, offset + 26)
        length = 30 + local_names + local_extra + size
        if offset + length > end:
            return None
        records.append([offset, length, zlib.crc32(view[offset:offset + length])])
        pos += 46 + names + extra + comment
    return records


def apply(base, out, sha256, size, stream):
    """Rebuild an artifact into the file `out` from the patch on `stream` (a JSON line of
    operations, then the bytes they send) and the artifact `base`; True only when what was
    written has exactly `size` bytes and this SHA-256. Runs on hosts: standard library only."""
    import hashlib
    import json
    digest, written = hashlib.sha256(), 0
    try:
        ops = json.loads(stream.readline(1 << 20))
        with open(base, "rb") as src, open(out, "wb") as dst:
            for op in ops:
                want = op[-1]
                if not 0 <= want <= size - written:
                    return False
                if op[0] == "copy":
                    src.seek(op[1])
                    chunk = src.read(want)
                else:
                    chunk = stream.read(want)
                if len(chunk) != want:
                    return False
                digest.update(chunk)
                dst.write(chunk)
                written += len(chunk)
    except (OSError, ValueError, TypeError, IndexError, KeyError):
        return False
    return written == size and digest.hexdigest() == sha256


# argv: base, temp name, final name, sha256, size, then the installer's arguments; the patch on
# stdin. The rebuilt artifact is renamed into place and run as `python3 <final> <args>` would run
# it, in this process (a host pays one interpreter start for the rebuild and the install); one
# that is not the artifact is removed, and PATCH_FAILED said, exit 1.
APPLY_PY = inspect.getsource(apply) + f"""\
import os, runpy, sys
base, part, final, sha256, size = sys.argv[1:6]
ok = apply(base, part, sha256, int(size), sys.stdin.buffer)
sys.stdin.buffer.read()  # the rest of a patch it stopped reading, as a full upload's `cat`
if not ok:
    try:
        os.unlink(part)
    except OSError:
        pass
    print({PATCH_FAILED!r})
    sys.exit(1)
os.replace(part, final)
sys.argv = [final] + sys.argv[6:]
runpy.run_path(final, run_name="__main__")
"""
RECORDS_PY = inspect.getsource(zip_records)  # for the lease take's script


class Base(NamedTuple):
    """What a host said of the artifact its current release came from: its SHA-256 and its
    records as ((offset, length, crc32), ...)."""

    sha256: str
    records: tuple


class Patch(NamedTuple):
    """The bytes to send (the operations' JSON line, then the bytes they send) and the base
    they apply to; `reused`: the artifact's bytes the host copies from it."""

    data: bytes
    base_sha256: str
    reused: int


def base_of(answer: Any) -> Base | None:
    """A host's `{"sha256", "records"}` as a Base, or None when it is not one (what a host sends
    is data: every field is checked before a path or a number is taken from it)."""
    if not isinstance(answer, dict):
        return None
    sha, records = answer.get("sha256"), answer.get("records")
    if not (isinstance(sha, str) and len(sha) == 64
            and all(c in "0123456789abcdef" for c in sha)):
        return None
    if not isinstance(records, list) or not 0 < len(records) <= MAX_RECORDS:
        return None
    if not all(type(rec) is list and len(rec) == 3 for rec in records):
        return None
    values = list(itertools.chain.from_iterable(records))  # checked in C, not value by value
    if set(map(type, values)) != {int} or min(values) < 0 or max(values) >= 1 << 32:
        return None
    return Base(sha, tuple(map(tuple, records)))


def plan(artifact: Path, base: Base | None) -> Patch | None:
    """The patch that turns `base` into `artifact`, or None: no base, an artifact that is not a
    plain zip, or a patch that would not save at least half of the upload. Made once per run
    for the hosts that share a base (the artifact is read and its records summed once)."""
    if base is None:
        return None
    stat = artifact.stat()
    with _PLANNING:
        return _plan((str(artifact), stat.st_size, stat.st_mtime_ns), base.sha256, base.records)


# Hosts reach their upload together (a fleet's first wave all at once): without a lock each
# of them missed the caches below and read, summed and planned the artifact itself (57 of 64
# hosts, ~2 ms of CPU each), which is the work "once per run" is meant to save.
_PLANNING = threading.Lock()


@functools.lru_cache(maxsize=8)
def _artifact(key: tuple) -> tuple[bytes, list] | None:
    """The artifact's bytes and records, once per (path, size, mtime)."""
    records = zip_records(key[0])
    return (Path(key[0]).read_bytes(), records) if records else None


@functools.lru_cache(maxsize=16)
def _plan(key: tuple, base_sha256: str, base_records: tuple) -> Patch | None:
    made = _artifact(key)
    if made is None:
        return None
    data, records = made
    have = {(length, crc): offset for offset, length, crc in base_records}
    ops: list[list] = []
    sent: list[bytes] = []

    def send(start: int, end: int) -> None:
        if end <= start:
            return
        if ops and ops[-1][0] == "data":
            ops[-1][1] += end - start
        else:
            ops.append(["data", end - start])
        sent.append(data[start:end])

    pos = reused = 0
    for offset, length, crc in sorted(records):
        send(pos, offset)
        source = have.get((length, crc))
        if source is None:
            send(offset, offset + length)
        elif ops and ops[-1][0] == "copy" and ops[-1][1] + ops[-1][2] == source:
            ops[-1][2] += length  # the next record of the base too: one longer copy
            reused += length
        else:
            ops.append(["copy", source, length])
            reused += length
        pos = offset + length
    send(pos, len(data))
    body = json.dumps(ops, separators=(",", ":")).encode() + b"\n" + b"".join(sent)
    if len(body) > WORTH * len(data):
        return None
    return Patch(body, base_sha256, reused)
