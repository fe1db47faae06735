"""The clock, threads, process identity and host connections a run uses: the real ones, or a
deterministic simulation's, through one seam.

Why: the checkout's simulation of rollouts (`lab/sim`, `invoke sim`) runs the real runner,
fleet lease and deploy API against simulated hosts on a simulated clock, with every thread
switch and fault chosen by one seed, so a failing schedule replays exactly. The modules of a
run take `time`, `threading` and `queue` from here instead of the standard library (the same
names, delegating to it unless `simulated` put a simulation's in place), the run's own identity
in a lease (`process`: pid, machine name, whether a pid lives) likewise, and
`fleet.deploy.connection.connect` opens hosts through `opener` when one is set. Outside a
simulation each access costs one attribute lookup.
"""

from __future__ import annotations

import contextlib
import os
import queue as _queue
import socket
import threading as _threading
import time as _time
from collections.abc import Callable, Iterator
from typing import Any

from fleet.continuity.detached import alive


class Process:
    """This control process as a lease records it: its pid and machine, and whether a pid that
    took a lease from this machine still runs."""

    def pid(self) -> int:
        return os.getpid()

    def hostname(self) -> str:
        return socket.gethostname()

    def alive(self, pid: int) -> bool:
        return alive(pid)


class _Seam:
    """Attribute access goes to what is in place: the real module (or object) by default."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._impl = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._impl, name)


time: Any = _Seam(_time)  # monotonic(), time(), sleep()
threading: Any = _Seam(_threading)  # Thread, Event, Condition, Lock
queue: Any = _Seam(_queue)  # Queue
process: Any = _Seam(Process())
opener: Callable[[Any], Any] | None = None  # Host -> an open connection (a simulated host's)


@contextlib.contextmanager
def simulated(clock: Any, threads: Any, queues: Any, proc: Any,
              connect: Callable[[Any], Any]) -> Iterator[None]:
    """Run the deploy modules on a simulation's clock, threads, queues, process identity and
    hosts until the block ends (one simulation at a time per interpreter)."""
    global opener
    seams = ((time, clock), (threading, threads), (queue, queues), (process, proc))
    before = opener
    for seam, impl in seams:
        seam._impl = impl
    opener = connect
    try:
        yield
    finally:
        for seam, _impl in seams:
            seam._impl = seam._real
        opener = before
