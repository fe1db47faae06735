"""Python's garbage collections in this process while a benchmark's block runs, by generation,
with the CPU each took: whether the collector's cost per host changes with the fleet's size.

`gc.callbacks` is told when each collection starts and stops, on the thread that triggered it;
the CPU between the two is that thread's (`time.thread_time`)."""

from __future__ import annotations

import gc
import time


class Collected:
    """`with Collected() as c:` ... `c.count[g]`, `c.cpu_s[g]` for generations 0, 1 and 2."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.cpu_s = [0.0, 0.0, 0.0]
        self._started = 0.0

    def _record(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            generation = info["generation"]
            self.count[generation] += 1
            self.cpu_s[generation] += time.thread_time() - self._started

    def __enter__(self) -> Collected:
        gc.callbacks.append(self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._record)
