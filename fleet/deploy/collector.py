"""Python's cyclic garbage collector while a run is under way: young collections as ever, full
ones after the run.

Why: a run holds each host's ssh connection from the lease take to its end, ~140 objects per
host that the collector tracks and that are never garbage while the run lasts. CPython starts a
full collection, which walks every tracked object, each time the long-lived objects grew by a
quarter; a thousand hosts' connections made it run seven times during the take, ~0.1 s each:
0.7 ms of control CPU per host that 64 hosts (whose connections never grew the heap by a
quarter) did not pay, a cost per host that came with the fleet's size (docs/bench/log.md,
"What grew from 64 to 1,000 hosts: the collector"). Young collections (generations 0 and 1)
still run, so short-lived cycles are freed as before; the few that survive them wait for the
first full collection after the run, which CPython starts on its own schedule.

Runs may overlap in one process (a worker's activities, tests): the first to start defers full
collections, the last to end restores the threshold it found, unless someone changed it since.
An incremental collector (which ignores the oldest generation's threshold) is left as it is.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

# gen-1 collections before a full one: never, in practice, during a run (CPython's default is 10)
DEFERRED = 1 << 30

_lock = threading.Lock()
_runs = 0
_found: tuple[int, int, int] | None = None  # the thresholds before the first run started


@contextlib.contextmanager
def full_collections_deferred() -> Iterator[None]:
    """No full collection while the block runs (see the module's docstring)."""
    global _runs, _found
    with _lock:
        if _runs == 0:
            _found = gc.get_threshold()
            gc.set_threshold(_found[0], _found[1], DEFERRED)
        _runs += 1
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0 and _found is not None:
                now = gc.get_threshold()
                if now[2] == DEFERRED:  # else someone set their own since: theirs stays
                    gc.set_threshold(now[0], now[1], _found[2])
                _found = None
