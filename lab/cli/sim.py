"""`invoke sim`: the deterministic simulation of rollouts (lab/sim), many seeds or one.

Thin: parse flags, call lab.sim.campaign (or, for one seed, the schedule of `--kind`), print.
`--kind rollout` runs lab.sim.rollouts' schedules instead of the plain deploy's: a flag, not a
share of the default campaign, so a seed keeps naming the same schedule (`--seed S` replays
what a report named), the CI-sized default keeps its time budget, and each kind's rate and
failures are reported on their own.
"""

from __future__ import annotations

import os

from invoke import Exit

from fleet.cli.flags import USAGE_ERROR, number, task

MAX_JOBS = 256
MAX_SEEDS = 100_000_000
MAX_SEED = 2**63 - 1


@task(help={"seeds": "how many schedules (default 10000; nightly: 1000000)",
            "start": "the first seed of the range (default 0)",
            "seed": "replay this one seed: its trace and what it violated",
            "jobs": "processes (default: one per core)",
            "kind": "deploy (default): a deploy under faults; rollout: a progressive rollout "
                    "(waves, budget, bake) under faults, its control process crashed and "
                    "resumed or taken back"})
def sim(c, seeds="10000", start="0", seed="", jobs="", kind="deploy"):
    """Run seeded schedules of rollouts with faults against simulated hosts; check invariants."""
    from lab.sim import campaign  # noqa: PLC0415  (keeps `invoke --list` lean)

    if kind not in campaign.KINDS:
        raise Exit(f"error: --kind {kind!r}: use one of {', '.join(campaign.KINDS)}",
                   USAGE_ERROR)
    if seed != "":
        outcome = campaign.runner(kind)(number(seed, "--seed", minimum=0, maximum=MAX_SEED),
                                        trace=True)
        print("\n".join(outcome.trace or []))
        faults = ", ".join(f"{k} {n}" for k, n in sorted(outcome.faults.items())) or "none"
        paths = ", ".join(f"{k} {n}" for k, n in sorted(outcome.paths.items()))
        print(f"seed {outcome.seed} ({kind}): {outcome.hosts} hosts, {outcome.runs} runs, "
              f"faults: {faults}, {outcome.sim_time:.1f} simulated seconds"
              + (f"; paths: {paths}" if paths else ""))
        for line in outcome.violations:
            print(f"VIOLATED: {line}")
        if not outcome.ok:
            raise Exit(code=1)
        print("every invariant held")
        return
    workers = (number(jobs, "--jobs", maximum=MAX_JOBS, why="one process each, ~60 MB")
               if jobs else (os.cpu_count() or 1))
    summary = campaign.run(number(start, "--start", minimum=0, maximum=MAX_SEED),
                           number(seeds, "--seeds", maximum=MAX_SEEDS,
                                  why="about 1,000 hours on one free core"),
                           workers, progress=lambda s: print(
                               f"sim: {s.schedules} schedules, {len(s.failures)} failed",
                               flush=True), kind=kind)
    print(summary.report())
    if not summary.ok:
        raise Exit(code=1)


TASKS = [sim]
