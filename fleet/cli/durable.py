"""The Temporal engine's command line: `deploy --waves ... --engine temporal`, `invoke worker`,
`invoke rollout.pause|resume|abort`, and the rollouts in flight that `invoke status` shows.

The rollout itself runs on the workers (fleet.deploy.rolloutflow); this process starts it and
follows its record, printing on stderr what the in-process view prints (the plan, each wave,
each host's outcome, the bake, the abort) and the same table or `--json` document at the end.
Killing it, or Ctrl-C, leaves the rollout going. The SDK is imported only when the engine is
asked for, so a deploy-only install needs none of it.
"""

from __future__ import annotations

import calendar
import sys
import time
from dataclasses import asdict

from invoke import Collection, Exit

from fleet.cli import rolloutrun
from fleet.cli.deploy import INV_HELP, JSON_HELP
from fleet.cli.flags import USAGE_ERROR, number, task
from fleet.cli.taskrun import Run
from fleet.deploy import api, rollout, temporalserver, waves
from fleet.deploy.inventory import SITE_NAME, Host, InventoryError, default_inventory, load
from fleet.terminal.text import visible

ENGINES = ("inprocess", "temporal")
FOLLOW_LIMIT_S = 3600.0  # past the rollout's own waits, before this process stops following


def _err(text: str) -> None:
    print(visible(text, multiline=True), file=sys.stderr, flush=True)


def _engine():
    """fleet.deploy.temporalengine, or a usage error naming the extra to install."""
    try:
        from fleet.deploy import temporalengine  # noqa: PLC0415
    except ImportError as exc:
        raise Exit(f"error: the Temporal engine needs the optional extra `temporal`: "
                   f"{temporalserver.INSTALL_HINT} ({exc})", USAGE_ERROR) from None
    return temporalengine


def _server(inventory_path) -> temporalserver.Server:
    try:
        return temporalserver.ensure(inventory_path)
    except temporalserver.ServerError as exc:
        raise Exit(f"error: {exc}", USAGE_ERROR) from None


def _engine_error(engine, exc: Exception) -> Exit:
    return Exit(f"error: {exc}", USAGE_ERROR if isinstance(exc, engine.EngineError) else 1)


def engine_of(value: str) -> str:
    """The `--engine` value, checked."""
    if value not in ENGINES:
        raise Exit(f"error: --engine {value!r}: use one of {', '.join(ENGINES)}", USAGE_ERROR)
    return value


def _worker_command(site: str, inventory_path) -> str:
    return f"fleet worker --queue {site} --inventory {inventory_path}"


def deploy(run: Run, inventory_path, selected: list[Host], artifact: api.ArtifactRef,
           options: rollout.Options, as_json: bool, rollout_id: str) -> None:
    """Start the rollout as a workflow (`rollout_id`: the id its `pre-deploy` hook saw), then
    follow it to its end (see the module doc)."""
    engine = _engine()
    server = _server(inventory_path)
    try:
        missing = engine.unserved(server, [h.site for h in selected])
        if missing:
            raise Exit("error: no worker serves " + ", ".join(
                f"site {s!r} (start one: `{_worker_command(s, inventory_path)}`)"
                if s != "workflows" else "rollout workflows (any `fleet worker` does)"
                for s in missing) + f" on {server.address}; nothing was changed", USAGE_ERROR)
        doc = {"id": rollout_id, "owner": api.default_owner(),
               "inventory": str(inventory_path), "artifact": rollout.artifact_record(artifact),
               "options": asdict(options), "hosts": [[h.name, h.site] for h in selected]}
        engine.start(server, doc)
    except engine.EngineError as exc:
        raise _engine_error(engine, exc) from None
    _err(f"rollout {doc['id']} runs on Temporal at {server.address}"
         + (f" (Web UI: {server.ui}/namespaces/{server.namespace}/workflows/{doc['id']})"
            if server.ui else "") + "; it goes on if this process stops")
    bakes = len(waves.plan([h.name for h in selected], options.waves)) * options.bake_s
    _follow(run, engine, server, doc["id"], as_json, FOLLOW_LIMIT_S + bakes)


def _follow(run: Run, engine, server, rollout_id: str, as_json: bool,
            limit: float = FOLLOW_LIMIT_S) -> None:
    view = Follower()
    try:
        record, ended = engine.follow(server, rollout_id, view.seen, limit)
    except KeyboardInterrupt:
        raise Exit(f"stopped following rollout {rollout_id}; it goes on (`fleet status` shows "
                   f"it; `fleet rollout.pause {rollout_id}` or `fleet rollout.abort "
                   f"{rollout_id}` steers it)", rolloutrun.INTERRUPTED) from None
    except engine.EngineError as exc:
        raise _engine_error(engine, exc) from None
    if not ended:
        raise Exit(f"rollout {rollout_id} still runs after {limit:g}s of following; "
                   "it goes on (`fleet status` shows it)", 1)
    rolloutrun.finish(run, record, as_json, where=f"temporal workflow {rollout_id} on "
                                                  f"{server.address}")


class Follower:
    """What changed in the record since the last poll, printed as the in-process view does."""

    def __init__(self) -> None:
        self.events = 0
        self.outcomes: dict[str, str] = {}
        self.planned = False
        self.last_bake = -1.0

    def seen(self, record: dict) -> None:
        if not record.get("waves"):
            return
        if not self.planned:
            self.planned = True
            rolloutrun.show_plan(record)
        for event in record.get("events", [])[self.events:]:
            what = event["what"]
            if what.startswith("aborting: "):
                touched = [n for n, h in record["hosts"].items()
                           if h["outcome"] in rollout.TOUCHED]
                _err(f"ABORTING: {what[len('aborting: '):]}; taking back {len(touched)} "
                     "host(s)")
            else:
                _err(what)
        self.events = len(record.get("events", []))
        for name, entry in record["hosts"].items():
            outcome = entry["outcome"]
            if self.outcomes.get(name, rollout.PENDING) != outcome and \
                    outcome not in (rollout.PENDING, rollout.DEPLOYING):
                _err(f"  {name}: {outcome} {entry.get('note', '')}".rstrip())
            self.outcomes[name] = outcome
        baking = record.get("baking")
        if baking and baking.get("until"):
            until = calendar.timegm(time.strptime(baking["until"], "%Y-%m-%dT%H:%M:%SZ"))
            remaining = max(0.0, until - time.time())
            if remaining // 10 != self.last_bake:
                self.last_bake = remaining // 10
                left = waves.left(sum(1 for h in record["hosts"].values()
                                              if h.get("counted")),
                                          record["budget"]["tolerated"])
                watched = sum(1 for h in record["hosts"].values()
                              if h["outcome"] == rollout.DEPLOYED)
                _err(f"baking: {remaining:.0f}s left, watching {watched} host(s), failures "
                     f"still tolerated: {'unlimited' if left is None else left}")


def status_lines(inventory_path) -> tuple[list[str], list[dict]]:
    """The Temporal rollouts of this inventory still in flight, when a server is configured or
    its dev server runs (for `invoke status`; never starts one)."""
    server = temporalserver.find(inventory_path)
    if server is None:
        return [], []
    try:
        from fleet.deploy import temporalengine  # noqa: PLC0415
    except ImportError:
        return [], []
    try:
        records = temporalengine.in_flight(server, inventory_path)
    except temporalengine.EngineError as exc:
        return [f"warning: Temporal rollouts not shown: {exc}"], []
    lines, docs = [], []
    for record in records:
        if not record.get("waves"):  # its workflow runs, but no worker answered for it
            docs.append({"id": record["id"], "state": record["state"], "engine": "temporal",
                         "note": record["note"]})
            lines.append(f"rollout {record['id']} {record['state']} (temporal, "
                         f"{server.address}): {record['note']}; a `fleet worker` answers for it")
            continue
        started = sum(1 for w in rollout.document(record)["rollout"]["waves"] if w["started"])
        docs.append({"id": record["id"], "state": record["state"], "engine": "temporal",
                     "release": record["artifact"]["release"], "waves_started": started,
                     "waves": len(record["waves"]), "created": record.get("created")})
        pause = f"fleet rollout.pause {record['id']}"
        resume, abort = rollout.next_steps(record)
        lines.append(f"rollout {record['id']} {record['state']} (temporal, {server.address}): "
                     f"{record['artifact']['release']}, wave {started}/{len(record['waves'])} "
                     f"started; pause: {pause}; resume: {resume}; take back: {abort}")
    return lines, docs


def _inventory_path(inventory: str):
    return (load(inventory) if inventory else default_inventory()).path


@task(help={"queue": "the site whose hosts this worker reaches (inventory var `site`; "
                     "default: default)",
            "inventory": INV_HELP,
            "parallel": "hosts this worker deploys at once (default 32)"})
def worker(c, queue="default", inventory="", parallel="32"):
    """Serve Temporal rollouts for one site's hosts until stopped (Ctrl-C or SIGTERM).

    Run one (or more, for spares) inside each network whose hosts only it can reach; every
    worker also runs the rollouts' workflows. The Temporal server is TEMPORAL_ADDRESS, else the
    inventory's dev server (started here when it is not running)."""
    inv = load(inventory) if inventory else default_inventory()
    if not SITE_NAME.fullmatch(queue):
        raise Exit(f"error: --queue {queue!r}: not a site name (letters, digits, '.', '_', '-')",
                   USAGE_ERROR)
    jobs = number(parallel, "--parallel", maximum=256)
    engine = _engine()
    server = _server(inv.path)

    def resolve(names: list[str]) -> list[Host]:
        missing = [n for n in names if n not in inv.hosts]
        if missing:
            raise InventoryError(f"host(s) {', '.join(missing)} not in this worker's inventory; "
                                 "give every site's workers the rollout's inventory")
        elsewhere = [n for n in names if inv.hosts[n].site != queue]
        if elsewhere:
            raise InventoryError(f"host(s) {', '.join(elsewhere)} are not in site {queue} in "
                                 "this worker's inventory (var `site`)")
        return [inv.hosts[n] for n in names]

    def ready() -> None:
        _err(f"worker ready: site {queue}, server {server.address}"
             + (f", Web UI {server.ui}" if server.ui else "") + "; Ctrl-C stops it")
    try:
        engine.serve(server, queue, inv.path, resolve, ready, jobs)
    except KeyboardInterrupt:
        _err("worker stopped; its hosts' work goes to the site's other workers")
    except engine.EngineError as exc:
        raise _engine_error(engine, exc) from None


def _steer(c, rollout_id: str, inventory: str, json_: bool, name: str, *args: str) -> None:
    run = Run(f"rollout.{name}", json_)
    with run.guard():
        inv_path = _inventory_path(inventory)
        engine = _engine()
        server = _server(inv_path)
        try:
            sent = engine.signal(server, rollout_id, name, *args)
        except engine.EngineError as exc:
            raise _engine_error(engine, exc) from None
        if not sent:  # an ended rollout takes no signal: its outcome is shown instead
            if name == "pause":
                raise Exit(f"error: rollout {rollout_id} has ended; nothing to pause",
                           USAGE_ERROR)
            _err(f"rollout {rollout_id} has ended; nothing sent, its outcome follows")
        if name == "pause":
            _err(f"rollout {rollout_id}: pause sent; it pauses before its next wave (`fleet "
                 f"rollout.resume {rollout_id}` goes on)")
            if json_:
                run.document(True, {"rollout": {"id": rollout_id, "signal": name}})
            return
        _follow(run, engine, server, rollout_id, json_)


ID_HELP = {"rollout_id": "the rollout's id (`fleet status` lists them)", "inventory": INV_HELP,
           "json": JSON_HELP}


@task(help=ID_HELP)
def pause(c, rollout_id, inventory="", json_=False):
    """Pause a Temporal rollout before its next wave; its hosts in flight finish first."""
    _steer(c, rollout_id, inventory, json_, "pause")


@task(help=ID_HELP)
def resume(c, rollout_id, inventory="", json_=False):
    """Resume a paused Temporal rollout and follow it to its end."""
    _steer(c, rollout_id, inventory, json_, "resume")


@task(help=ID_HELP)
def abort(c, rollout_id, inventory="", json_=False):
    """Abort a Temporal rollout: every host it changed goes back, then follow it to its end."""
    _steer(c, rollout_id, inventory, json_, "abort",
           f"aborted by {api.default_owner()} (fleet rollout.abort)")


TASKS = [worker]
ns = Collection(pause, resume, abort)
