"""How fast the control core is during a benchmark: a fixed workload's CPU time, sampled.

The two cores of this machine are virtual and share the physical machine under them, and what
the same work costs drifts: in one `thousand` run (2026-12-06) the workload below took 6.0 to
10.8 ms per round from one deploy to the next, minutes apart. A deploy's CPU per host carries
that drift, so two figures from different minutes can differ by more than the code does. The
canary, a process of its own pinned to the control core, runs the same small workload (key
generation, a Python loop, JSON) every EVERY_S and writes the CPU time it took; the median of a
deploy's window says how fast that core was then. It costs the core ~2%. It measures a small
process: it does not say what a busy deploy process, with its own memory and threads, pays.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

EVERY_S = 0.5


def workload() -> float:
    """One round of the fixed work; its CPU time in ms."""
    from cryptography.hazmat.primitives.asymmetric import x25519  # noqa: PLC0415

    doc = {f"k{i}": [i, str(i), {"x": i}] for i in range(200)}
    start = time.thread_time()
    for _ in range(40):
        x25519.X25519PrivateKey.generate()
    total = 0
    for i in range(30000):
        total += i * i
    for _ in range(10):
        json.loads(json.dumps(doc))
    return 1000 * (time.thread_time() - start)


def run(path: str) -> None:
    """The canary's loop (in its own process): `<unix time> <ms>` lines appended to `path`."""
    with open(path, "a", buffering=1) as out:
        while True:
            out.write(f"{time.time():.3f} {workload():.3f}\n")
            time.sleep(EVERY_S)


class Canary:
    """`with Canary(cpus, path) as c:` runs the canary on `cpus`; `c.median_ms(t0, t1)` is the
    median of its rounds that ended between the Unix times `t0` and `t1`."""

    def __init__(self, cpus: list[int], path: Path):
        self.cpus, self.path = cpus, path
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> Canary:
        self.path.unlink(missing_ok=True)
        root = Path(__file__).resolve().parents[2]
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "lab.bench.canary", str(self.path)], cwd=root,
            env=dict(os.environ, PYTHONPATH=str(root)),
            preexec_fn=lambda: os.sched_setaffinity(0, self.cpus))
        return self

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=10)

    def median_ms(self, t0: float, t1: float) -> float | None:
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            return None
        rounds = []
        for line in lines:
            try:
                when, ms = map(float, line.split())
            except ValueError:  # a line cut short by the kill
                continue
            if t0 <= when <= t1:
                rounds.append(ms)
        return statistics.median(rounds) if rounds else None


if __name__ == "__main__" and len(sys.argv) == 2:
    run(sys.argv[1])
