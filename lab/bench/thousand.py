"""A thousand hosts from one machine: wall time against the floor, and the control side's cost
per host, at 1, 64 and 1,000 light hosts.

The hosts are racks (lab/harness/rack.py): each host its own sshd with its own ed25519 host key on
its own loopback port, and its own state dir where the real installer runs (lock, lease, upload,
SHA-256, unpack, atomic switch, readiness, audit); only the gateway behind the installer is a
stand-in that starts, answers and exits. So the control side pays for every host what it pays
for a real one: a key exchange and host-key check, authentication, the take, the upload and the
install command; and the hosts' side is the real host-side work minus a gateway's start.

Why this is honest on 2 cores: the racks are pinned to one core and the deploy process to the
other, so the hosts together have one core whatever their number, as a real fleet's hosts have
their own CPUs and never take the control machine's. The floor of a deploy to N hosts is then
max(hosts' CPU / host cores, T(1)): no tool can finish before the hosts have done their own work
on the cores they have. T(N) / floor measures what the control side adds; the control side's own
CPU and memory per host say whether it would keep up with hosts that had a core each.

Each deploy runs in a fresh process, as `invoke deploy` does, at `--parallel` 256 (the runner's
bound). It samples its own threads and open file descriptors every 0.1 s on a thread
whose own CPU is taken out of the deploy's.

One more deploy of the largest fleet runs at the second size's `--parallel` (1,000 hosts, 64 in
flight): on the racks' one core a host's pace follows how many hosts work at once, so this one
keeps 64 hosts' pace and differs from the 64-host deploy only in the fleet's size. Its control
CPU per host against 64 hosts' is what grows with the fleet itself.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from lab.bench import fixture
from lab.bench.canary import Canary
from lab.bench.gcwatch import Collected
from lab.bench.packets import Counted
from lab.bench.report import Section
from lab.bench.sampler import PeriodicSampler
from lab.bench.scale import _cpu_s, _rss_mb, floor_s, loaded_floor, median_of, split_cores
from lab.bench.stats import alternation

SIZES = (1, 64, 1000)
PER_RACK = 125
READY_S = 600  # readiness ceiling per host under a queue of a thousand (a ceiling, not a wait)


class Sampler(PeriodicSampler):
    """The process's peak threads and open file descriptors, sampled on a thread."""

    def __init__(self, every_s: float = 0.1):
        super().__init__(every_s)
        self.peak = {"threads": 0, "fds": 0}

    def tick(self) -> None:
        self.peak["threads"] = max(self.peak["threads"], threading.active_count())
        try:
            self.peak["fds"] = max(self.peak["fds"], len(os.listdir("/proc/self/fd")))
        except OSError:
            pass


def probe(inventory: str, artifact: str, count: int, parallel: int = 0) -> dict:
    """One deploy to the first `count` hosts of `inventory` at `--parallel` `parallel` (0: as
    many as the runner allows): wall, own CPU, RSS before/peak, peak threads and file
    descriptors, per-step medians."""
    import fabric  # noqa: F401, PLC0415  (imported before the baseline, as a deploy has them)
    import paramiko  # noqa: F401, PLC0415

    from fleet.deploy import api  # noqa: PLC0415
    from fleet.deploy.inventory import load  # noqa: PLC0415
    from fleet.deploy.runner import MAX_PARALLEL, RunOptions  # noqa: PLC0415

    hosts = load(inventory).select("all")[:count]
    hosts = [replace(h, timeouts=replace(h.timeouts, ready=READY_S)) for h in hosts]
    art = api.load_artifact(artifact)
    base = _rss_mb("VmRSS")
    threads0, fds0 = threading.active_count(), len(os.listdir("/proc/self/fd"))
    with Sampler() as sampler, Counted() as packets, Collected() as collected:
        cpu0, t0, split0 = _cpu_s(), time.perf_counter(), os.times()
        results = api.deploy(hosts, art, lambda *a: None,
                             RunOptions(parallel=parallel or min(count, MAX_PARALLEL)))
        wall, cpu1, split1 = time.perf_counter() - t0, _cpu_s(), os.times()
    bad = [f"{r.host}: {r.result} {r.note}" for r in results if not r.ok]
    steps: dict[str, list[float]] = {}
    for res in results:
        for step, value in (res.steps or {}).items():
            steps.setdefault(step, []).append(float(value))
    return {"wall_s": wall, "control_cpu_s": cpu1 - cpu0 - sampler.cpu_s,
            "sampler_cpu_s": sampler.cpu_s, "rss_base_mb": base,
            "rss_peak_mb": _rss_mb("VmHWM"), "threads_base": threads0, "fds_base": fds0,
            "threads_peak": sampler.peak["threads"], "fds_peak": sampler.peak["fds"],
            "user_s": split1.user - split0.user, "sys_s": split1.system - split0.system,
            "packets_received": packets.received, "packets_sent": packets.sent,
            "collections": collected.count, "collections_cpu_s": collected.cpu_s,
            "failed": bad[:20], "failed_count": len(bad),
            "steps": {k: statistics.median(v) for k, v in steps.items()}}


def settle(racks, quiet_s: float = 0.05, timeout: float = 60.0) -> None:
    """Wait until the racks are idle (less than `quiet_s` of CPU in half a second): the sshd
    sessions of the deploy before end after it returns, and their exits are not the next
    deploy's host CPU."""
    deadline = time.monotonic() + timeout
    before = sum(fixture.container_cpu_s(c) or 0.0 for c in racks.container_ids())
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = sum(fixture.container_cpu_s(c) or 0.0 for c in racks.container_ids())
        if now - before < quiet_s:
            return
        before = now


def run_probe(racks, artifact, count: int, cpus: list[int], root: Path | None = None,
              parallel: int = 0, canary: Canary | None = None) -> dict:
    """`probe` of the checkout at `root` (default: this one) in a fresh process on `cpus`, once
    the racks are idle; the racks' CPU from their cgroups; with `canary`, the control core's
    speed meanwhile (`canary_ms`)."""
    root = root or Path(__file__).resolve().parents[2]
    settle(racks)
    cmd = [sys.executable, "-m", "lab.bench.thousand", "probe", str(racks.inventory_path),
           str(artifact.path), str(count)] + ([str(parallel)] if parallel else [])
    env = dict(os.environ, PYTHONPATH=str(root))
    started = time.time()
    with fixture.CpuMeter(racks.container_ids()) as meter:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env,
                              cwd=root, preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    ended = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"deploy probe exited {proc.returncode}: {proc.stderr[-800:]}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    if row["failed"]:
        raise fixture.DeployFailed(f"{row['failed_count']} hosts failed: "
                                   + "; ".join(row["failed"][:5]))
    row.update(hosts_cpu_s=meter.result["hosts_cpu_s"], docker_cpu_s=meter.result["docker_cpu_s"],
               machine_busy_s=meter.result["machine_busy_s"],
               canary_ms=canary.median_ms(started, ended) if canary else None)
    return row


def bench(base, workdir: Path, reps: int, sizes=SIZES, per_rack: int = PER_RACK,
          baseline: str = "", log=print) -> Section:
    """With `baseline` (another checkout), each size is deployed by both, alternated, each with
    artifacts built from its own tree, and the control CPU per host of this one is also given as
    a ratio to the baseline's."""
    from lab.bench.ctlcost import revisions  # noqa: PLC0415
    from lab.harness import rack  # noqa: PLC0415
    from lab.harness.run import docker_client  # noqa: PLC0415

    revs = revisions(Path(__file__).resolve().parents[2], baseline)
    sizes = sorted(sizes)
    sec = Section("thousand", f"a thousand hosts: {', '.join(map(str, sizes))} light hosts "
                              f"in racks, against the floor ({', '.join(revs)})")
    sec.details["revisions"] = {k: str(v) for k, v in revs.items()}
    control, host_cores = split_cores(os.cpu_count() or 1)
    load0 = os.getloadavg()[0]
    sec.details["cores"] = {"control": control, "hosts": host_cores}
    t0 = time.perf_counter()
    racks = rack.start(docker_client(), workdir / "racks", sizes[-1], per_rack,
                       cpuset=",".join(map(str, host_cores)), log=log)
    sec.figures[f"racks start, {sizes[-1]} hosts"] = f"{time.perf_counter() - t0:.1f} s"
    try:
        with Canary(control, workdir / "canary.txt") as canary:  # the control core's speed
            rows, paced = _deploys(sec, racks, revs, base, workdir, sizes, reps, control, canary,
                                   log)
    finally:
        racks.close()
    _figures(sec, rows["this"], sizes, len(host_cores))
    if paced:
        same_pace(sec, rows["this"][sizes[-2]], paced, sizes[-2], sizes[-1])
    if "base" in rows:
        against_base(sec, rows["this"], rows["base"], sizes)
    sec.figures["load average (1 min) at start / end"] = f"{load0:.1f} / {os.getloadavg()[0]:.1f}"
    return sec


def _deploys(sec: Section, racks, revs: dict, base, workdir: Path, sizes: list[int], reps: int,
             control: list[int], canary: Canary, log) -> tuple[dict, list[dict]]:
    """A first deploy (a release on every host), then each size by each revision and the
    largest fleet at the second size's pace, alternated: (rows by revision and size, the paced
    rows)."""
    from lab.bench.ctlcost import revision_variants  # noqa: PLC0415

    variants = revision_variants(revs, base, workdir, "thousand")  # each its own installer
    first = run_probe(racks, variants["this"].next(), sizes[-1], control)
    log(f"  thousand: first deploy to {sizes[-1]} hosts {first['wall_s']:.1f} s")
    rows: dict[str, dict[int, list[dict]]] = {rev: {n: [] for n in sizes} for rev in revs}
    cases = {f"{n} hosts{'' if rev == 'this' else ', ' + rev}": (n, 0, rev)
             for n in sizes for rev in revs}
    paced: list[dict] = []  # the largest fleet at the second size's pace (module doc)
    if len(sizes) > 1 and sizes[-1] > sizes[-2]:
        cases[f"{sizes[-1]} hosts, {sizes[-2]} in flight"] = (sizes[-1], sizes[-2], "this")
    for rep, name in alternation(list(cases), reps):
        n, parallel, rev = cases[name]
        row = run_probe(racks, variants[rev].next(), n, control, revs[rev], parallel, canary)
        (paced if parallel else rows[rev][n]).append(row)
        sec.add(name, row["wall_s"])
        log(f"  thousand rep {rep + 1}: {name} {row['wall_s']:.2f} s, hosts CPU "
            f"{row['hosts_cpu_s']:.2f} s, control CPU {row['control_cpu_s']:.3f} s, RSS "
            f"{row['rss_base_mb']:.0f} -> {row['rss_peak_mb']:.0f} MB, threads "
            f"{row['threads_peak']}, fds {row['fds_peak']}, canary {row['canary_ms']} ms")
    return rows, paced


def against_base(sec: Section, this: dict[int, list[dict]], base: dict[int, list[dict]],
                 sizes: list[int]) -> None:
    """The baseline's control CPU and peak RSS per host at each size, and this checkout's
    control CPU as a ratio to it (medians of the repetitions, alternated in one run)."""
    for n in sizes:
        ours, theirs = (1000 * median_of(rows[n], "control_cpu_s") / n for rows in (this, base))
        rss = (median_of(base[n], "rss_peak_mb") - median_of(base[n], "rss_base_mb")) / n
        sec.figures[f"{n} hosts, base"] = (
            f"control CPU {theirs:.1f} ms/host, RSS {rss:.2f} MB/host; this / base "
            f"{ours / theirs:.2f}; {per_host(base[n], n)}")


def same_pace(sec: Section, small: list[dict], paced: list[dict], mid: int, big: int) -> None:
    """The largest fleet deployed `mid` hosts at a time against `mid` hosts: control CPU per
    host, and their ratio (what the fleet's size alone adds per host)."""
    ours, theirs = (1000 * median_of(rows, "control_cpu_s") / n
                    for rows, n in ((paced, big), (small, mid)))
    sec.figures[f"{big} hosts, {mid} in flight"] = (
        f"T {median_of(paced, 'wall_s'):.2f} s; control CPU {ours:.1f} ms/host; "
        f"{per_host(paced, big)}")
    sec.figures[f"control CPU per host, {big} / {mid} hosts, {mid} in flight each"] = round(
        ours / theirs, 2)


def per_host(rows: list[dict], n: int) -> str:
    """Median user and system CPU (with the sampler's) and SSH packets per host of `rows`."""
    def med(key: str) -> float:
        return statistics.median(float(r.get(key, 0)) for r in rows) / n

    text = (f"user {1000 * med('user_s'):.2f} ms, sys {1000 * med('sys_s'):.2f} ms (with the "
            f"sampler's); SSH packets received {med('packets_received'):.1f}, sent "
            f"{med('packets_sent'):.1f}")
    if all("collections" in r for r in rows):  # a baseline's probe may not count them
        mid = sorted(rows, key=lambda r: r["control_cpu_s"])[len(rows) // 2]
        text += (f"; garbage collections by generation {'/'.join(map(str, mid['collections']))}"
                 f", their CPU {1000 * sum(mid['collections_cpu_s']) / n:.2f} ms (of it full "
                 f"ones {1000 * mid['collections_cpu_s'][2] / n:.2f} ms)")
    return text


def _figures(sec: Section, rows: dict[int, list[dict]], sizes: list[int], host_cores: int) -> None:
    critical = median_of(rows[sizes[0]], "wall_s")
    med = {}
    for n in sizes:
        m = {k: median_of(rows[n], k) for k in (
            "wall_s", "hosts_cpu_s", "control_cpu_s", "rss_base_mb", "rss_peak_mb",
            "threads_peak", "fds_peak", "threads_base", "fds_base")}
        m["floor_s"] = floor_s(m["hosts_cpu_s"], host_cores, critical)
        m["T/floor"] = m["wall_s"] / m["floor_s"]
        m["control_cpu_ms_per_host"] = 1000 * m["control_cpu_s"] / n
        m["rss_mb_per_host"] = (m["rss_peak_mb"] - m["rss_base_mb"]) / n
        med[n] = m
        sec.figures[f"{n} hosts"] = (
            f"T {m['wall_s']:.2f} s, floor {m['floor_s']:.2f} s (T/floor {m['T/floor']:.2f}); "
            f"hosts CPU {m['hosts_cpu_s']:.2f} s ({m['hosts_cpu_s'] / n * 1000:.0f} ms/host); "
            f"control CPU {m['control_cpu_ms_per_host']:.1f} ms/host; RSS "
            f"{m['rss_base_mb']:.0f} -> {m['rss_peak_mb']:.0f} MB "
            f"({m['rss_mb_per_host']:.2f} MB/host); peak threads {m['threads_peak']:.0f}, "
            f"fds {m['fds_peak']:.0f}")
        sec.figures[f"{n} hosts, per host"] = per_host(rows[n], n)
        canary = median_of(rows[n], "canary_ms")
        if canary is not None:
            sec.figures[f"{n} hosts, control core"] = (
                f"canary {canary:.2f} ms per round (lab.bench.canary; more: a slower core)")
        sec.figures[f"steps, {n} hosts (median s)"] = {
            k: round(statistics.median(r["steps"].get(k, 0) for r in rows[n]), 4)
            for k in rows[n][0]["steps"]}
    left = loaded_floor(rows, os.cpu_count() or 1, host_cores)
    for n in sizes:
        med[n]["floor_left_s"] = left[n]
        sec.figures[f"{n} hosts, floor on the CPU others left"] = (
            f"{left[n]:.2f} s (T/floor {med[n]['wall_s'] / left[n]:.2f})")
    big, mid = sizes[-1], sizes[-2] if len(sizes) > 1 else sizes[-1]
    if big > mid:
        sec.figures[f"control CPU per extra host, {mid} -> {big}"] = round(
            1000 * (med[big]["control_cpu_s"] - med[mid]["control_cpu_s"]) / (big - mid), 2)
        sec.figures[f"peak RSS per extra host, {mid} -> {big}"] = round(
            (med[big]["rss_peak_mb"] - med[mid]["rss_peak_mb"]) / (big - mid), 3)
    sec.details["thousand"] = {"rows": {str(n): rows[n] for n in sizes},
                               "medians": {str(n): med[n] for n in sizes}}
    sec.goal(f"T({big}) / floor", med[big]["T/floor"], 1.25, "ratio")
    sec.goal(f"control CPU per host at {big}", med[big]["control_cpu_ms_per_host"], 10, "ms")
    sec.goal(f"peak RSS per host at {big}", med[big]["rss_mb_per_host"], 1, "MB")


if __name__ == "__main__" and len(sys.argv) >= 2 and sys.argv[1] == "probe":
    print(json.dumps(probe(sys.argv[2], sys.argv[3], int(sys.argv[4]),
                           int(sys.argv[5]) if len(sys.argv) > 5 else 0)))
