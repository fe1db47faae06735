"""The control side's CPU per host against the hosts' pace: why it grows from 64 to 1,000 rack
hosts (docs/bench/log.md, "A thousand hosts, rerun").

The same rack hosts (lab/harness/rack.py) deployed three ways, alternated, each deploy the
thousand benchmark's probe in a fresh process on the control core:
- `free`: as they come;
- `slowed`: their core shared with busy loops, so each host works about half as fast;
- `held`: each install held at its audit step (a `hold` fault file) until HOLD_S after the
  deploy began, in flight longer without working (about 8 s more for 64 hosts here).

If only `slowed` costs more per host, what grows with a fleet on the racks' one core is the
hosts' pace (a thousand hosts there are each several times slower than 64), not their number
or the time each is in flight: a real fleet's hosts have their own CPU and keep their pace.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from fleet.continuity.statelayout import StateLayout
from lab.bench.report import Section
from lab.bench.stats import alternation

CASES = ("free", "slowed", "held")
HOLD_S = 20.0  # a held install waits at its audit step until this long after the deploy began
BUSY_LOOPS = 3  # on the hosts' cores while `slowed` runs
COUNT = 64


def _busy_loops(cores: list[int]) -> list[subprocess.Popen]:
    """BUSY_LOOPS processes spinning on the hosts' cores (the control core is left alone)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                             preexec_fn=lambda: os.sched_setaffinity(0, cores))
            for _ in range(BUSY_LOOPS)]


def _hold(racks, seconds: float) -> threading.Thread:
    """Put a `hold` fault at every host's audit step, removed after `seconds` (a thread)."""
    files = [f"{h.state_dir}/{StateLayout.FAULTS}/audit" for h in racks.hosts]
    put = " && ".join(f"mkdir -p {os.path.dirname(f)} && echo hold > {f}" for f in files)
    for container in racks.containers:
        container.exec_run(["sh", "-c", put])

    def lift() -> None:
        time.sleep(seconds)
        for container in racks.containers:
            container.exec_run(["rm", "-f", *files, *(f + ".held" for f in files)])

    thread = threading.Thread(target=lift, daemon=True)
    thread.start()
    return thread


def bench(base, workdir: Path, reps: int, count: int = COUNT, log=print) -> Section:
    from lab.bench.deploys import Variants  # noqa: PLC0415
    from lab.bench.scale import split_cores  # noqa: PLC0415
    from lab.bench.thousand import run_probe  # noqa: PLC0415
    from lab.harness import rack  # noqa: PLC0415
    from lab.harness.run import docker_client  # noqa: PLC0415

    sec = Section("hostpace", f"control CPU per host against the hosts' pace, {count} rack hosts")
    control, host_cores = split_cores(os.cpu_count() or 1)
    racks = rack.start(docker_client(), workdir / "racks-hostpace", count, count,
                       cpuset=",".join(map(str, host_cores)), log=log)
    rows: dict[str, list[dict]] = {case: [] for case in CASES}
    try:
        variants = Variants(base, workdir / "variants-hostpace")
        run_probe(racks, variants.next(), count, control)  # every host has a release
        for rep, case in alternation(list(CASES), reps):
            loops = _busy_loops(host_cores) if case == "slowed" else []
            lifter = _hold(racks, HOLD_S) if case == "held" else None
            try:
                row = run_probe(racks, variants.next(), count, control)
            finally:
                for loop in loops:
                    loop.kill()
                    loop.wait(timeout=10)
                if lifter is not None:
                    lifter.join(HOLD_S + 30)
            rows[case].append(row)
            sec.add(case, row["wall_s"])
            log(f"  hostpace rep {rep + 1}: {case}, wall {row['wall_s']:.1f} s, control "
                f"{1000 * row['control_cpu_s'] / count:.2f} ms/host")
    finally:
        racks.close()
    figures(sec, rows, count)
    return sec


def figures(sec: Section, rows: dict[str, list[dict]], count: int) -> None:
    """Median control CPU per host of each case (with its user / sys split and SSH packets per
    host), and each case against `free`."""
    from lab.bench.thousand import per_host as split  # noqa: PLC0415

    per_host = {case: statistics.median(1000 * r["control_cpu_s"] / count for r in got)
                for case, got in rows.items() if got}
    for case, ms in per_host.items():
        walls = [r["wall_s"] for r in rows[case]]
        sec.figures[f"{case}: control CPU per host"] = (
            f"{ms:.2f} ms (wall {min(walls):.1f}-{max(walls):.1f} s); "
            + split(rows[case], count))
    for case in ("slowed", "held"):
        if case in per_host and per_host.get("free"):
            sec.figures[f"{case} / free"] = f"{per_host[case] / per_host['free']:.2f}"
