"""Many schedules of the simulation (lab.sim.schedule, or lab.sim.rollouts' with `kind`
"rollout"): a range of seeds, in one process or spread over several, with what each failing
seed violated and the command that replays it.

CI runs 10,000 (tests/lab/sim), a nightly run a million (`invoke sim --seeds 1000000`).
"""

from __future__ import annotations

import collections
import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lab.sim import schedule

KINDS = ("deploy", "rollout")  # a plain deploy's schedules, or a progressive rollout's


def runner(kind: str) -> Callable[[int], schedule.Outcome]:
    """The schedule of `kind` (ValueError naming the kinds for another word)."""
    if kind == "deploy":
        return schedule.run
    if kind == "rollout":
        from lab.sim import rollouts  # noqa: PLC0415  (only a rollout campaign needs it)

        return rollouts.run
    raise ValueError(f"no schedules of kind {kind!r}; use one of {', '.join(KINDS)}")


@dataclass
class Failure:
    seed: int
    violations: list[str]
    kind: str = "deploy"

    def describe(self) -> str:
        lines = "\n".join(f"    {v}" for v in self.violations[:8])
        more = (f"\n    ... {len(self.violations) - 8} more" if len(self.violations) > 8
                else "")
        flag = "" if self.kind == "deploy" else f" --kind {self.kind}"
        return (f"seed {self.seed} violated {len(self.violations)} invariant(s):\n{lines}"
                f"{more}\n  replay: invoke sim{flag} --seed {self.seed}")


@dataclass
class Summary:
    """What a range of schedules did."""

    schedules: int = 0
    failures: list[Failure] = field(default_factory=list)
    faults: collections.Counter = field(default_factory=collections.Counter)
    paths: collections.Counter = field(default_factory=collections.Counter)  # ways they went
    sim_time: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures

    def add(self, other: Summary) -> None:
        self.schedules += other.schedules
        self.failures += other.failures
        self.faults.update(other.faults)
        self.paths.update(other.paths)
        self.sim_time += other.sim_time
        self.cpu_s += other.cpu_s

    def report(self) -> str:
        rate = self.schedules / self.wall_s if self.wall_s else 0.0
        injected = sum(self.faults.values())
        head = (f"{self.schedules} schedules in {self.wall_s:.1f}s ({rate:.0f}/s, "
                f"{1000 * self.cpu_s / max(1, self.schedules):.1f} ms CPU each), "
                f"{injected / max(1, self.schedules):.2f} faults per schedule, "
                f"{self.sim_time / 3600:.1f} simulated hours; "
                + ("every invariant held" if self.ok else f"{len(self.failures)} FAILED"))
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items()))
        paths = ", ".join(f"{k} {n}" for k, n in sorted(self.paths.items()))
        fails = "\n".join(f.describe() for f in self.failures[:20])
        return "\n".join(x for x in (head, f"faults: {kinds}", paths and f"paths: {paths}",
                                      fails) if x)


def _chunk(part: tuple[range, str]) -> Summary:
    seeds, kind = part
    play = runner(kind)
    out = Summary()
    started = time.process_time()
    for seed in seeds:
        outcome = play(seed)
        out.schedules += 1
        out.faults.update(outcome.faults)
        out.paths.update(outcome.paths)
        out.sim_time += outcome.sim_time
        if not outcome.ok:
            out.failures.append(Failure(seed, outcome.violations, kind))
    out.cpu_s = time.process_time() - started
    return out


def run(start: int, count: int, jobs: int = 1,
        progress: Callable[[Summary], None] | None = None, chunk: int = 500,
        kind: str = "deploy") -> Summary:
    """Schedules `start` .. `start + count - 1` of `kind`, in `jobs` processes (each runs whole
    chunks of seeds in order, so which seeds ran is the same whatever `jobs` is)."""
    runner(kind)  # an unknown kind fails here, not in every worker
    total = Summary()
    began = time.monotonic()
    parts = [(range(s, min(s + chunk, start + count)), kind)
             for s in range(start, start + count, chunk)]
    if jobs <= 1:
        results = map(_chunk, parts)
        pool = None
    else:
        pool = multiprocessing.get_context("spawn").Pool(jobs)
        results = pool.imap(_chunk, parts)
    try:
        for part in results:
            total.add(part)
            total.wall_s = time.monotonic() - began
            if progress is not None:
                progress(total)
    finally:
        if pool is not None:
            pool.terminate()
    total.wall_s = time.monotonic() - began
    total.failures.sort(key=lambda f: f.seed)
    return total
