"""Deploy benchmarks on the Docker harness: scaling, no-op redeploy, the manual loop, ansible.

Every full-deploy repetition deploys a new artifact variant (lab.bench.artifacts), so each one
uploads, unpacks, switches, restarts and waits for readiness: no contender can coast on a cache.
Contenders run alternately (lab.bench.stats.alternation), every contender once per repetition.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from lab.bench import fixture
from lab.bench.ansible import AnsibleDeploy
from lab.bench.artifacts import plugin_files, variant
from lab.bench.manual import ManualLoop
from lab.bench.report import Section
from lab.bench.stats import alternation


class Variants:
    """Fresh artifact variants of one base build, numbered in order of use."""

    def __init__(self, base, out_dir: Path):
        self.base = base
        self.out_dir = out_dir
        self.count = 0

    def next(self):
        self.count += 1
        return variant(self.base, f"v{self.count:03d}", self.out_dir)


def scaling(fleet: fixture.Fleet, variants: Variants, reps: int, log=print) -> Section:
    """(1) Full deploy to 1, 2, 4, 8 hosts; goal T(8)/T(1) <= 1.3.

    Two sweeps: the hosts sharing the machine's cores (as the harness runs them), then each
    host capped at an even share of them (`Fleet.own_cpu_share`): on shared cores, 8 hosts'
    own work (installer, gateway start) queues for the same 2 cores, which no deploy tool can
    avoid; with a CPU of its own each host works as it would on its own machine, so the ratio
    measures what the deploy tool adds from 1 to 8 hosts.
    """
    sizes = [n for n in (1, 2, 4, 8) if n <= len(fleet.hosts)]
    sec = Section("scaling", f"1. fleet scaling: full deploy to {', '.join(map(str, sizes))} "
                             "hosts")
    share = fleet.own_cpu_share()
    _sweep(sec, fleet, variants, reps, sizes, "", log)
    fleet.limit_cpus(share)
    try:
        _sweep(sec, fleet, variants, reps, sizes, f", own CPU {share:g}", log)
    finally:
        fleet.limit_cpus(None)
    big = f"T({sizes[-1]})/T({sizes[0]})"
    sec.goal(f"{big}, each host with its own CPU ({share:g} core)",
             sec.figures[f"{big}, own CPU {share:g}"]["median"], 1.3, "ratio")
    sec.goal(f"{big}, hosts sharing the machine's {os.cpu_count()} cores",
             sec.figures[big]["median"], 1.3, "ratio")
    fan = fanout(fleet, [sizes[0], sizes[-1]], max(reps, 5))
    sec.figures[f"fan-out only (connect + `true`), {big}"] = (
        f"{fan['ratio']:.2f} ({fan['summary']})")
    sec.details["fan-out"] = fan
    return sec


def _sweep(sec: Section, fleet: fixture.Fleet, variants: Variants, reps: int, sizes: list[int],
           mode: str, log) -> None:
    """Deploy to each size `reps` times, alternating; figures carry `mode` in their names."""
    steps: dict[int, list] = {n: [] for n in sizes}
    cpu: dict[int, list] = {n: [] for n in sizes}
    ids = fleet.container_ids()
    for rep, name in alternation([f"{n} hosts{mode}" for n in sizes], reps):
        n = int(name.split()[0])
        with fixture.CpuMeter(ids) as meter:
            seconds, results = fixture.deploy(fleet.hosts[:n], variants.next())
        sec.add(name, seconds)
        steps[n].append(results)
        cpu[n].append(meter.result)
        log(f"  scaling rep {rep + 1}: {name}: {seconds:.2f} s; CPU s: "
            + ", ".join(f"{k} {v:.2f}" for k, v in meter.result.items() if v is not None))
    small, big = f"{sizes[0]} hosts{mode}", f"{sizes[-1]} hosts{mode}"
    ratio_name = f"T({sizes[-1]})/T({sizes[0]}){mode}"
    sec.figures[ratio_name] = sec.ratio(big, small)
    for n in sizes:
        sec.figures[f"steps, {n} hosts{mode} (median s)"] = fixture.step_medians(steps[n])
        sec.figures[f"CPU, {n} hosts{mode} (median s)"] = _cpu_medians(cpu[n])
    sec.details[f"cpu per deploy{mode}"] = {str(n): cpu[n] for n in sizes}
    if mode:
        return
    last = sec.figures[f"CPU, {sizes[-1]} hosts (median s)"]
    floor_key = next((k for k in last if k.startswith("deploy's own CPU")), None)
    t_small = sec.summary(small)["median"]
    if floor_key and t_small:
        floor = last[floor_key]
        per_host = last.get("hosts_cpu_s", 0) / sizes[-1]
        sec.figures[f"CPU floor of T({sizes[-1]})"] = (
            f"{floor:.2f} s (host CPU {per_host:.2f} s per host); "
            f"T({sizes[-1]})/floor = {sec.summary(big)['median'] / floor:.2f}; "
            f"best reachable T({sizes[-1]})/T({sizes[0]}) on shared cores = "
            f"{floor / t_small:.2f}")


def fanout(fleet: fixture.Fleet, sizes: list[int], reps: int) -> dict:
    """The control side's fan-out alone: connect (strict host keys) and run `true` on n hosts
    through the deploy runner, as a deploy connects; the host work is next to nothing, so this
    is what a fleet deploy's scaling would be if every host had its own CPU."""
    from fleet.deploy.connection import connect  # noqa: PLC0415
    from fleet.deploy.runner import HostResult, RunOptions, run  # noqa: PLC0415

    def work(host, progress):
        conn = connect(host)
        try:
            res = conn.run("true", 30)
        finally:
            conn.close()
        return HostResult(host.name, "ok", res.exit_code == 0)

    times: dict[int, list[float]] = {n: [] for n in sizes}
    for _rep, name in alternation([str(n) for n in sizes], reps):
        n = int(name)
        t0 = time.perf_counter()
        results = run(fleet.hosts[:n], work, lambda *a: None, RunOptions(parallel=n))
        times[n].append(time.perf_counter() - t0)
        if not all(r.ok for r in results):
            raise RuntimeError(f"fan-out: {[r.note for r in results if not r.ok]}")
    med = {n: statistics.median(v) for n, v in times.items()}
    return {"samples": {str(n): v for n, v in times.items()},
            "ratio": med[sizes[-1]] / med[sizes[0]],
            "summary": ", ".join(f"{n} hosts {med[n] * 1000:.0f} ms" for n in sizes)}


def _cpu_medians(rows: list[dict]) -> dict:
    out = {}
    for key in ("wall_s", "hosts_cpu_s", "control_cpu_s", "docker_cpu_s", "machine_busy_s"):
        values = [r[key] for r in rows if r.get(key) is not None]
        if values:
            out[key] = round(statistics.median(values), 3)
    if "hosts_cpu_s" in out and "control_cpu_s" in out:
        cores = os.cpu_count() or 1
        out[f"deploy's own CPU / {cores} cores"] = round(
            (out["hosts_cpu_s"] + out["control_cpu_s"] + out.get("docker_cpu_s", 0)) / cores, 3)
    return out


def noop(fleet: fixture.Fleet, variants: Variants, reps: int, log=print) -> Section:
    """(4) Redeploy of the active release vs a full deploy, all hosts; goal <= 15%. Measured
    with the hosts sharing the machine's cores, then with a CPU of their own (as in scaling)."""
    n = len(fleet.hosts)
    sec = Section("noop", f"4. no-op redeploy vs full deploy, {n} hosts")
    share = fleet.own_cpu_share()
    for mode, cpus in (("", None), (f", own CPU {share:g}", share)):
        fleet.limit_cpus(cpus)
        try:
            noop_results = []
            for rep in range(reps):
                art = variants.next()
                seconds, _ = fixture.deploy(fleet.hosts, art)
                sec.add(f"full deploy{mode}", seconds)
                seconds_noop, results = fixture.deploy(fleet.hosts, art, expect="unchanged")
                sec.add(f"no-op redeploy{mode}", seconds_noop)
                noop_results.append(results)
                log(f"  noop rep {rep + 1}{mode}: full {seconds:.2f} s, no-op {seconds_noop:.2f} s")
        finally:
            fleet.limit_cpus(None)
        r = sec.ratio(f"no-op redeploy{mode}", f"full deploy{mode}")
        sec.figures[f"no-op / full{mode}"] = r
        sec.figures[f"no-op steps{mode} (median s)"] = fixture.step_medians(noop_results)
        where = (f"each host with its own CPU ({share:g} core)" if cpus else
                 f"hosts sharing the machine's {os.cpu_count()} cores")
        sec.goal(f"no-op / full, {where}", r["median"], 0.15, "ratio")
    return sec


def manual(fleet: fixture.Fleet, variants: Variants, reps: int, workdir: Path,
           log=print) -> Section:
    """(2) The hand-made sequential scp/ssh loop vs fleet on the same hosts."""
    n = len(fleet.hosts)
    sec = Section("manual", f"2. hand-made loop (sequential scp + ssh restart + ssh grep) vs "
                            f"fleet, {n} hosts")
    loop = ManualLoop(fleet.key_path, fleet.known_hosts)
    base = variants.base
    files = plugin_files(base, Path(tempfile.mkdtemp(dir=workdir)))
    log("  manual: one-time setup of ~/.openclaw-manual on every host")
    for host in fleet.hosts:
        loop.setup(host, base.path, files)
    version = base.components.get("memory-continuity", base.version)
    for rep, name in alternation(["fleet", "manual loop"], reps):
        if name == "fleet":
            seconds, _ = fixture.deploy(fleet.hosts, variants.next())
        else:
            seconds = loop.deploy(fleet.hosts, files, version)
        sec.add(name, seconds)
        log(f"  manual rep {rep + 1}: {name}: {seconds:.2f} s")
    sec.figures["fleet / manual"] = sec.ratio("fleet", "manual loop")
    sec.figures["manual / fleet"] = sec.ratio("manual loop", "fleet")
    return sec


def ansible(fleet: fixture.Fleet, variants: Variants, reps: int, workdir: Path,
            log=print) -> Section:
    """(3) ansible-core playbook (default forks, forks=8) vs fleet; goal fleet/ansible <= 0.33."""
    n = len(fleet.hosts)
    sec = Section("ansible", f"3. ansible-core playbook vs fleet, {n} hosts")
    runner = AnsibleDeploy(workdir / "ansible", fleet.hosts, fleet.key_path, fleet.known_hosts,
                           log=log)
    log("  ansible: warm-up run (first-time directories, config)")
    runner.deploy(variants.next(), 8)
    forks8 = f"ansible forks={min(8, n)}"
    for rep, name in alternation(["fleet", "ansible default forks (5)", forks8], reps):
        art = variants.next()
        if name == "fleet":
            seconds, _ = fixture.deploy(fleet.hosts, art)
        elif name == forks8:
            seconds = runner.deploy(art, min(8, n))
        else:
            seconds = runner.deploy(art, None)
        sec.add(name, seconds)
        log(f"  ansible rep {rep + 1}: {name}: {seconds:.2f} s")
    r5 = sec.ratio("fleet", "ansible default forks (5)")
    r8 = sec.ratio("fleet", forks8)
    sec.figures["fleet / ansible default forks"] = r5
    sec.figures[f"fleet / {forks8}"] = r8
    sec.goal("fleet / ansible (default forks)", r5["median"], 0.33, "ratio")
    sec.goal(f"fleet / {forks8}", r8["median"], 0.33, "ratio")
    return sec
