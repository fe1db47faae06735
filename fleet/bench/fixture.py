"""The Docker harness the deploy benchmarks share, and a quiet way to deploy to it.

One harness run of N hosts (default 8, the most this 2-core machine takes) under
`.fleet/bench/harness`, removed at the end. Its generated inventory is loaded through
fleet.deploy's own loader, so every contender reaches the hosts with strict host keys.
"""

from __future__ import annotations

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


def start(count: int, directory: Path, log=print) -> Fleet:
    """Start `count` harness hosts and load their generated inventory."""
    from fleet.harness.run import docker_client, start_harness  # noqa: PLC0415

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
    import statistics  # noqa: PLC0415

    per: dict[str, list[float]] = {}
    for batch in results:
        for res in batch:
            for step, value in (res.steps or {}).items():
                per.setdefault(step, []).append(float(value))
            per.setdefault("host_total", []).append(float(res.duration_s))
    return {k: round(statistics.median(v), 4) for k, v in per.items()}
