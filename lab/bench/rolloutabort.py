"""A bad release taken back by a progressive rollout, against a good full deploy.

64 light hosts on this machine (local connection, fleet's own gateway under its supervisor, the
real installer; no ssh, so the figures are the control side's and the hosts' work, not the
network's). A release that fails to load on 30% of them (every host whose number ends in 2, 5 or
8; the first host is good, so the canary passes) is rolled out with `--waves 1,10%,100%
--max-fail 5%`: the time runs from the rollout's start until every host is back on its old
release (the abort's rollbacks answered, each verified by its installer). The contender is a good
full deploy (no waves) of a new release to the same 64 hosts, restored afterwards (untimed).
Both run at `--parallel 16`, alternated, each repetition on fresh release names.
Goal: bad rollout taken back / good full deploy <= 1.5.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from fleet.continuity.statelayout import release_name
from fleet.deploy import api, rollout
from fleet.deploy.inventory import Host, load
from fleet.deploy.runner import RunOptions
from fleet.gateway import process
from fleet.gateway.layout import Layout
from lab import sourcetree
from lab.bench.artifacts import variant
from lab.bench.report import Section
from lab.bench.stats import alternation

HOSTS = 64
PARALLEL = 16
WAVES = "1,10%,100%"
MAX_FAIL = "5%"


def bad_names(count: int) -> list[str]:
    """30% of the hosts, spread out: numbers ending in 2, 5 or 8."""
    return [f"h{i:02d}" for i in range(1, count + 1) if i % 10 in (2, 5, 8)]


def _inventory(root: Path, count: int) -> Path:
    names = [f"h{i:02d}" for i in range(1, count + 1)]
    path = root / "inventory.yaml"
    path.write_text(
        "vars: {connection: local, gateway: {manager: fleet}, timeouts: {ready: 60}}\n"
        "hosts:\n" + "".join(f"  {n}: {{state_dir: .fleet/hosts/{n}}}\n" for n in names)
        + f"groups:\n  sandbox: {{hosts: [{', '.join(names)}]}}\n")
    return path


def _bad_release(work: Path, names: list[str]) -> api.ArtifactRef:
    tree = work / "bad-tree"
    shutil.rmtree(tree, ignore_errors=True)
    plugin = sourcetree.snapshot(tree)
    sourcetree.break_python_entry_on(plugin, names, "benchmark: bad on this host")
    return api.build_artifact(tree, work / "bad-dist")


def _quiet(*_args) -> None:
    pass


def bench(base: api.ArtifactRef, workdir: Path, reps: int = 3,
          hosts: int = HOSTS, log=print) -> Section:
    sec = Section("rollout", f"rollout abort: {hosts} hosts, a release bad on 30%")
    work = workdir / "rollout"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    inv_path = _inventory(work, hosts)
    fleet_hosts: list[Host] = load(inv_path).select("sandbox")
    opts = RunOptions(parallel=PARALLEL)
    old = release_name(base.version, base.sha256)
    try:
        first = api.deploy(fleet_hosts, base, _quiet, opts)
        if not all(r.ok for r in first):
            raise RuntimeError(f"setup deploy failed: {[r.note for r in first if not r.ok][:3]}")
        bad_base = _bad_release(work, bad_names(hosts))
        touched: list[int] = []

        def good(rep: int) -> float:
            art = variant(base, f"good{rep}", work / "variants")
            t0 = time.perf_counter()
            res = api.deploy(fleet_hosts, art, _quiet, opts)
            elapsed = time.perf_counter() - t0
            if not all(r.ok for r in res):
                raise RuntimeError("good deploy failed")
            back = api.rollback(fleet_hosts, _quiet, opts, to=old)  # untimed restore
            if not all(r.ok for r in back):
                raise RuntimeError("restore after the good deploy failed")
            return elapsed

        def bad(rep: int) -> float:
            art = variant(bad_base, f"bad{rep}", work / "variants")
            t0 = time.perf_counter()
            record = rollout.Rollout.start(inv_path, fleet_hosts, art, rollout.Options(
                waves=WAVES, max_fail=MAX_FAIL, parallel=PARALLEL)).run()
            elapsed = time.perf_counter() - t0
            stands = rollout.stands(record)
            if record["state"] != rollout.ABORTED or list(stands) != [old]:
                raise RuntimeError(f"the bad rollout did not end taken back: {stands}")
            touched.append(sum(1 for h in record["hosts"].values()
                               if h["outcome"] == rollout.REVERTED))
            return elapsed

        contenders = {"good full deploy": good, "bad rollout taken back": bad}
        for rep, name in alternation(list(contenders), reps):
            seconds = contenders[name](rep)
            sec.add(name, seconds)
            log(f"  rep {rep + 1}: {name} {seconds:.2f}s")
        ratio = sec.ratio("bad rollout taken back", "good full deploy")
        sec.figures["taken back / good deploy"] = ratio
        sec.figures["hosts taken back per rollout"] = touched
        sec.goal("bad rollout taken back / good full deploy", ratio.get("median"), 1.5, "ratio")
        sec.notes.append(f"waves {WAVES}, --max-fail {MAX_FAIL}, --parallel {PARALLEL}; bad on "
                         f"{len(bad_names(hosts))} of {hosts} hosts")
    finally:
        for host in fleet_hosts:  # the gateways and their supervisors
            process.stop(Layout(Path(host.state_dir)), 10.0)
    return sec
