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
import logging.handlers
import os
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

MAX_BYTES = 10 * 1024 * 1024
BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RotatingLog(logging.handlers.RotatingFileHandler):
    """A size-rotated log file that keeps `fds` (stdout, stderr) on the current file."""

    def __init__(self, path: Path, max_bytes: int = MAX_BYTES, backups: int = BACKUPS,
                 fds: Sequence[int] = (1, 2)) -> None:
        super().__init__(str(path), mode="a", maxBytes=max(1, max_bytes),
                         backupCount=max(1, backups), encoding="utf-8")
        self.fds = tuple(fds)

    def doRollover(self) -> None:  # noqa: N802 (logging's name)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        super().doRollover()
        if self.stream is not None:
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
