"""(§3 of round 2) Failures as fast as successes, on the Docker harness.

- `failfast`: a release whose `memory-continuity` plugin raises at import, deployed to every
  host, against a good release to the same hosts, alternated. The time of the failed deploy runs
  from its start until every host reports `rolled_back`: the installer switched back, restarted
  the old release and saw it ready with the old versions. A status call afterwards confirms each
  host answers on the old release (timed separately).
- `hung`: one host paused (`docker pause`: every process frozen, the SSH banner never comes)
  among N. Each repetition deploys a new release to the N-1 healthy hosts alone and to all N,
  alternated; the healthy hosts' finishing time (deploy start until the last of them has its
  result) is compared, and the paused host's failure time against its deadline (its connect
  timeout: a host that never sends the SSH banner is unreachable).
"""

from __future__ import annotations

import time

from fleet.deploy import api
from fleet.deploy.runner import RunOptions
from lab.bench import fixture
from lab.bench.artifacts import variant
from lab.bench.report import Section
from lab.bench.stats import alternation

PLUGIN_ENTRY = "fleet/plugins/memory_continuity/plugin.py"
BROKEN_LINE = b'raise RuntimeError("benchmark: this release\'s plugin fails to load")\n'
LEASE = "(lease)"
FINAL = {"installed", "unchanged", "rolled_back", "failed", "unreachable", "refused", "skipped"}


def break_plugin(source: bytes) -> bytes:
    """The plugin entry with a first statement that raises at import (after the docstring and
    `from __future__`, which must stay first)."""
    marker = b"from __future__ import annotations\n"
    head, sep, tail = source.partition(marker)
    if not sep:
        return BROKEN_LINE + source
    return head + sep + BROKEN_LINE + tail


class Timed:
    """A deploy whose per-host finishing times (from its start) come from the runner's final
    progress report of each host."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.done: dict[str, float] = {}
        self.answers: dict[str, float] = {}

    def sink(self, host: str, step: str, note: str = "") -> None:
        if step in FINAL:
            self.done.setdefault(host, time.perf_counter() - self.t0)


def timed_deploy(hosts, artifact) -> tuple[float, dict[str, float], list]:
    """One deploy; (seconds, host -> finished at, results); `done["(lease)"]` is when the run
    went on from taking the fleet lease (timed around `fleet.deploy.lease.take`)."""
    from fleet.deploy import lease  # noqa: PLC0415

    timed = Timed()
    take = lease.take

    def timed_take(*args, **kwargs):
        held = None
        try:
            held = take(*args, **kwargs)
            return held
        finally:
            timed.done[LEASE] = time.perf_counter() - timed.t0
            timed.answers = dict(held.answered_s) if held is not None else {}

    lease.take = timed_take
    try:
        results = api.deploy(hosts, artifact, timed.sink, RunOptions(parallel=max(1, len(hosts))))
    finally:
        lease.take = take
    timed.done.update({f"(lease answer) {h}": t for h, t in timed.answers.items()})
    return time.perf_counter() - timed.t0, timed.done, results


def failfast(fleet: fixture.Fleet, variants, reps: int, log=print) -> Section:
    n = len(fleet.hosts)
    sec = Section("failfast", f"§3a a release whose plugin fails to load, {n} hosts")
    broken_no = 0
    results: list = []
    for rep, name in alternation(["good release", "broken release"], reps):
        if name == "good release":
            good = variants.next()
            seconds, _ = fixture.deploy(fleet.hosts, good)
            sec.add(name, seconds)
            log(f"  failfast rep {rep + 1}: good release: {seconds:.2f} s")
            continue
        broken_no += 1
        art = variant(variants.base, f"broken{broken_no:03d}", variants.out_dir,
                      {PLUGIN_ENTRY: break_plugin})
        seconds, done, results = timed_deploy(fleet.hosts, art)
        bad = [r for r in results if r.result != "rolled_back"]
        if bad:
            raise RuntimeError("broken release: " + "; ".join(
                f"{r.host}: {r.result} {r.note[:200]}" for r in bad))
        t_status = time.perf_counter()
        status = api.status(fleet.hosts, lambda *a: None, RunOptions(parallel=n))
        status_s = time.perf_counter() - t_status
        wrong = [s for s in status if not (s.status and s.status.ready)
                 or (s.to_release or {}).get("sha256") == art.sha256]
        if wrong:
            raise RuntimeError("after the rollback: " + "; ".join(
                f"{s.host}: {s.note or s.to_release}" for s in wrong))
        sec.add(name, seconds)
        sec.add("status check after it (all on the old release, ready)", status_s)
        steps = fixture.step_medians([results])
        sec.details.setdefault("broken steps", []).append(steps)
        log(f"  failfast rep {rep + 1}: broken release: all rolled back in {seconds:.2f} s "
            f"(lease {done.get(LEASE, 0.0):.2f} s; host.ready "
            f"{steps.get('host.ready', '?')} s, host.rollback {steps.get('host.rollback', '?')} "
            f"s median); status {status_s:.2f} s")
    r = sec.ratio("broken release", "good release")
    sec.figures["broken / good"] = r
    sec.figures["failed deploy steps (median s, last rep)"] = sec.details["broken steps"][-1]
    reasons = {res.note[:160] for res in results}
    sec.notes.append("reason reported: " + " | ".join(sorted(reasons))[:400])
    sec.goal("rolled back everywhere / successful deploy", r["median"], 2.0, "ratio")
    return sec


def hung(fleet: fixture.Fleet, variants, reps: int, log=print) -> Section:
    from lab.harness import faults  # noqa: PLC0415

    n = len(fleet.hosts)
    sec = Section("hung", f"§3b one paused host among {n}")
    victim = fleet.hosts[-1]
    healthy = fleet.hosts[:-1]
    container = fleet.run.hosts[victim.name]
    deadline = victim.timeouts.connect
    alone, together = f"{n - 1} healthy hosts alone", f"{n - 1} healthy of {n}, one paused"
    for rep, name in alternation([alone, together], reps):
        art = variants.next()
        if name == alone:
            seconds, done, results = timed_deploy(healthy, art)
        else:
            with faults.paused(container):
                seconds, done, results = timed_deploy(fleet.hosts, art)
            hung_res = results[-1]
            if hung_res.ok:
                raise RuntimeError(f"{victim.name} was paused yet reported {hung_res.result}")
            sec.add("paused host: failed after", done.get(victim.name, seconds))
            sec.add("whole deploy (returns)", seconds)
            sec.notes[:] = [f"paused host's result: {hung_res.result}: {hung_res.note[:200]}"]
        bad = [r for r in results if r.host != victim.name and r.result != "installed"]
        if bad:
            raise RuntimeError(f"{name}: " + "; ".join(f"{r.host}: {r.result} {r.note[:200]}"
                                                       for r in bad))
        sec.details.setdefault(f"steps: {name}", []).append(
            fixture.step_medians([[r for r in results if r.host != victim.name]]))
        finish = max(t for h, t in done.items() if h in {x.name for x in healthy})
        answers = sorted(t for h, t in done.items() if h.startswith("(lease answer)"))
        sec.details.setdefault(f"lease answers: {name}", []).append(answers)
        sec.add(name, finish)
        sec.add(f"{name}: lease taken after", done.get(LEASE, 0.0))
        log(f"  hung rep {rep + 1}: {name}: lease answers at "
            f"{', '.join(f'{t:.1f}' for t in answers)} s, went on at "
            f"{done.get(LEASE, 0.0):.2f} s, healthy hosts "
            f"done at {finish:.2f} s"
            + (f", paused host failed at {done.get(victim.name, seconds):.2f} s, deploy "
               f"returned at {seconds:.2f} s" if name == together else ""))
    # the paused host back on the fleet's release, for the benchmarks after this one
    fixture.deploy(fleet.hosts, variants.next())
    r = sec.ratio(together, alone)
    sec.figures["healthy hosts: with a paused one / alone"] = r
    for which in (alone, together):
        sec.figures[f"steps, {which} (last rep, median s)"] = sec.details[f"steps: {which}"][-1]
    sec.figures["paused host's deadline (connect timeout)"] = f"{deadline:g} s"
    sec.goal("healthy hosts with a paused one / alone", r["median"], 1.10, "ratio")
    failed_at = sec.summary("paused host: failed after")["median"]
    sec.goal("paused host fails by its deadline (+2 s)", failed_at, deadline + 2.0, "s")
    return sec
