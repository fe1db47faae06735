"""Text files a person edits and fleet reads: a regular file, at most so many bytes, UTF-8.

`openclaw.json` on a host and ssh_config on the control machine are written by people and by
other tools, and were read as whatever the path held: a FIFO there hung the reader on open, a
150 MB file was parsed and rewritten for minutes with a GiB of memory, and bytes that are not
UTF-8 ended in a raw UnicodeDecodeError or, decoded with replacement characters, in garbled
values used as if meant. One reader owns these rules: it follows symlinks (a user may link their
config from elsewhere), refuses anything that is not a regular file without blocking on it,
refuses a file above the caller's bound before reading it, and names the line and column of the
first byte that is not UTF-8. Host side (standard library only, Python 3.9): the installer uses
it, and the control side imports it from here.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional, Union

PathLike = Union[str, Path]
MIB = 1024 * 1024

# TextFileError.kind
NOT_REGULAR, TOO_BIG, NOT_UTF8, UNREADABLE = "not regular", "too big", "not utf-8", "unreadable"


class TextFileError(ValueError):
    """The file cannot be read as a bounded UTF-8 text file; the message names the file and
    what is wrong with it, `kind` says which rule it broke (the caller adds the fix)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def size_text(n: int) -> str:
    """`4 MiB` for whole mebibytes, else `N bytes`: how a bound is said in messages."""
    return f"{n // MIB} MiB" if n >= MIB and n % MIB == 0 else f"{n:,} bytes"


def _what(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: PathLike, max_bytes: int) -> Optional[bytes]:
    """The file's bytes; None when nothing is there. TextFileError for anything but a regular
    file (symlinks followed, a FIFO never waited on), for a file above `max_bytes` (said before
    reading it), and for a file that cannot be opened."""
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TextFileError(f"{path}: cannot read it ({exc.strerror or exc})",
                            UNREADABLE) from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TextFileError(f"{path}: {_what(st.st_mode)}, not a regular file",
                                NOT_REGULAR)
        if st.st_size > max_bytes:
            raise TextFileError(f"{path}: {size_text(st.st_size)}, larger than "
                                f"{size_text(max_bytes)}", TOO_BIG)
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise TextFileError(f"{path}: cannot read it ({exc.strerror or exc})",
                                UNREADABLE) from None
        if len(data) > max_bytes:  # it grew while being read
            raise TextFileError(f"{path}: larger than {size_text(max_bytes)}", TOO_BIG)
        return data


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
