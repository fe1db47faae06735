"""Damage an artifact so its member records keep their CRC-32: what a patch's records cannot
see (a CRC-32 is not a hash), so only the SHA-256 check of the rebuilt artifact can."""

from __future__ import annotations

import zlib
from pathlib import Path

from fleet.deploy import artifactpatch


def keep_crc(original: bytes, edited: bytearray, at: int) -> None:
    """Flip bits in edited[at:at + 4] so that crc32(edited) == crc32(original) (same length).

    CRC-32 is affine over GF(2) for a fixed length, and the 32 bits of 4 consecutive bytes
    change it independently: solve for the bits to flip."""
    n, zero = len(original), zlib.crc32(bytes(len(original)))
    basis: dict[int, tuple[int, int]] = {}  # highest bit -> (crc change, bits flipped)
    for bit in range(32):
        flip = bytearray(n)
        flip[at + bit // 8] = 1 << (bit % 8)
        value, combo = zlib.crc32(bytes(flip)) ^ zero, 1 << bit
        while value:
            top = value.bit_length() - 1
            if top not in basis:
                basis[top] = (value, combo)
                break
            value, combo = value ^ basis[top][0], combo ^ basis[top][1]
    need, combo = zlib.crc32(bytes(edited)) ^ zlib.crc32(original), 0
    while need:
        value, bits = basis[need.bit_length() - 1]
        need, combo = need ^ value, combo ^ bits
    for bit in range(32):
        if combo >> bit & 1:
            edited[at + bit // 8] ^= 1 << (bit % 8)
    assert zlib.crc32(bytes(edited)) == zlib.crc32(original)


def damage_unseen(base_path: Path, new_path: Path) -> None:
    """Change one byte of the artifact at `base_path` in the largest member record a patch to
    the artifact at `new_path` would copy from it, and 4 more so that record's CRC-32 stays."""
    wanted = {(length, crc) for _, length, crc in artifactpatch.zip_records(str(new_path))}
    records = artifactpatch.zip_records(str(base_path))
    offset, length, _ = max((r for r in records if (r[1], r[2]) in wanted), key=lambda r: r[1])
    data = bytearray(base_path.read_bytes())
    original = bytes(data[offset:offset + length])
    record = bytearray(original)
    record[length // 2] ^= 0x5A
    keep_crc(original, record, length // 2 + 1)
    data[offset:offset + length] = record
    base_path.write_bytes(bytes(data))
