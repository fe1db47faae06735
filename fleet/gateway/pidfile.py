"""The gateway pidfile: held under an exclusive flock for the whole life of the process.

A pid alone can be stale (kill -9, reboot, pid reuse); the lock cannot: the kernel drops it when
the process dies. So "running" means "someone holds the lock", and the pid in the file names it.
The file is never unlinked, only truncated, so two starters always contend for the same inode.
Its content is fleet's one pidfile record (fleet/continuity/detached.py: pid, start time, argv).
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
import time
from pathlib import Path
from typing import Optional

from fleet.continuity.detached import PidRecord
from fleet.continuity.private import open_regular


class AlreadyRunning(RuntimeError):
    """Another gateway holds the pidfile lock."""

    def __init__(self, pid: Optional[int], path: Path) -> None:
        self.pid = pid
        shown = pid if pid else "unknown (starting up)"
        super().__init__(f"gateway already running (pid {shown}, pidfile {path})")


def _read_pid(fd: int) -> Optional[int]:
    os.lseek(fd, 0, os.SEEK_SET)
    record = PidRecord.parse(os.read(fd, 65536).decode("utf-8", "replace"))
    return record.pid if record is not None else None


class PidFile:
    """Acquire once at startup; the lock lives as long as this object's fd (the process)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.fd: Optional[int] = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_regular(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            pid = None
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                pid = _wait_for_pid(fd)
            os.close(fd)
            raise AlreadyRunning(pid, self.path) from exc
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, PidRecord.of(os.getpid(), sys.argv).line().encode("utf-8"))
        os.fsync(fd)
        self.fd = fd

    def release(self) -> None:
        """Truncate and unlock (at clean exit; a crash releases the lock by itself)."""
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)
        finally:
            os.close(self.fd)
            self.fd = None


def _wait_for_pid(fd: int, timeout_s: float = 0.5) -> Optional[int]:
    """The holder writes its pid right after locking; give it a moment."""
    deadline = time.monotonic() + timeout_s
    while True:
        pid = _read_pid(fd)
        if pid or time.monotonic() >= deadline:
            return pid
        time.sleep(0.01)


def running_pid(path: Path) -> Optional[int]:
    """The pid of the live gateway holding the lock, 0 if it holds it but wrote no pid yet,
    None if nobody holds it (no file, or a stale file left by a dead process)."""
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return _wait_for_pid(fd) or 0
            raise
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)

