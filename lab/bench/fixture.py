"""The Docker harness the deploy benchmarks share, and a quiet way to deploy to it.

One harness run of N hosts (default 8, the most this 2-core machine takes) under
`.fleet/bench/harness`, removed at the end. Its generated inventory is loaded through
fleet.deploy's own loader, so every contender reaches the hosts with strict host keys.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from fleet.deploy import api
from fleet.deploy.inventory import Host, load
from fleet.deploy.runner import HostResult, RunOptions

BENCH_DIR = Path(".fleet") / "bench"


@dataclass
class Fleet:
    """A started harness: the run (for ssh and cleanup) and the inventory's hosts, in order."""

    run: object
    hosts: list[Host]
    timing: dict

    @property
    def key_path(self) -> Path:
        return Path(self.run.key.path)

    @property
    def known_hosts(self) -> Path:
        return Path(self.run.known_hosts_path)

    def close(self) -> None:
        self.run.close()

    def container_ids(self) -> list[str]:
        return [h.container.id for h in self.run.hosts.values()]

    def limit_cpus(self, cpus: float | None) -> None:
        """Give every host `cpus` cores of its own (None: all share the machine again)."""
        from lab.harness.hosts import limit_cpu  # noqa: PLC0415

        for host in self.run.hosts.values():
            limit_cpu(host.container, cpus)

    def own_cpu_share(self) -> float:
        """Each host's cores when the hosts get CPUs of their own: one core of the machine is
        the control machine's (the deploy process, Docker's proxies), the others are split
        evenly between the hosts (1/8 core each for 8 hosts on 2 cores). With only a fifth left
        over (0.2 core per host) the control side's burst of 8 SSH handshakes and Docker's
        proxies still queued behind the hosts: machine busy 1.56 of 2 cores on average."""
        cores = os.cpu_count() or 1
        return round(max(cores - 1, cores / 2) / len(self.hosts), 3)


CGROUP_CPU = (Path("/sys/fs/cgroup/cpuacct/docker/{}/cpuacct.usage"),  # cgroup v1, cgroupfs
              Path("/sys/fs/cgroup/docker/{}/cpu.stat"),  # v2, cgroupfs
              Path("/sys/fs/cgroup/system.slice/docker-{}.scope/cpu.stat"))  # v2, systemd


def container_cpu_s(container_id: str) -> float | None:
    """CPU seconds a container has used so far, from its cgroup; None when unreadable."""
    for pattern in CGROUP_CPU:
        path = Path(str(pattern).format(container_id))
        try:
            text = path.read_text()
        except OSError:
            continue
        if path.name == "cpuacct.usage":
            return int(text.strip()) / 1e9
        for line in text.splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
    return None


def machine_busy_s() -> float | None:
    """CPU seconds the whole machine has been busy (all processes, all users), /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        ticks = [int(x) for x in fields]
    except (OSError, ValueError, IndexError):
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


INFRA = ("docker-proxy", "dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2")


def infra_cpu_ticks() -> dict[int, int]:
    """CPU ticks used so far by each of Docker's own processes (docker-proxy carries every byte
    of the published SSH ports; dockerd, containerd and the shims), from /proc/<pid>/stat."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        comm = raw[raw.find("(") + 1:raw.rfind(")")]
        if comm in INFRA or comm.startswith("containerd-shim"):
            fields = raw[raw.rfind(")") + 2:].split()
            found[int(entry.name)] = int(fields[11]) + int(fields[12])
    return found


def infra_cpu_s(before: dict[int, int], after: dict[int, int]) -> float:
    """CPU seconds between two samples, over the processes alive in both (others' harness
    runs come and go on a shared machine)."""
    ticks = sum(after[pid] - before[pid] for pid in after if pid in before)
    return ticks / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU used during a block: by the hosts (containers), by this process and its children,
    and by the whole machine (which includes other people's work on a shared machine)."""

    def __init__(self, container_ids: list[str]):
        self.ids = container_ids
        self.result: dict[str, float | None] = {}

    def _sample(self):
        hosts = [container_cpu_s(c) for c in self.ids]
        usage = os.times()
        control = usage.user + usage.system + usage.children_user + usage.children_system
        return ((None if None in hosts else sum(hosts)), control, infra_cpu_ticks(),
                machine_busy_s())

    def __enter__(self):
        self.t0 = time.perf_counter()
        self.before = self._sample()
        return self

    def __exit__(self, *exc):
        after = self._sample()
        wall = time.perf_counter() - self.t0
        diff = [None if a is None or b is None else a - b for a, b in zip(after, self.before)
                if not isinstance(a, dict)]
        diff.insert(2, infra_cpu_s(self.before[2], after[2]))
        self.result = {"wall_s": wall, "hosts_cpu_s": diff[0], "control_cpu_s": diff[1],
                       "docker_cpu_s": diff[2], "machine_busy_s": diff[3]}


def start(count: int, directory: Path, log=print) -> Fleet:
    """Start `count` harness hosts and load their generated inventory."""
    from lab.harness.run import docker_client, start_harness  # noqa: PLC0415

    client = docker_client()
    run, timing = start_harness(client, directory.resolve(), count=count, keep=False,
                                log=log)
    try:
        inventory = load(run.inventory_path)
        hosts = inventory.select("all")
    except BaseException:
        run.close()
        raise
    return Fleet(run, hosts, timing)


class DeployFailed(RuntimeError):
    """A contender did not leave every host on the wanted release."""


def deploy(hosts: list[Host], artifact: api.ArtifactRef, expect: str = "installed",
           force: bool = False) -> tuple[float, list[HostResult]]:
    """One `fleet` deploy (the API `invoke deploy` calls) to `hosts`; (seconds, results)."""
    t0 = time.perf_counter()
    results = api.deploy(hosts, artifact, lambda *a: None,
                         RunOptions(parallel=max(1, len(hosts))), force=force)
    elapsed = time.perf_counter() - t0
    bad = [r for r in results if not r.ok or r.result != expect]
    if bad:
        raise DeployFailed("; ".join(f"{r.host}: {r.result} {r.note}" for r in bad))
    return elapsed, results


def step_medians(results: list[list[HostResult]]) -> dict[str, float]:
    """Median per step (control-side and installer `host.*` steps) over hosts and repetitions."""
    per: dict[str, list[float]] = {}
    for batch in results:
        for res in batch:
            for step, value in (res.steps or {}).items():
                per.setdefault(step, []).append(float(value))
            per.setdefault("host_total", []).append(float(res.duration_s))
    return {k: round(statistics.median(v), 4) for k, v in per.items()}
