"""The gateway process seen from outside: start it detached, stop it by its pidfile.

One protocol for the gateway CLI (fleet.gateway.daemon) and the installer's `fleet` manager
(fleet.installer.gatewayproc), light to import (stdlib + the pidfile): "running" means "holds
the pidfile's flock"; a gateway is stopped by the pid in that file, SIGTERM first and SIGKILL
after a grace period, and is gone when the kernel has released the lock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, Optional

from fleet.gateway.pidfile import running_pid


def spawn(python: str, state_dir: Path, log: Path, env: Dict[str, str]) -> subprocess.Popen:
    """`python -m fleet.gateway --state-dir D run`, detached (own session, stdin from /dev/null,
    output appended to `log`, cwd the state dir); `env` is its whole environment, with the
    release to run first on its PYTHONPATH."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(str(log), "ab") as logf, open(os.devnull, "rb") as devnull:
        return subprocess.Popen(
            [python, "-m", "fleet.gateway", "--state-dir", str(state_dir), "run"],
            stdin=devnull, stdout=logf, stderr=logf, close_fds=True, start_new_session=True,
            cwd=str(state_dir), env=env)


class StopError(RuntimeError):
    """The lock holder could not be stopped: it names no pid, or it survived SIGKILL."""


def holder_pid(path: Path, settle_s: float = 0.2) -> Optional[int]:
    """The pid to stop (None: nothing runs). A holder still starting gets `settle_s` to write
    its pid; one that still names none is a StopError."""
    pid = running_pid(path)
    if pid == 0:
        time.sleep(settle_s)
        pid = running_pid(path)
        if pid == 0:
            raise StopError(f"pidfile {path} is locked but names no pid")
    return pid


def _wait_released(path: Path, pid: int, seconds: float, poll_s: float) -> bool:
    """Whether the lock at `path` stops being `pid`'s within `seconds`."""
    deadline = time.monotonic() + seconds
    while running_pid(path) in (pid, 0):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def terminate(path: Path, pid: int, grace_s: float, poll_s: float = 0.01,
              kill_wait_s: float = 5.0) -> str:
    """SIGTERM `pid`, wait until the lock at `path` is no longer its, SIGKILL after `grace_s`.

    Returns how it ended: "gone" (no such process), "terminated" or "killed". The one stop
    protocol of the gateway CLI (fleet.gateway.daemon) and the installer (fleet.installer).
    A killed gateway cleans nothing up; the caller removes its socket and ready file.
    """
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "gone"
    if _wait_released(path, pid, grace_s, poll_s):
        return "terminated"
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return "terminated"
    if not _wait_released(path, pid, kill_wait_s, poll_s):
        raise StopError(f"gateway pid {pid} survived SIGKILL for {kill_wait_s:.0f}s")
    return "killed"
