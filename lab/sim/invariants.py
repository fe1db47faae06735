"""What must hold after every schedule (lab.sim.schedule), checked on the simulated hosts' real
files and on the control side's reports; each violation is one line naming the host.

After the faults (every host process finished, hosts powered on):
- every host is on exactly one complete release, or none: `current` names a release dir that
  holds its meta and every file of its manifest, each plugin link goes through `current`;
- its gateway runs that release, or its status says it is not ready ("reported down");
- where no installer lock is left (a dead installer's lock marks an unreconciled transaction),
  the audit log's last word is the release the host runs;
- the user's config and agent state are untouched;
- no run changed a host twice; a run refused on a host changed nothing there; no installer
  changed a host without its run's fleet lease (checked as each one starts, in `World`); a run
  the consent gate refused (a host not confirmed, no `--yes`) reached no host (no audit line,
  no installer switched for it);
- each report agrees with the host: an `ok` answer names the release the host ran when it
  answered, and a failed host whose state was read back names what it ran then.
After the rerun (liveness), every host is on the target release, ready, its audit log agrees,
and no deploy lock or fleet lease is left.

After a rollout (lab.sim.rollouts; `rollout_problems`, on the simulated hosts' own history of
switches, not on what the record says): it ended completed or aborted once the faults were
over; (a) aborted, no host is left on its release unless it ran it before; (b) no host was
reverted twice by it, nor to another release than the one it ran before; (c) completed, every
host it calls deployed or unchanged runs the release (every host, when none failed), and its
budget was not spent; (d) its waves are the plan of its `--waves`, each host in exactly one,
and no host of a wave after the abort (nor one it calls not started) was changed by it; (e) its
record says what every host runs ("unknown" only where it does not claim an outcome); (f) the
failures it counted are hosts it tried, and it aborted only past its budget or when taken back
(then its release is recorded as bad, and only then).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleet.continuity.statelayout import StateLayout
from fleet.deploy import rollout, waves
from fleet.installer import audit, machine, releasedirs, transaction
from lab.sim.host import PLUGINS, SimHost, SimManager, Switch, lexists, read_json_lines

CHANGED = ("installed", "restarted", "rolled_back")


def _release_problems(host: SimHost) -> list[str]:
    current = releasedirs.current_release(host.state)
    link = host.layout.current
    if current is None:
        return [f"{host.name}: `current` is a dangling link"] if lexists(link) else []
    meta = releasedirs.read_meta(current)
    if meta is None:
        return [f"{host.name}: release {current.name} has no {StateLayout.RELEASE_META}"]
    problems = []
    manifest = read_manifest(current)
    for rel in manifest.get("files", {}):
        if not (current / rel).is_file():
            problems.append(f"{host.name}: release {current.name} lacks {rel}")
    for plugin_id, pkg in PLUGINS.items():
        ext = host.layout.extensions / plugin_id
        want = StateLayout.extension_target(pkg)
        try:
            target = ext.readlink()
        except OSError:
            problems.append(f"{host.name}: no plugin link {plugin_id}")
            continue
        if str(target) != want or not ext.resolve().is_dir():
            problems.append(f"{host.name}: plugin link {plugin_id} -> {target}, not {want}")
    return problems


def read_manifest(release: Any) -> dict:
    import json

    try:
        return json.loads((release / StateLayout.MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


def _status(host: SimHost) -> dict:
    with machine.use(host.machine):
        return transaction.status(host.state, SimManager(host))


def after_faults(world: Any) -> None:
    """The safety invariants, once every fault is over and every host process has ended."""
    out = world.violations
    for host in world.hosts.values():
        out.extend(_release_problems(host))
        running = host.current()
        status = _status(host)
        gateway = host.gateway
        if status.get("ready") and not (gateway.ready and gateway.release == running):
            out.append(f"{host.name}: status says ready, but the gateway runs "
                       f"{gateway.release if gateway.running else 'nothing'} and `current` is "
                       f"{running}")
        if gateway.running and gateway.release != running and status.get("ready"):
            out.append(f"{host.name}: the gateway runs {gateway.release}, not {running}")
        if not host.layout.lock.exists():
            known, recorded = audit.recorded_release(host.state)
            if known and recorded != running:
                out.append(f"{host.name}: the audit log says {recorded}, the host runs "
                           f"{running} (no installer lock left to reconcile it)")
        bad = host.user_files_intact()
        if bad:
            out.append(f"{host.name}: user files changed or lost: {', '.join(bad)}")
    _runs(world)


def _runs(world: Any) -> None:
    out = world.violations
    for host in world.hosts.values():
        log = read_json_lines(host.layout.audit)
        for run in world.runs:
            mine = [e for e in log if e.get("who") == run.owner and e.get("action") == "install"
                    and e.get("result") in CHANGED]
            if len(mine) > 1:
                out.append(f"{host.name}: run {run.owner} applied it {len(mine)} times")
            if run.unconfirmed and any(e.get("who") == run.owner for e in log):
                out.append(f"{host.name}: run {run.owner} was refused for want of consent "
                           f"({', '.join(run.unconfirmed)}) yet reached the host")
            result = next((r for r in run.results or [] if r.host == host.name), None)
            if result is None:
                continue
            if result.result == "refused" and mine:
                out.append(f"{host.name}: run {run.owner} was refused there yet changed it")
            seen = run.seen.get(host.name, "?")
            said = (result.to_release or {}).get("release") if result.to_release else None
            if result.ok and result.result != "refused" and seen != "?" and said != seen:
                out.append(f"{host.name}: run {run.owner} reported {result.result} -> {said}, "
                           f"the host ran {seen} when it answered")
            if (not result.ok and result.data.get("host_after") is not None
                    and seen != "?" and said != seen):
                out.append(f"{host.name}: run {run.owner} read back {said}, the host ran {seen}")


def after_rerun(world: Any, run: Any, target: str) -> None:
    """Liveness: the rerun converged on every host."""
    out = world.violations
    results = {r.host: r for r in run.results or []}
    for host in world.hosts.values():
        res = results.get(host.name)
        if res is None or not res.ok:
            out.append(f"{host.name}: the rerun did not converge: "
                       f"{res.result + ' ' + res.note if res else 'no result'}")
            continue
        if (res.to_release or {}).get("release") != target:
            out.append(f"{host.name}: the rerun reported {res.to_release}, not {target}")
        if host.current() != target:
            out.append(f"{host.name}: after the rerun it runs {host.current()}, not {target}")
        if not (host.gateway.ready and host.gateway.release == target):
            out.append(f"{host.name}: after the rerun its gateway is not ready on {target}")
        known, recorded = audit.recorded_release(host.state)
        if not known or recorded != target:
            out.append(f"{host.name}: after the rerun the audit log says "
                       f"{recorded if known else 'nothing it can name'}, not {target}")
        if host.layout.lock.exists():
            out.append(f"{host.name}: a deploy lock is left after the rerun")
        if host.layout.lease.exists():
            out.append(f"{host.name}: a fleet lease is left after the rerun")
    out.extend(p for h in world.hosts.values() for p in _release_problems(h))


# -- rollouts (lab.sim.rollouts) -----------------------------------------------------------------


@dataclass
class RolloutHost:
    """One host as a rollout's invariants see it: the simulated host's own facts, not the
    record's (the record is what is being checked)."""

    before: str | None  # what `current` was when the rollout started
    current: str | None  # what it is at the end
    history: list[Switch] = field(default_factory=list)  # every change of `current`
    touched: bool = False  # an installer command of the rollout (not a status) ran there


@dataclass
class RolloutFacts:
    """What one rollout did, for `rollout_problems` (built from a world by `rollout_facts`, or
    fabricated by a test to prove a broken invariant is caught)."""

    owner: str  # the rollout's owner: every switch it made carries it
    target: str  # its release's name
    spec: str  # the --waves it was planned with
    record: dict  # its record as the last control process left it
    hosts: dict[str, RolloutHost]  # inventory order
    taken_back: bool = False  # the operator took it back (take back, or "abort" at a Ctrl-C)
    bad_releases: dict = field(default_factory=dict)  # .fleet/bad-releases.json


def reverts(facts: RolloutFacts, name: str) -> list[Switch]:
    """The rollout's reverts on host `name`: per host process of the rollout, the last switch
    of one that moved the host off the rollout's release and left it off. A revert whose
    restart failed and that its installer undid (off and on again) is an attempt, not a
    revert; a no-op rollback switches nothing and is not seen at all."""
    by_pid: dict[int | None, list[Switch]] = {}
    for switch in facts.hosts[name].history:
        if switch.owner == facts.owner:
            by_pid.setdefault(switch.pid, []).append(switch)
    return [mine[-1] for mine in by_pid.values()
            if any(s.before == facts.target for s in mine) and mine[-1].after != facts.target]


def rollout_problems(facts: RolloutFacts) -> list[str]:
    """What a finished rollout violated (one line per host and invariant; see lab.sim.rollouts
    for the invariants and why each holds)."""
    rec, target = facts.record, facts.target
    out: list[str] = []
    state = rec.get("state")
    entries: dict[str, dict] = rec.get("hosts", {})
    if state not in rollout.FINAL:
        out.append(f"the rollout ended {state!r} although the faults ended and it was resumed or "
                   "taken back until it could finish")
    # (d) every host in exactly one wave, planned as asked; no wave after the abort started
    names = list(facts.hosts)
    flat = [n for wave in rec.get("waves", []) for n in wave]
    if sorted(flat) != sorted(names) or len(set(flat)) != len(flat):
        out.append(f"the rollout: its waves {rec.get('waves')} are not a partition of the hosts "
                   f"{names}")
    elif rec.get("waves") != waves.plan(names, facts.spec):
        out.append(f"the rollout: its waves {rec.get('waves')} are not the plan of --waves "
                   f"{facts.spec}")
    last = rec.get("next_wave", 0)
    for index, wave in enumerate(rec.get("waves", [])):
        for name in wave:
            host = facts.hosts.get(name)
            if host is None or not host.touched:
                continue
            if state == rollout.ABORTED and index > last:
                out.append(f"{name}: in wave {index + 1}, after the abort in wave {last + 1}, "
                           "yet the rollout changed it")
            elif entries.get(name, {}).get("outcome") == rollout.NOT_STARTED:
                out.append(f"{name}: the record says its wave never started, yet the rollout "
                           "changed it")
    where = {n: release for release, names in rollout.stands(rec).items() for n in names}
    for name, host in facts.hosts.items():
        entry = entries.get(name, {})
        # (a) an aborted rollout leaves no host on its release that did not run it before
        if (state == rollout.ABORTED and host.before is not None and host.before != target
                and host.current == target):
            out.append(f"{name}: left on {target}, which the rollout took back (it ran "
                       f"{host.before} before; record: {entry.get('outcome')})")
        # (b) reverted at most once, and to what it ran before
        back = reverts(facts, name)
        if len(back) > 1:
            out.append(f"{name}: reverted {len(back)} times by one rollout (at "
                       + ", ".join(f"{s.at:.1f}s by pid {s.pid} ({s.action})" for s in back)
                       + ")")
        for switch in back:
            if host.before not in (target, switch.after):
                out.append(f"{name}: reverted to {switch.after}, but it ran {host.before} "
                           "before the rollout")
        # (c) completed: every host the record calls done runs the release
        if (state == rollout.COMPLETED and host.current != target
                and entry.get("outcome") in (rollout.DEPLOYED, rollout.UNCHANGED)):
            out.append(f"{name}: rollout completed ({entry.get('outcome')}), but the host "
                           f"runs {host.current}, not {target}")
        if state == rollout.COMPLETED and entry.get("outcome") not in (
                rollout.DEPLOYED, rollout.UNCHANGED, rollout.FAILED, rollout.BAKE_FAILED):
            out.append(f"{name}: rollout completed with this host {entry.get('outcome')}")
        # (e) `stands` says where every host stands ("unknown" claims nothing, except for a
        # host the record calls deployed, unchanged or reverted)
        said = where.get(name, "unknown")
        if (said != host.current if said != "unknown" else
                host.current is not None and entry.get("outcome") in rollout.FINAL_OK):
            out.append(f"{name}: the record says it runs {said} ({entry.get('outcome')}), the "
                       f"host runs {host.current}")
    # (f) failures: only hosts the rollout tried; an abort only past the budget or when asked
    counted = [n for n, e in entries.items() if e.get("counted")]
    tried = [n for n, e in entries.items()
             if e.get("outcome") not in (rollout.PENDING, rollout.NOT_STARTED)]
    if len(counted) > len(tried) or not set(counted) <= set(tried):
        out.append(f"the rollout: {len(counted)} failure(s) counted ({', '.join(counted)}), but it "
                   f"tried only {len(tried)} host(s) ({', '.join(tried)})")
    spent = waves.spent(len(counted), rec.get("budget", {}).get("tolerated"))
    if state == rollout.ABORTED and not spent and not facts.taken_back:
        out.append(f"the rollout aborted with {len(counted)} failure(s), within its budget of "
                   f"{rec.get('budget', {}).get('tolerated')}, and nobody took it back "
                   f"(reason: {rec.get('reason')})")
    if state == rollout.COMPLETED and spent:
        out.append(f"the rollout completed with {len(counted)} failure(s), more than its budget of "
                   f"{rec.get('budget', {}).get('tolerated')}")
    if state == rollout.COMPLETED and all(not e.get("counted") for e in entries.values()):
        off = [n for n, h in facts.hosts.items() if h.current != target]
        if off:
            out.append(f"the rollout completed with no failure, but {', '.join(off)} "
                       f"do(es) not run {target}")
    recorded = target in facts.bad_releases
    if state == rollout.ABORTED and not recorded:
        out.append(f"the rollout aborted, but {target} is not recorded as a bad release")
    if state == rollout.COMPLETED and recorded:
        out.append(f"the rollout completed, yet {target} is recorded as a bad release")
    return out
