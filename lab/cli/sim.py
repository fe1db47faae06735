"""`invoke sim`: the deterministic simulation of rollouts (lab/sim), many seeds or one.

Thin: parse flags, call lab.sim.campaign (or lab.sim.schedule for one seed), print.
"""

from __future__ import annotations

import os

from invoke import Exit

from fleet.cli.flags import number, task

MAX_JOBS = 256
MAX_SEEDS = 100_000_000
MAX_SEED = 2**63 - 1


@task(help={"seeds": "how many schedules (default 10000; nightly: 1000000)",
            "start": "the first seed of the range (default 0)",
            "seed": "replay this one seed: its trace and what it violated",
            "jobs": "processes (default: one per core)"})
def sim(c, seeds="10000", start="0", seed="", jobs=""):
    """Run seeded schedules of rollouts with faults against simulated hosts; check invariants."""
    if seed != "":
        from lab.sim import schedule  # noqa: PLC0415  (keeps `invoke --list` lean)

        outcome = schedule.run(number(seed, "--seed", minimum=0, maximum=MAX_SEED), trace=True)
        print("\n".join(outcome.trace or []))
        faults = ", ".join(f"{k} {n}" for k, n in sorted(outcome.faults.items())) or "none"
        print(f"seed {outcome.seed}: {outcome.hosts} hosts, {outcome.runs} runs, faults: "
              f"{faults}, {outcome.sim_time:.1f} simulated seconds")
        for line in outcome.violations:
            print(f"VIOLATED: {line}")
        if not outcome.ok:
            raise Exit(code=1)
        print("every invariant held")
        return
    from lab.sim import campaign  # noqa: PLC0415

    workers = (number(jobs, "--jobs", maximum=MAX_JOBS, why="one process each, ~60 MB")
               if jobs else (os.cpu_count() or 1))
    summary = campaign.run(number(start, "--start", minimum=0, maximum=MAX_SEED),
                           number(seeds, "--seeds", maximum=MAX_SEEDS,
                                  why="about 1,000 hours on one free core"),
                           workers, progress=lambda s: print(
                               f"sim: {s.schedules} schedules, {len(s.failures)} failed",
                               flush=True))
    print(summary.report())
    if not summary.ok:
        raise Exit(code=1)


TASKS = [sim]
