"""A measurement taken every `every_s` on a thread of its own while a benchmark's work runs: the
thread, its stop and join, and its own CPU (which a benchmark takes out of the work it measures).
Subclasses say what one sample is (`tick`)."""

from __future__ import annotations

import threading
import time


class PeriodicSampler:
    """`with Subclass() as s:` samples `s.tick()` every `every_s` until the block ends."""

    join_s = 10.0

    def __init__(self, every_s: float = 0.1):
        self.every_s = every_s
        self.cpu_s = 0.0  # the sampling thread's own CPU so far
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def tick(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        start = time.thread_time()
        while not self._stop.is_set():
            self.tick()
            self.cpu_s = time.thread_time() - start
            self._stop.wait(self.every_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(self.join_s)
