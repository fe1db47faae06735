"""The machine an installer runs on, as the installer sees it: its clocks, its process table,
its name and boot, and what a fault at a step does.

Why one seam: the transaction's lock (who holds it, is that process alive, has its lease
expired), its readiness wait, its audit times and its fault points all ask the machine, and a
deterministic simulation of rollouts (the checkout's `lab/sim`) runs the real transaction on
many simulated hosts in one process, each with its own clock (skewed), pids, boot and faults
chosen by a seed. Everything here defaults to the real machine; `use(machine)` puts another in
place for the calling context only (a thread's, or a simulated process's: `contextvars`), so a
real install never pays more than one lookup per call.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import socket
import time
from pathlib import Path
from typing import Iterator, Optional

from fleet.continuity import detached, regularfile
from fleet.continuity.statelayout import StateLayout
from fleet.installer.announcer import StepAnnouncer


class Machine:
    """The real machine: `time.time`, `time.monotonic`, `os.getpid`, /proc, fault files."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch (lock and lease times, audit lines)."""
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def pid(self) -> int:
        return os.getpid()

    def step_announcer(self) -> StepAnnouncer:
        """Live progress of an installer's steps: each one that lasts, on stderr."""
        return StepAnnouncer()

    def hostname(self) -> str:
        return socket.gethostname()

    def alive(self, pid: int) -> bool:
        return detached.alive(pid)

    def start_time(self, pid: int) -> Optional[str]:
        return detached.start_time(pid)

    def boot_id(self) -> Optional[str]:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
                return fh.read().strip() or None
        except OSError:
            return None

    def fault(self, state_dir: Path, step: str) -> str:
        """The first word of `<state>/fleet/faults/<step>` ("" for none: the normal case, one
        failed open per step); fleet.installer.faults acts on it."""
        path = StateLayout(state_dir).faults_dir / step
        try:
            words = regularfile.read_text(path, follow=False).strip().split()[:1]
        except OSError:
            return ""
        return words[0] if words else ""

    def kill(self) -> None:
        """Die at once, running no cleanup (what `kill -9` or a power cut leaves behind)."""
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(5)  # the signal is asynchronous; never run on past this point


REAL = Machine()
_current: contextvars.ContextVar[Machine] = contextvars.ContextVar("fleet_machine", default=REAL)


def current() -> Machine:
    """The machine of the calling context: the real one unless `use` put another in place."""
    return _current.get()


@contextlib.contextmanager
def use(machine: Machine) -> Iterator[Machine]:
    """Run the calling context's installer code on `machine` (a simulated host)."""
    token = _current.set(machine)
    try:
        yield machine
    finally:
        _current.reset(token)
