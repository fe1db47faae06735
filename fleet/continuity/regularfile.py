"""Reading a file on a host: a regular file only, never waited on, never read past a bound.

Everything the host side reads (state files, configs, manifests, pid files, leases, logs) sits
in places an agent with a shell tool, another program or a person can change: a FIFO there
hung the reader on open (a gateway thread blocked for good, a doctor held until its caller's
timeout), a symlink to /dev/zero was read until the kernel killed the process. One reader owns
the rules: open without blocking (O_NONBLOCK), check the open file is a regular file (fstat,
so nothing can swap it after the check), refuse it when it is larger than the caller's bound
before reading it, and read at most the bound even if it grows meanwhile. `follow=False` also
refuses a symlink as the last part of the path: fleet writes its own files by atomic rename,
which would replace such a link anyway, so one there was not put by fleet.

`FileRefused` is an OSError (callers that already report "cannot read X" report it too) with
`kind` saying which rule the file broke and a message that names the file. Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Optional, Union

PathLike = Union[str, "os.PathLike[str]"]
MIB = 1024 * 1024
# a manifest, a pid file, release metadata: kilobytes; a file this large was not written by fleet
META_MAX_BYTES = MIB

# FileRefused.kind
NOT_REGULAR, TOO_BIG, UNREADABLE = "not regular", "too big", "unreadable"


class FileRefused(OSError):
    """A file that is not read: not a regular file, larger than its bound, or unopenable. The
    message names the file and what it is; `kind` is one of NOT_REGULAR, TOO_BIG, UNREADABLE."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind

    def __str__(self) -> str:
        return str(self.args[0])


def size_text(n: int) -> str:
    """`4 MiB` for whole mebibytes, else `N bytes`: how a bound is said in messages."""
    return f"{n // MIB} MiB" if n >= MIB and n % MIB == 0 else f"{n:,} bytes"


def what(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO")."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: PathLike, follow: bool = True) -> int:
    """A read-only, blocking fd on `path`, which must be a regular file. FileNotFoundError (and
    NotADirectoryError) when nothing is there; FileRefused for anything else that is wrong."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(os.fspath(path), flags)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise FileRefused(f"{os.fspath(path)}: a symlink, not a regular file (fleet does "
                              "not read its files through links)", NOT_REGULAR) from None
        raise FileRefused(f"{os.fspath(path)}: cannot read it ({exc.strerror or exc})",
                          UNREADABLE) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"{os.fspath(path)}: {what(st.st_mode)}, not a regular file",
                              NOT_REGULAR)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: PathLike, max_bytes: int, follow: bool = True,
               cut: bool = False) -> Optional[bytes]:
    """The file's bytes; None when nothing is there. FileRefused when it is not a regular file
    or cannot be opened, and when it is larger than `max_bytes` (said before reading it), unless
    `cut`: then its first `max_bytes` bytes (for files whose head is enough)."""
    try:
        fd = open_regular(path, follow)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes and not cut:
            raise FileRefused(f"{os.fspath(path)}: {size_text(size)}, larger than "
                              f"{size_text(max_bytes)}", TOO_BIG)
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise FileRefused(f"{os.fspath(path)}: cannot read it ({exc.strerror or exc})",
                              UNREADABLE) from None
    if len(data) > max_bytes:  # it grew while being read
        if cut:
            return data[:max_bytes]
        raise FileRefused(f"{os.fspath(path)}: larger than {size_text(max_bytes)}", TOO_BIG)
    return data


def read_text(path: PathLike, max_bytes: int = META_MAX_BYTES, follow: bool = True) -> str:
    """`read_bytes` decoded as strict UTF-8, for the small files fleet itself writes (manifests,
    pid and ready files, release metadata): a drop-in for `Path.read_text`, so a missing file is
    FileNotFoundError and bytes that are not UTF-8 are UnicodeDecodeError."""
    data = read_bytes(path, max_bytes, follow)
    if data is None:
        raise FileNotFoundError(errno.ENOENT, "no such file", os.fspath(path))
    return data.decode("utf-8")
