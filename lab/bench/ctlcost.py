"""Control-side cost per host: the deploying process's CPU and peak RSS per host in flight.

A full deploy (a new artifact: upload and install) and a no-op redeploy (the same artifact again)
to 16 and 64 light harness hosts, each in a fresh process (`python -m lab.bench.scale probe`,
what `invoke deploy` does), pinned to the control core while the hosts share the other cores.
Per host: control CPU / hosts, (peak RSS - RSS before the deploy) / hosts.

Before and after in one run: with `--baseline DIR` naming a checkout of another revision
(`git worktree add /tmp/fleet-base main`), every repetition runs both revisions' probes, in
alternating order, on the same harness; without it only this checkout is measured. The other
revision is measured as its own code, not as an option of this one (fleet keeps no old code
path for benchmarks): its control side deploys artifacts built from its own tree, so its
installer's part of the exchange (the lines and answers it sends back) is its own too.

`python -m lab.bench.ctlcost profile <inventory> <artifact> <count> <names> <out.prof>` runs one
probe under cProfile in every thread (the host threads, paramiko's transport threads) and
writes the merged profile: where the remaining milliseconds go.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from lab.bench import fixture, scale
from lab.bench.report import Section
from lab.bench.stats import alternation

SIZES = (16, 64)
KINDS = ("full", "noop")  # a new artifact / the same artifact again
GOAL_CPU_MS = 10.0   # control CPU per host in flight, at the largest size
GOAL_RSS_MB = 1.0    # peak RSS growth per host in flight


def revisions(root: Path, baseline: str = "") -> dict[str, Path]:
    """{"this": this checkout} plus {"base": the `--baseline` checkout} when given; a base that is
    not a fleet checkout with the scale probe is refused, naming the option and the fix."""
    revs = {"this": root}
    other = baseline.strip()
    if other:
        path = Path(other).expanduser().resolve()
        if not (path / "lab" / "bench" / "scale.py").is_file():
            raise ValueError(f"--baseline {other}: not a fleet checkout with lab/bench/scale.py; "
                             "point it at one (git worktree add /tmp/fleet-base main)")
        revs["base"] = path
    return revs


def revision_variants(revs: dict[str, Path], base, workdir: Path, tag: str) -> dict:
    """Artifact variants per revision: this checkout's of `base`, another's of an artifact
    built from its tree (its installer, not this one's)."""
    from fleet.deploy import api  # noqa: PLC0415
    from lab.bench.deploys import Variants  # noqa: PLC0415

    out = {}
    for rev, root in revs.items():
        built = base if rev == "this" else api.build_artifact(root, workdir / f"dist-{rev}")
        out[rev] = Variants(built, workdir / f"variants-{tag}-{rev}")
    return out


def per_host(row: dict, count: int) -> dict:
    """A probe's figures per host: control CPU (ms) and peak RSS growth (MB)."""
    return {"cpu_ms": 1000 * row["control_cpu_s"] / count,
            "rss_mb": (row["rss_peak_mb"] - row["rss_base_mb"]) / count,
            "rss_peak_mb": row["rss_peak_mb"], "wall_s": row["wall_s"]}


def probe(root: Path, fl: fixture.Fleet, artifact: Path, names: list[str],
          cpus: list[int]) -> dict:
    """One deploy of `artifact` to `names` by the checkout at `root`, in a fresh process."""
    cmd = [sys.executable, "-m", "lab.bench.scale", "probe", str(fl.run.inventory_path),
           str(artifact), str(len(names)), "reuse", ",".join(names)]
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=root,
                          preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    if proc.returncode != 0:
        raise RuntimeError(f"deploy probe ({root}) exited {proc.returncode}: "
                           f"{proc.stderr[-800:]}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    if row["failed"]:
        raise fixture.DeployFailed(f"{root}: " + "; ".join(row["failed"]))
    return row


def bench(base, workdir: Path, reps: int = 2, sizes=SIZES, baseline: str = "",
          log=print) -> Section:
    root = Path(__file__).resolve().parents[2]
    revs = revisions(root, baseline)
    sizes = sorted(sizes)
    sec = Section("ctlcost", f"control-side CPU and peak RSS per host ({', '.join(revs)}), "
                             f"{', '.join(map(str, sizes))} hosts")
    sec.details["revisions"] = {k: str(v) for k, v in revs.items()}
    control, host_cores = scale.split_cores(os.cpu_count() or 1)
    load0 = os.getloadavg()[0]
    fl = scale.start_fleet(sizes[-1], workdir / "harness-ctlcost", log=log)
    rows: dict[str, list[float]] = {}
    try:
        variants = revision_variants(revs, base, workdir, "ctlcost")
        scale._pin_hosts(fl, host_cores, None)
        names = [h.name for h in fl.hosts]
        probe(root, fl, variants["this"].next().path, names, control)  # a gateway on each
        for rep, rev in alternation(list(revs), reps):
            for n in sizes:
                art = variants[rev].next().path
                for kind in KINDS:
                    row = per_host(probe(revs[rev], fl, art, names[:n], control), n)
                    for key in ("cpu_ms", "rss_mb"):
                        rows.setdefault(f"{rev} {kind} {n} {key}", []).append(row[key])
                    sec.details.setdefault("rows", []).append(
                        dict(row, rev=rev, kind=kind, hosts=n, rep=rep))
                    log(f"  ctlcost rep {rep + 1} {rev}: {kind} {n} hosts, control "
                        f"{row['cpu_ms']:.1f} ms/host, RSS +{row['rss_mb']:.2f} MB/host "
                        f"(peak {row['rss_peak_mb']:.0f} MB), {row['wall_s']:.1f} s")
    finally:
        fl.close()
    med = {k: statistics.median(v) for k, v in rows.items()}
    for kind in KINDS:
        for n in sizes:
            parts = []
            for rev in revs:
                parts.append(f"{rev} {med[f'{rev} {kind} {n} cpu_ms']:.1f} ms, "
                             f"{med[f'{rev} {kind} {n} rss_mb']:.2f} MB")
            if "base" in revs:
                parts.append("CPU this/base " + format(
                    med[f"this {kind} {n} cpu_ms"] / med[f"base {kind} {n} cpu_ms"], ".2f"))
            sec.figures[f"{kind}, {n} hosts, per host"] = "; ".join(parts)
    big = sizes[-1]
    sec.figures["load average (1 min) at start / end"] = f"{load0:.1f} / {os.getloadavg()[0]:.1f}"
    sec.goal(f"control CPU per host, full deploy to {big}", med[f"this full {big} cpu_ms"],
             GOAL_CPU_MS, "ms")
    sec.goal(f"peak RSS growth per host, full deploy to {big}", med[f"this full {big} rss_mb"],
             GOAL_RSS_MB, "MB")
    return sec


def profile(inventory: str, artifact: str, count: int, names: str, out: str) -> dict:
    """`scale.probe` with cProfile (each thread's CPU clock) in every thread; the merged
    profile goes to `out`."""
    import cProfile  # noqa: PLC0415
    import pstats  # noqa: PLC0415
    import threading  # noqa: PLC0415
    import time  # noqa: PLC0415

    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start(*_args) -> None:  # the first profile event of a new thread: profile it
        prof = cProfile.Profile(time.thread_time)  # CPU, not wall: threads mostly wait
        with lock:
            profiles.append(prof)
        prof.enable()

    main = cProfile.Profile(time.thread_time)
    threading.setprofile(start)
    main.enable()
    row = scale.probe(inventory, artifact, count, "reuse", names)
    main.disable()
    threading.setprofile(None)
    stats = pstats.Stats(main)
    with lock:
        for prof in profiles:
            try:
                stats.add(prof)
            except TypeError:  # a thread that never ran a profiled call
                pass
    stats.dump_stats(out)
    return row


if __name__ == "__main__" and len(sys.argv) >= 7 and sys.argv[1] == "profile":
    print(json.dumps(profile(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5],
                             sys.argv[6])))
