"""The installer's live progress: `{"step": name}` lines on stderr, for steps that last.

The control side relays each line to its live display (`<what>: <step>`). Each line is an SSH
packet it reads, decrypts and relays: eight of them per deploy cost it about 2 ms of CPU per
host, a quarter of what it spends on a quick host, for steps that last a few milliseconds and
that a display drawn four times a second would not have shown. So a step is announced only once
it has lasted ANNOUNCE_AFTER_S, while it still runs: a lock wait, a restart, a readiness wait or
a stuck disk is shown as before. Every step's time is in the installer's answer either way.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Callable, Optional, Tuple

ANNOUNCE_AFTER_S = 0.25


def announce(event: dict) -> None:
    """One progress line on stderr, written whole; a reader that went away (dropped ssh) must
    not break the deploy."""
    try:
        sys.stderr.write(json.dumps(event) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class StepAnnouncer:
    """Announces the step in progress once it has lasted `after_s` (at its start when
    `after_s` is 0: a simulated host, whose clock is not the real one). The waiting is done by
    a daemon thread started with the first step, which looks again at most every `after_s`."""

    def __init__(self, after_s: float = ANNOUNCE_AFTER_S,
                 write: Callable[[dict], None] = announce) -> None:
        self.after_s = after_s
        self._write = write
        self._lock = threading.Lock()
        self._current: Optional[Tuple[int, str, float]] = None  # number, name, start
        self._count = 0
        self._said = 0  # the number of the last step announced
        self._watcher: Optional[threading.Thread] = None

    def begin(self, name: str) -> None:
        """A step starts."""
        if self.after_s <= 0:
            self._write({"step": name})
            return
        with self._lock:
            self._count += 1
            self._current = (self._count, name, time.monotonic())
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="fleet-steps",
                                                 daemon=True)
                self._watcher.start()

    def end(self) -> None:
        """The step in progress ended (announced or not)."""
        with self._lock:
            self._current = None

    def _watch(self) -> None:
        while True:
            with self._lock:
                current, now = self._current, time.monotonic()
                due = (current is not None and current[0] != self._said
                       and now - current[2] >= self.after_s)
                if due:
                    self._said = current[0]
                wait = self.after_s
                if current is not None and current[0] != self._said:
                    wait = current[2] + self.after_s - now
            if due:
                self._write({"step": current[1]})
            time.sleep(max(0.01, wait))
