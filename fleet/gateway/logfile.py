"""The gateway's log file, rotated by size: `logs/gateway.log`, then `.1` (newest) .. `.N`.

The spawner (fleet.gateway.process.command) points the gateway's stdout and stderr at
`logs/gateway.log`. When that is so, the gateway logs through `RotatingLog` instead of stderr:
before a record would push the file past `max_bytes`, the file is renamed to `.1` (older ones
shift, the oldest is dropped) and a new one is opened; the record goes whole into the new file,
so no line is ever split or lost. Then fds 1 and 2 are pointed at the new file too, so a
plugin's print or a traceback lands in the current file, not in a renamed one.

Limits: `FLEET_GATEWAY_LOG_MAX_BYTES` (default 10 MiB) and `FLEET_GATEWAY_LOG_BACKUPS`
(default 3). A gateway whose stderr is anything else (a terminal, systemd's journal) logs to
stderr as before and rotates nothing.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

MAX_BYTES = 10 * 1024 * 1024
BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RotatingLog(logging.FileHandler):
    """A size-rotated log file that keeps `fds` (stdout, stderr) on the current file.

    The rotation of logging.handlers.RotatingFileHandler, written out: importing that module
    (pickle, queue and its socket handlers behind it) cost a gateway start about 4 ms of CPU."""

    def __init__(self, path: Path, max_bytes: int = MAX_BYTES, backups: int = BACKUPS,
                 fds: Sequence[int] = (1, 2)) -> None:
        super().__init__(str(path), mode="a", encoding="utf-8")
        self.max_bytes, self.backups = max(1, max_bytes), max(1, backups)
        self.fds = tuple(fds)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self._would_overflow(record):
                self.rotate_now()
            super().emit(record)
        except Exception:  # noqa: BLE001 (logging's contract: a handler never raises)
            self.handleError(record)

    def _would_overflow(self, record: logging.LogRecord) -> bool:
        """Whether this record would take the file to `max_bytes` (never for a file that is
        not a regular one, as the standard handler)."""
        if os.path.exists(self.baseFilename) and not os.path.isfile(self.baseFilename):
            return False
        if self.stream is None:
            self.stream = self._open()
        self.stream.seek(0, 2)
        return self.stream.tell() + len(self.format(record)) + 1 >= self.max_bytes

    def rotate_now(self) -> None:
        """`.N-1` -> `.N` ... `.1` -> `.2`, the file -> `.1` (the oldest dropped), a new file,
        and fds 1 and 2 pointed at it."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        if self.stream is not None:
            self.stream.close()
            self.stream = None
        base = self.baseFilename
        for i in range(self.backups - 1, 0, -1):
            if os.path.exists(f"{base}.{i}"):
                os.replace(f"{base}.{i}", f"{base}.{i + 1}")
        if os.path.exists(base):
            os.replace(base, f"{base}.1")
        self.stream = self._open()
        for fd in self.fds:
            try:
                os.dup2(self.stream.fileno(), fd)
            except OSError:
                pass


def limits(env: Optional[Mapping[str, str]] = None) -> tuple:
    """(max_bytes, backups) from the environment; bad values fall back to the defaults."""
    env = os.environ if env is None else env

    def number(name: str, default: int) -> int:
        try:
            value = int(env.get(name, ""))
        except ValueError:
            return default
        return value if value > 0 else default

    return number("FLEET_GATEWAY_LOG_MAX_BYTES", MAX_BYTES), number("FLEET_GATEWAY_LOG_BACKUPS",
                                                                   BACKUPS)


def stderr_is(path: Path) -> bool:
    """Whether fd 2 is the file at `path` (the spawner redirected us there)."""
    try:
        mine, theirs = os.fstat(2), os.stat(str(path))
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


def setup(path: Path) -> logging.Handler:
    """Log INFO and up to `path` with rotation when stderr is that file, else to stderr."""
    if stderr_is(path):
        max_bytes, backups = limits()
        handler: logging.Handler = RotatingLog(path, max_bytes, backups)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    return handler
