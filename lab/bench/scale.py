"""(2, round 2) A bigger fleet: wall time, CPU and memory per host, against the floor.

One harness of up to 64 light hosts. Every host container is pinned to the machine's last
core(s) (cpuset) and the deploy process to the first, so the hosts together have exactly
`host_cores` cores (1 of 2 here) whatever their number, as a fleet's hosts have their own CPUs and
do not take the control machine's. Each deploy runs in a fresh process (`python -m
lab.bench.scale probe ...`, what `invoke deploy` does), which reports its own CPU and its peak
RSS; the hosts' CPU comes from their cgroups.

The floor of a deploy to N hosts is max(hosts' CPU / host_cores, one host's critical path), the
critical path being T(1) (connect, upload, install, restart, ready of one host alone): no tool
can be faster than the hosts' own work on the cores they have. Goal: T(64) / floor <= 1.25.

The own-CPU sweep repeats round 1's T(8)/T(1) (each host capped at 1/8 of the hosts' core, all
eight hosts of the one-host deploy's kind: `same_kind`) three times, with one connection per
host (now) and with a connection per use (before), and once more with a busy control core (a
spinning process on the deploy's core, as other work on a shared machine), to show where the
drift under load comes from.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from lab.bench import fixture
from lab.bench.report import Section
from lab.bench.stats import alternation

SIZES = (1, 8, 32, 64)
MODES = ("reuse", "fresh")  # one connection per host for the run / one per use (before)
READY_S = 300  # readiness ceiling per host (a ceiling, not a wait)


# pure parts ------------------------------------------------------------------------------
def split_cores(cores: int) -> tuple[list[int], list[int]]:
    """(control cores, host cores): the first core for the deploy process, the rest for the
    hosts; on one core both share it."""
    if cores < 1:
        raise ValueError(f"{cores} cores")
    if cores == 1:
        return [0], [0]
    return [0], list(range(1, cores))


def floor_s(hosts_cpu_s: float, host_cores: float, critical_path_s: float) -> float:
    """The least wall time any tool could take: the hosts' own CPU on the cores they have, or
    one host's critical path, whichever is longer."""
    if host_cores <= 0:
        raise ValueError(f"host cores {host_cores}")
    return max(hosts_cpu_s / host_cores, critical_path_s)


def share_left(row: dict, cores: int, host_cores: int) -> float:
    """The fraction of the hosts' cores that other people's work left them during a deploy, from
    the machine's busy time (/proc/stat) minus what this deploy used (hosts, control, Docker),
    spread evenly over the machine's cores; 1.0 on a quiet machine. Between 0.05 and 1."""
    window = row.get("meter_wall_s") or row["wall_s"]
    ours = row["hosts_cpu_s"] + row["control_cpu_s"] + (row.get("docker_cpu_s") or 0)
    others = max(0.0, (row.get("machine_busy_s") or ours) - ours)
    return min(1.0, max(0.05, 1 - others / cores / window))


def loaded_floor(rows: dict[int, list[dict]], cores: int, host_cores: int) -> dict[int, float]:
    """Per size, the floor on the cores other work left the hosts: median over repetitions of
    max(hosts' CPU / (host_cores x share left), T(1) of the same repetition's share)."""
    sizes = sorted(rows)
    crit = statistics.median(r["wall_s"] for r in rows[sizes[0]])
    out = {}
    for n in sizes:
        out[n] = statistics.median(
            floor_s(r["hosts_cpu_s"], host_cores * share_left(r, cores, host_cores), crit)
            for r in rows[n])
    return out


def per_host(rows: dict[int, dict]) -> dict:
    """From median figures per fleet size ({n: {control_cpu_s, rss_peak_mb, rss_base_mb}}):
    control CPU per host (at the largest size, and its slope from the smallest), and peak RSS
    growth per host in flight."""
    sizes = sorted(rows)
    small, big = sizes[0], sizes[-1]
    out = {"control_cpu_ms_per_host": 1000 * rows[big]["control_cpu_s"] / big,
           "rss_growth_mb_per_host": (rows[big]["rss_peak_mb"] - rows[big]["rss_base_mb"]) / big}
    if big > small:
        out["control_cpu_ms_per_extra_host"] = 1000 * (
            rows[big]["control_cpu_s"] - rows[small]["control_cpu_s"]) / (big - small)
        out["rss_peak_mb_per_extra_host"] = (
            rows[big]["rss_peak_mb"] - rows[small]["rss_peak_mb"]) / (big - small)
    return out


def projection(figs: dict, hosts: int = 1000, host_cpu_s: float | None = None) -> dict:
    """What a deploy to `hosts` hosts costs one control machine at the measured per-host
    figures (all hosts in flight at once): control CPU, memory, and file descriptors (one
    socket per host, plus the process's own ~20)."""
    return {"hosts": hosts,
            "control_cpu_s": figs["control_cpu_ms_per_host"] * hosts / 1000,
            "rss_mb": figs.get("rss_base_mb", 0) + figs["rss_growth_mb_per_host"] * hosts,
            "fds": hosts + 20,
            "threads": hosts,
            "hosts_cpu_s": None if host_cpu_s is None else host_cpu_s * hosts}


def median_of(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


# the deploy in a fresh process -----------------------------------------------------------
def _rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cpu_s() -> float:
    """This process's CPU (all threads) in microseconds' resolution (os.times has 10 ms)."""
    import resource  # noqa: PLC0415

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def probe(inventory: str, artifact: str, count: int, mode: str = "reuse",
          names: str = "") -> dict:
    """One deploy to the first `count` hosts of `inventory` (of `names`, comma-separated, when
    given); wall, own CPU, RSS before/peak."""
    import fabric  # noqa: F401, PLC0415  (imported before the baseline, as a deploy has them)
    import paramiko  # noqa: F401, PLC0415

    from fleet.deploy import api, connection  # noqa: PLC0415
    from fleet.deploy.inventory import load  # noqa: PLC0415
    from fleet.deploy.runner import RunOptions  # noqa: PLC0415

    if mode == "fresh":  # the behaviour before: a connection of its own for every use
        class Fresh(connection.Connections):
            def get(self, host):
                conn = connection.connect(host)
                with self._lock:
                    self._open[f"{host.name}#{len(self._open)}"] = conn
                return conn

        api.Connections = Fresh
    hosts = load(inventory).select(names or "all")[:count]
    # 64 gateways starting on one busy core take longer than the usual 30 s
    hosts = [replace(h, timeouts=replace(h.timeouts, ready=READY_S)) for h in hosts]
    art = api.load_artifact(artifact)
    base = _rss_mb("VmRSS")
    cpu0, t0 = _cpu_s(), time.perf_counter()
    results = api.deploy(hosts, art, lambda *a: None, RunOptions(parallel=max(1, count)))
    wall, cpu1 = time.perf_counter() - t0, _cpu_s()
    bad = [f"{r.host}: {r.result} {r.note}" for r in results if not r.ok]
    steps = {}
    for res in results:
        for step, value in (res.steps or {}).items():
            steps.setdefault(step, []).append(float(value))
    return {"wall_s": wall, "control_cpu_s": cpu1 - cpu0,
            "rss_base_mb": base, "rss_peak_mb": _rss_mb("VmHWM"), "failed": bad,
            "steps": {k: statistics.median(v) for k, v in steps.items()}}


def run_probe(fl: fixture.Fleet, artifact, count: int, mode: str, cpus: list[int],
              names: list[str] | None = None) -> dict:
    """`probe` in a fresh process on `cpus`, to the first `count` hosts (of `names`)."""
    root = Path(__file__).resolve().parents[2]
    names = (names or [h.name for h in fl.hosts])[:count]
    cmd = [sys.executable, "-m", "lab.bench.scale", "probe", str(fl.run.inventory_path),
           str(artifact.path), str(count), mode, ",".join(names)]
    env = dict(os.environ, PYTHONPATH=str(root))
    with fixture.CpuMeter([fl.run.hosts[n].container.id for n in names]) as meter:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env,
                              cwd=root, preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    if proc.returncode != 0:
        raise RuntimeError(f"deploy probe exited {proc.returncode}: {proc.stderr[-800:]}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    if row["failed"]:
        raise fixture.DeployFailed("; ".join(row["failed"]))
    row.update(hosts_cpu_s=meter.result["hosts_cpu_s"], docker_cpu_s=meter.result["docker_cpu_s"],
               machine_busy_s=meter.result["machine_busy_s"], meter_wall_s=meter.result["wall_s"])
    return row


# the benchmark ---------------------------------------------------------------------------
def start_fleet(count: int, directory: Path, batch: int = 8, log=print) -> fixture.Fleet:
    """A harness of `count` hosts started `batch` at a time: 64 containers starting at once
    (host keys, sshd) on 2 busy cores missed the harness's 60 s readiness gate."""
    from fleet.deploy.inventory import load  # noqa: PLC0415
    from lab.harness import hosts  # noqa: PLC0415
    from lab.harness.run import docker_client, start_harness  # noqa: PLC0415

    specs = hosts.default_specs(count)
    run, timing = start_harness(docker_client(), directory.resolve(), specs=specs[:batch],
                                log=log)
    try:
        for i in range(batch, count, batch):
            run.start_hosts(specs[i:i + batch], timeout=180)
        return fixture.Fleet(run, load(run.inventory_path).select("all"), timing)
    except BaseException:
        run.close()
        raise


class Spinner:
    """A process spinning on the control cores: a busy control machine, on purpose."""

    def __init__(self, cpus: list[int]):
        self.cpus = cpus
        self.proc = None

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                     preexec_fn=lambda: os.sched_setaffinity(0, self.cpus))
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait(timeout=10)


def _pin_hosts(fl: fixture.Fleet, cpus: list[int] | None, quota: float | None) -> None:
    cpuset = ",".join(map(str, cpus or range(os.cpu_count() or 1)))
    for host in fl.run.hosts.values():
        host.container.update(cpuset_cpus=cpuset)
    fl.limit_cpus(quota)


def bench(base, workdir: Path, reps: int, sizes=SIZES, runs: int = 3, own_reps: int = 2,
          log=print) -> Section:
    from lab.bench.deploys import Variants  # noqa: PLC0415

    sizes = sorted(sizes)
    sec = Section("scale", f"2. bigger fleet: {', '.join(map(str, sizes))} hosts, CPU and "
                           "memory per host, floor")
    control, host_cores = split_cores(os.cpu_count() or 1)
    load0 = os.getloadavg()[0]
    sec.details["cores"] = {"control": control, "hosts": host_cores}
    log(f"  scale: starting {sizes[-1]} hosts (hosts on cores {host_cores}, deploy on {control})")
    t0 = time.perf_counter()
    fl = start_fleet(sizes[-1], workdir / "harness-scale", log=log)
    sec.figures[f"harness start, {sizes[-1]} hosts"] = f"{time.perf_counter() - t0:.1f} s"
    try:
        variants = Variants(base, workdir / "variants-scale")
        _pin_hosts(fl, host_cores, None)
        run_probe(fl, variants.next(), len(fl.hosts), "reuse", control)  # everyone running
        _sweep(sec, fl, variants, reps, sizes, control, host_cores, log)
        _own_cpu(sec, fl, variants, own_reps, runs, control, host_cores, log)
    finally:
        fl.close()
    sec.figures["load average (1 min) at start / end"] = f"{load0:.1f} / {os.getloadavg()[0]:.1f}"
    return sec


def _sweep(sec, fl, variants, reps, sizes, control, host_cores, log) -> None:
    rows: dict[int, list[dict]] = {n: [] for n in sizes}
    for rep, name in alternation([f"{n} hosts" for n in sizes], reps):
        n = int(name.split()[0])
        art = variants.next()
        row = run_probe(fl, art, n, "reuse", control)
        rows[n].append(row)
        sec.add(name, row["wall_s"])
        log(f"  scale rep {rep + 1}: {n} hosts {row['wall_s']:.2f} s, hosts CPU "
            f"{row['hosts_cpu_s']:.2f} s, control CPU {row['control_cpu_s']:.3f} s, "
            f"RSS {row['rss_base_mb']:.0f} -> {row['rss_peak_mb']:.0f} MB")
    critical = median_of(rows[sizes[0]], "wall_s")
    med = {}
    for n in sizes:
        m = {k: median_of(rows[n], k) for k in ("wall_s", "hosts_cpu_s", "control_cpu_s",
                                               "docker_cpu_s", "machine_busy_s", "rss_base_mb",
                                               "rss_peak_mb")}
        m["floor_s"] = floor_s(m["hosts_cpu_s"], len(host_cores), critical)
        m["T/floor"] = m["wall_s"] / m["floor_s"]
        med[n] = m
        sec.figures[f"{n} hosts"] = (
            f"T {m['wall_s']:.2f} s, floor {m['floor_s']:.2f} s (T/floor {m['T/floor']:.2f}); "
            f"hosts CPU {m['hosts_cpu_s']:.2f} s ({m['hosts_cpu_s'] / n * 1000:.0f} ms/host), "
            f"control CPU {m['control_cpu_s'] * 1000:.0f} ms, docker {m['docker_cpu_s']:.2f} s, "
            f"RSS {m['rss_base_mb']:.1f} -> {m['rss_peak_mb']:.1f} MB")
        sec.figures[f"steps, {n} hosts (median s)"] = {
            k: round(statistics.median(r["steps"].get(k, 0) for r in rows[n]), 4)
            for k in rows[n][0]["steps"]}
    left = loaded_floor(rows, os.cpu_count() or 1, len(host_cores))
    for n in sizes:
        med[n]["floor_left_s"] = left[n]
        sec.figures[f"{n} hosts, floor on the CPU others left"] = (
            f"{left[n]:.2f} s (T/floor {med[n]['wall_s'] / left[n]:.2f})")
    figs = per_host(med)
    figs["rss_base_mb"] = med[sizes[-1]]["rss_base_mb"]
    sec.figures["per host"] = {k: round(v, 2) for k, v in figs.items()}
    host_cpu = med[sizes[-1]]["hosts_cpu_s"] / sizes[-1]
    sec.figures["1,000 hosts at these figures"] = {
        k: (round(v, 1) if isinstance(v, float) else v)
        for k, v in projection(figs, 1000, host_cpu).items()}
    sec.details["scale"] = {"rows": {str(n): rows[n] for n in sizes},
                            "medians": {str(n): med[n] for n in sizes},
                            "host_cores": len(host_cores)}
    big = sizes[-1]
    sec.goal(f"T({big}) / floor", med[big]["T/floor"], 1.25, "ratio")
    sec.goal("control CPU per host", figs["control_cpu_ms_per_host"], 10, "ms")
    sec.goal("peak RSS growth per host in flight", figs["rss_growth_mb_per_host"], 1, "MB")


def _own_cpu(sec, fl, variants, reps, runs, control, host_cores, log) -> None:
    """T(8)/T(1) with each host capped at 1/8 of the hosts' cores: `runs` runs (each `reps`
    alternations of 1 and 8 hosts, one connection per host and one per use), then one run with
    the control core kept busy."""
    group = same_kind(fl)
    n = min(8, len(group))
    share = round(len(host_cores) / n, 3)
    sec.figures["own CPU hosts"] = ", ".join(group[:n])
    _pin_hosts(fl, host_cores, share)
    names = [f"{k} hosts, {mode}" for mode in MODES for k in (1, n)]
    ratios: dict[str, list[float]] = {}
    try:
        for run in range(runs + 1):
            busy = run == runs
            label = " (busy control core)" if busy else ""
            samples: dict[str, list[float]] = {k: [] for k in names}
            ctx = Spinner(control) if busy else _Nothing()
            with ctx:
                for _rep, name in alternation(names, reps):
                    k, mode = int(name.split()[0]), name.rsplit(" ", 1)[1]
                    row = run_probe(fl, variants.next(), k, mode, control, group)
                    samples[name].append(row["wall_s"])
                    sec.add(f"own CPU: {name}{label}", row["wall_s"])
                    sec.details.setdefault("own cpu rows", []).append(
                        dict(row, run=run, busy=busy, name=name))
            for mode in MODES:
                r = (statistics.median(samples[f"{n} hosts, {mode}"])
                     / statistics.median(samples[f"1 hosts, {mode}"]))
                ratios.setdefault(f"{mode}{label}", []).append(r)
            log(f"  own CPU run {run + 1}{label}: T({n})/T(1) " + ", ".join(
                f"{m} {ratios[m + label][-1]:.2f}" for m in MODES))
    finally:
        _pin_hosts(fl, host_cores, None)
    for key, values in ratios.items():
        sec.figures[f"own CPU {share:g} core: T({n})/T(1), {key}"] = (
            f"median {statistics.median(values):.2f} (runs: "
            f"{', '.join(f'{v:.2f}' for v in values)})")
    sec.goal(f"own CPU T({n})/T(1), median of {runs} runs", statistics.median(ratios["reuse"]),
             1.3, "ratio")


def same_kind(fl: fixture.Fleet) -> list[str]:
    """The hosts built like the first one (same Debian suite and init), in inventory order.

    T(N)/T(1) asks whether hosts slow each other down, so all N must be the kind of host the
    one-host deploy used: the bullseye `pi` (Python 3.9, which cannot use the bytecode an
    artifact built on 3.11 ships, so it compiles every module it imports at each installer run
    and gateway start) took 1.3-1.4x as long as a bookworm host at the same CPU share, which
    made a mixed T(8) the pi's time, not the fleet's."""
    first = fl.run.hosts[fl.hosts[0].name].spec.flavor
    return [h.name for h in fl.hosts if fl.run.hosts[h.name].spec.flavor == first]


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def refloor(report: dict) -> dict:
    """Add the load-corrected floor to a saved report's scale medians (from its raw rows)."""
    data = report["benchmarks"]["scale"]["details"]["scale"]
    rows = {int(n): r for n, r in data["rows"].items()}
    cores = report.get("machine", {}).get("nproc") or 2
    for n, value in loaded_floor(rows, cores, data["host_cores"]).items():
        data["medians"][str(n)]["floor_left_s"] = value
    return report


if __name__ == "__main__" and len(sys.argv) >= 3 and sys.argv[1] == "refloor":
    _path = Path(sys.argv[2])
    _path.write_text(json.dumps(refloor(json.loads(_path.read_text())), indent=2) + "\n")

if __name__ == "__main__" and len(sys.argv) >= 5 and sys.argv[1] == "probe":
    print(json.dumps(probe(sys.argv[2], sys.argv[3], int(sys.argv[4]),
                           sys.argv[5] if len(sys.argv) > 5 else "reuse",
                           sys.argv[6] if len(sys.argv) > 6 else "")))
