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
"""

from __future__ import annotations

from typing import Any

from fleet.continuity.statelayout import StateLayout
from fleet.installer import audit, machine, releasedirs, transaction
from lab.sim.host import PLUGINS, SimHost, SimManager, lexists, read_json_lines

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
