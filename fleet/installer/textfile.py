"""Text files a person edits and fleet reads: a regular file, at most so many bytes, UTF-8.

`openclaw.json` on a host and ssh_config on the control machine are written by people and by
other tools, and were read as whatever the path held: a FIFO there hung the reader on open, a
150 MB file was parsed and rewritten for minutes with a GiB of memory, and bytes that are not
UTF-8 ended in a raw UnicodeDecodeError or, decoded with replacement characters, in garbled
values used as if meant. This reader follows symlinks (a user may link their config from
elsewhere), refuses anything that is not a regular file without blocking on it and a file above
the caller's bound before reading it (fleet.continuity.regularfile owns those rules), and names
the line and column of the first byte that is not UTF-8. Host side (standard library only,
Python 3.9): the installer uses it, and the control side imports it from here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from fleet.continuity import regularfile
from fleet.continuity.regularfile import MIB, NOT_REGULAR, TOO_BIG, UNREADABLE, size_text

PathLike = Union[str, Path]
__all__ = ["MIB", "NOT_REGULAR", "NOT_UTF8", "TOO_BIG", "UNREADABLE", "TextFileError",
           "decode", "read_bytes", "size_text"]

NOT_UTF8 = "not utf-8"  # TextFileError.kind, beside regularfile's kinds


class TextFileError(ValueError):
    """The file cannot be read as a bounded UTF-8 text file; the message names the file and
    what is wrong with it, `kind` says which rule it broke (the caller adds the fix)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def read_bytes(path: PathLike, max_bytes: int) -> Optional[bytes]:
    """The file's bytes; None when nothing is there. TextFileError for anything but a regular
    file (symlinks followed, a FIFO never waited on), for a file above `max_bytes` (said before
    reading it), and for a file that cannot be opened (fleet.continuity.regularfile's rules)."""
    try:
        return regularfile.read_bytes(path, max_bytes)
    except regularfile.FileRefused as exc:
        raise TextFileError(str(exc), exc.kind) from None


def decode(data: bytes, path: PathLike) -> str:
    """`data` as UTF-8; TextFileError naming the file, line, column and byte of the first
    byte that is not UTF-8 (never a replacement character standing in for it)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise TextFileError(f"{path}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x} at line "
                            f"{line}, column {column}, offset {exc.start})", NOT_UTF8) from None
