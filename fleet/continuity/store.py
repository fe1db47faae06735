"""Safe state files: an exclusive lock around every read-modify-write, atomic replacement.

A crash leaves the old or the new file, never a torn one, and concurrent writers (threads,
processes, another gateway) lose nothing: each holds `<file>.lock` via `fcntl.flock` while it
reads, changes and replaces the file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from typing import Callable, Dict, Iterator, Optional, Union

from fleet.continuity import regularfile
from fleet.continuity.atomicfile import atomic_write
from fleet.continuity.private import open_regular

DEFAULT_LOCK_TIMEOUT = 30.0
# the largest state file read whole: a CURRENT_STATE.md, a day's session log, an archive is
# kilobytes; one this large was not written by the plugins
MAX_BYTES = 8 * regularfile.MIB
_POLL = 0.01

PathLike = Union[str, "os.PathLike[str]"]


class LockTimeout(TimeoutError):
    """The state file's lock was not acquired in time (another writer is stuck)."""


_held = threading.local()


def _held_counts() -> Dict[str, int]:
    counts = getattr(_held, "counts", None)
    if counts is None:
        counts = {}
        _held.counts = counts
    return counts


def lock_path(path: PathLike) -> str:
    """`<path>.lock`, as a string: a Path would intern the new name on every lock (pathlib
    interns every part of every path it builds; see tempfiles.temp_path)."""
    return os.fspath(path) + ".lock"


@contextlib.contextmanager
def locked(path: PathLike, timeout: float = DEFAULT_LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the exclusive lock of `path` (re-entrant within one thread); raise `LockTimeout`
    naming the lock file after `timeout` seconds."""
    lp = lock_path(path)
    key = os.path.abspath(lp)
    counts = _held_counts()
    if counts.get(key):
        counts[key] += 1
        try:
            yield
        finally:
            counts[key] -= 1
        return
    os.makedirs(os.path.dirname(lp) or ".", exist_ok=True)
    # a FIFO or a symlink planted at the lock path is refused, never waited on or followed
    fd = open_regular(lp, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        deadline = time.monotonic() + max(timeout, 0.0)
        delay = _POLL
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                if time.monotonic() >= deadline:
                    raise LockTimeout(
                        f"could not lock {lp} within {timeout:g}s: another writer holds it; "
                        "retry, or stop the stuck process (the lock is released when it exits)"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        counts[key] = 1
        try:
            yield
        finally:
            counts.pop(key, None)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def read_text(path: PathLike, max_bytes: Optional[int] = None) -> Optional[str]:
    """The file as text (invalid UTF-8 replaced by U+FFFD), or None when it does not exist.

    Read as fleet.continuity.regularfile reads: a regular file only (a FIFO, a device or a
    symlink in its place is `regularfile.FileRefused`, never waited on or followed), at most
    `MAX_BYTES` (larger: FileRefused naming the file). `max_bytes` reads only the first that
    many bytes instead, for files written by someone we do not trust (a child).
    """
    bound, cut = (MAX_BYTES, False) if max_bytes is None else (max_bytes, True)
    data = regularfile.read_bytes(path, bound, follow=False, cut=cut)
    return None if data is None else data.decode("utf-8", errors="replace")


def update(
    path: PathLike,
    fn: Callable[[Optional[str]], Optional[str]],
    default: Optional[str] = None,
    timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> Optional[str]:
    """Read-modify-write under the lock: `fn(current or default)` returns the new text, or None to
    leave the file alone. Returns the file's text afterwards."""
    with locked(path, timeout=timeout):
        current = read_text(path)
        base = current if current is not None else default
        new = fn(base)
        if new is None or new == current:
            return current
        atomic_write(path, new)
        return new
