"""Our gateway's process, stopped and started by the installer itself (the `fleet` manager).

Why not `python3 -m fleet.gateway restart`: that wrapper is one more interpreter start and the
gateway CLI's imports (~80 ms CPU per restart on a small host), only to do what this module does
with what the installer has already loaded. The protocol is the gateway's own, shared with the
gateway CLI (fleet/gateway/process.py): "running" means "holds the pidfile's flock"; it is
stopped by the pid in that file, SIGTERM first, SIGKILL after a grace period, and is gone when
the kernel has released the lock.
Readiness is judged by the caller (the installer's `wait_ready`, on the gateway's health answer).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict, Optional

from fleet.continuity.statelayout import StateLayout
from fleet.gateway.process import StopError, holder_pid, spawn, terminate

POLL_S = 0.01
STOP_GRACE_S = 10.0
KILL_WAIT_S = 5.0


class GatewayProcessError(RuntimeError):
    """The gateway could not be stopped or started; the message says why and where to look."""


def run_paths(state_dir: Path) -> Dict[str, Path]:
    """The gateway's files under a state dir (named by fleet.continuity.statelayout)."""
    layout = StateLayout(state_dir)
    return {"pidfile": layout.pidfile, "socket": layout.socket, "ready": layout.ready_file,
            "log": layout.log}


def stop(state_dir: Path, grace_s: float = STOP_GRACE_S) -> Optional[str]:
    """Stop the running gateway; returns how it ended (None: nothing was running)."""
    files = run_paths(state_dir)
    try:
        pid = holder_pid(files["pidfile"])
        if pid is None:
            return None
        how = terminate(files["pidfile"], pid, grace_s, POLL_S, KILL_WAIT_S)
    except StopError as exc:
        raise GatewayProcessError(str(exc)) from exc
    if how == "killed":
        for leftover in (files["socket"], files["ready"]):  # a killed gateway cleans up nothing
            try:
                leftover.unlink()
            except FileNotFoundError:
                pass
    return how


class Spawned:
    """A gateway started detached from `release`; knows where its log output began."""

    def __init__(self, state_dir: Path, release: Path, python: str, env: Dict[str, str]):
        self.log = run_paths(state_dir)["log"]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.log_from = self.log.stat().st_size
        except OSError:
            self.log_from = 0
        full_env = dict(os.environ)
        full_env.update(env)
        full_env["PYTHONPATH"] = str(release)
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = spawn(python, state_dir, self.log, full_env)

    def exited(self) -> Optional[str]:
        """Why the gateway is already gone (with its log), or None while it runs."""
        code = self.proc.poll()
        if code is None:
            return None
        return f"gateway exited with code {code} before it was ready{self.log_tail()}"

    def log_tail(self, lines: int = 12) -> str:
        return read_log_tail(self.log, self.log_from, lines)

    def abandon(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop a gateway that never became ready (it may not have reached its pidfile)."""
        if self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=KILL_WAIT_S)


def read_log_tail(log: Path, offset: int, lines: int) -> str:
    """The last `lines` lines a process wrote to `log` since `offset`, framed for an error
    message ("" when there are none): what a gateway said before it failed to become ready."""
    try:
        with open(str(log), "rb") as fh:
            fh.seek(offset)
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    tail = "\n".join(text.strip().splitlines()[-lines:])
    return f"\n--- {log} (tail) ---\n{tail}" if tail else ""
