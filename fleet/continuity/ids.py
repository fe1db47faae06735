"""Random ids for the host side: version-4 UUIDs made from `os.urandom`, without `uuid`.

Why: `import uuid` pulls in `platform`, a few ms of CPU in every host process (the installer,
the supervisor, the gateway) on a small board, for ids that need only 122 random bits in the
standard text format. These are the same ids `uuid.uuid4()` makes: the same source of
randomness, the same version and variant bits, the same text.
"""

from __future__ import annotations

import os


def uuid4_hex() -> str:
    """A random UUID as 32 lowercase hex digits, as `uuid.uuid4().hex` writes it."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return raw.hex()


def uuid4() -> str:
    """A random UUID as `str(uuid.uuid4())` writes it: 8-4-4-4-12 lowercase hex digits."""
    h = uuid4_hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
