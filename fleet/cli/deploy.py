"""Deploy tasks: `deploy`, `status`, `rollback`, `restart` (thin: parse flags, call fleet.deploy).

Every task takes `-H/--hosts` (hosts, groups or `all`, which never includes the sandbox; default
`sandbox`) and `--inventory` (default `$FLEET_INVENTORY`, else ./inventory.yaml; none -> refuse).
It prints the resolved hosts before it changes anything, live per-host lines on stderr, a table
(or one `--json` document, errors included) on stdout, and exits 0 when every host succeeded, 1
when some did not, 2 when it changed nothing because of a usage error or a refusal.
A host outside the sandbox needs a yes on first use (`--yes`, or the prompt on a terminal), and a
build from uncommitted sources goes there only with `--allow-dirty`. An OpenClaw host whose
OpenClaw the release was not proven on is refused unless `--allow-unproven-openclaw`.
A deploy or rollback that is about to change hosts runs its hooks of `.fleet/hooks/` beside the
inventory (fleet.deploy.runhooks, as Kamal's): a failing `pre-*` hook is a refusal.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path

from invoke import Exit

from fleet.cli import extension, rolloutrun
from fleet.cli.flags import USAGE_ERROR, number, task
from fleet.cli.taskrun import Run
from fleet.deploy import api, consent, deploylog, report, rollout, runhooks, waves
from fleet.deploy.inventory import Host, default_inventory, load
from fleet.deploy.runner import MAX_PARALLEL, RunOptions
from fleet.terminal.text import visible

HOSTS_HELP = ("hosts or groups, comma-separated, or a pattern as Ansible's --limit "
              "('web:!web3', 'web:&staging', 'web*'); 'all' = every host outside the sandbox "
              "(default: sandbox)")
INV_HELP = "inventory file (default: $FLEET_INVENTORY, else ./inventory.yaml)"
JSON_HELP = "one JSON document on stdout, errors included (docs/operations.md); same exit codes"
YES_HELP = "confirm hosts outside the sandbox that this inventory never changed before"
BUDGET_HELP = ("failures tolerated (N or N%); the budget is spent when failures EXCEED it (10% of "
               "20 hosts tolerates 2, stops at the 3rd). With --waves: counted over the whole "
               "rollout, and a spent budget takes every changed host back. With --batch: hosts "
               "not yet started are skipped (default 0 with --batch, else unlimited)")
SKIP_HOOKS_HELP = "run none of the hooks in .fleet/hooks/ beside the inventory (as Kamal's)"
HOOK_TIMEOUT_HELP = ("how long each hook may run, e.g. 90s or 5m (default "
                     f"{runhooks.DEFAULT_TIMEOUT}, at most 1h); then its process group is killed")


def select_hosts(c, hosts: str | None, inventory: str, prepare: bool = False):
    """(inventory, selected hosts); a bad file or name raises InventoryError (exit 2).

    Hosts the task tree sets up itself (the checkout's sandbox OpenClaw hosts) get what the
    inventory cannot know here (with `prepare`, also what they need on this machine), so the
    rest of fleet sees ordinary hosts (fleet/cli/extension.py).
    """
    inv = load(inventory) if inventory else default_inventory()
    try:
        chosen = inv.select_default() if hosts is None else inv.select(hosts)
        selected = extension.setup_hosts(c, chosen, prepare)
    except extension.SetupError as exc:
        raise Exit(f"error: {exc}", code=USAGE_ERROR) from None
    return inv, selected


@contextlib.contextmanager
def prepared_hosts(c, hosts: str | None, inventory: str, prepare: bool = True):
    """`select_hosts` for a task that changes hosts; what the task tree set up for them is
    handed back when the task ends, however it ends (fleet/cli/extension.py)."""
    inv, selected = select_hosts(c, hosts, inventory, prepare)
    try:
        yield inv, selected
    finally:
        if prepare:
            extension.finish_hosts(c, selected)


def _show_targets(action: str, hosts: list[Host]) -> dict[str, str]:
    """Before anything changes: exactly which hosts, and where each one points (returned, for
    `_confirm` to record what was shown)."""
    where = consent.destinations(hosts)
    sandbox = sum(1 for h in hosts if h.sandbox)
    print(f"{visible(action)} -> {len(hosts)} host(s)"  # an --artifact file names the version
          f"{f' ({sandbox} in the sandbox)' if sandbox else ''}:", file=sys.stderr)
    for host in hosts:  # the inventory's and ssh_config's words: escaped
        print(f"  {visible(where[host.name])}{'' if host.sandbox else '  [outside the sandbox]'}",
              file=sys.stderr)
    return where


def _confirm(inv, hosts: list[Host], where: dict[str, str], yes: bool, as_json: bool) -> None:
    """First use of hosts outside the sandbox: `--yes`, or a y on a terminal; else refuse."""
    new = consent.unconfirmed(inv.path, hosts, where)
    if not new:
        return
    names = ", ".join(h.name for h in new)
    if not yes:
        interactive = not as_json and sys.stdin.isatty() and sys.stderr.isatty()
        answer = ""
        if interactive:
            print(f"First change of host(s) outside the sandbox: {visible(names)}. Continue? "
                  "[y/N] ", end="", file=sys.stderr, flush=True)
            answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            raise Exit(f"error: refusing: {names} {'is' if len(new) == 1 else 'are'} outside "
                       f"the sandbox and not yet confirmed for {inv.path}; check the host "
                       "list above, then pass --yes (asked once per host)", USAGE_ERROR)
    consent.confirm(inv.path, new, where)


def _hook_timeout(skip_hooks: bool, hook_timeout: str) -> float | None:
    """`--hook-timeout` in seconds, checked before anything connects; None with --skip-hooks."""
    timeout = runhooks.timeout_of(hook_timeout)
    return None if skip_hooks else timeout


def _pre_hook(run: Run, inv, hosts: list[Host], timeout: float | None, release: dict,
              extra: dict, rollout_id: str = "") -> None:
    """Right before the run changes a host: its `pre-*` hook, given the plan (a failure is a
    refusal, exit 2); the `post-*` ones then run when it ends (Run.after)."""
    names = [h.name for h in hosts]
    if timeout is None:
        _no_hooks(inv, "--skip-hooks")
        return
    run.hooks = runhooks.RunHooks(inv.path, run.action, names, release, timeout, rollout_id)
    run.hooks.before(runhooks.plan_document(run.action, names, run.elapsed, extra))


def _no_hooks(inv, why: str) -> None:
    found = runhooks.present(inv.path)
    if found:
        print(f"note: {why}: the hooks in {visible(runhooks.hooks_dir(inv.path))} are not run "
              f"({', '.join(found)})", file=sys.stderr)


def _record(inv, action: str, results, artifact: dict | None = None,
            command: str | None = None) -> None:
    """Best effort: a read-only checkout must not turn a good deploy into a failure."""
    try:
        deploylog.record(inv.path, action, api.default_owner(), results, artifact, command)
    except OSError as exc:
        print(f"warning: could not append to the deploy log: {visible(exc)}", file=sys.stderr)


PARALLEL_HELP = f"hosts at once (default 10, at most {MAX_PARALLEL})"
PARALLEL_WHY = ("hosts worked on at once, each with a thread and an SSH session on this "
                "machine; docs/operations.md, Limits")


def _options(parallel: str, batch: str = "", max_fail: str = "") -> RunOptions:
    return RunOptions(parallel=number(parallel, "--parallel", maximum=MAX_PARALLEL,
                                      why=PARALLEL_WHY),
                      batch=batch or None, max_fail=max_fail or None)


def _artifact(path: str, stack: contextlib.ExitStack, dry_run: bool,
              release: str = "", tag: str = "") -> api.ArtifactRef:
    """`--artifact`, `--release` or `--tag` (fleet.release.namedrelease), or the current build
    (built now if needed). A dry run writes nothing: it uses an existing build, or builds into a
    temporary directory it removes."""
    named = [flag for flag, value in (("--artifact", path), ("--release", release),
                                      ("--tag", tag)) if value]
    if len(named) > 1:
        raise Exit(f"error: {' and '.join(named)} name one artifact each; use one", USAGE_ERROR)
    if path:
        try:
            return api.load_artifact(path)
        except ValueError as exc:
            raise Exit(f"error: --artifact {exc}", USAGE_ERROR) from None
    from fleet.release.artifact import current_artifact, default_source  # noqa: PLC0415
    from fleet.release.error import ReleaseError  # noqa: PLC0415

    root, out_dir = default_source()
    if tag:
        return _named(root, out_dir, _tag_ref(root, tag), stack, dry_run, f"--tag {tag}")
    if release:
        return _named(root, out_dir, release, stack, dry_run)
    try:
        if dry_run:
            existing = current_artifact(root, out_dir)
            if existing is not None:
                return api.ArtifactRef(Path(existing.path), existing.sha256,
                                       str(existing.version), dict(existing.components), True)
            out_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fleet-plan-")))
        return api.build_artifact(root, out_dir)
    except (ReleaseError, OSError, ValueError) as exc:  # e.g. version files disagree
        raise Exit(f"error: cannot build the artifact from {root}: {exc}", USAGE_ERROR) from None


def _tag_ref(root: Path, tag: str) -> str:
    """`--tag vX` as the ref `refs/tags/vX`, which names that tag and nothing else (no kept
    build, branch or commit); a usage error listing the newest tags when there is none."""
    from fleet.release.git import Git, GitError  # noqa: PLC0415

    tag = tag.strip()
    git = Git(root)
    ref = f"refs/tags/{tag}"
    try:
        found = bool(tag) and not tag.startswith("-") and bool(git.run(
            "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False))
        tags = [] if found else git.run("tag", "--list", "--sort=-v:refname").splitlines()[:8]
    except (GitError, OSError) as exc:
        raise Exit(f"error: --tag {tag}: cannot read the tags of {root}: {exc}",
                   USAGE_ERROR) from None
    if not found:
        raise Exit(f"error: --tag {tag!r}: no such tag in {root} (newest tags: "
                   f"{', '.join(tags) or 'none'}); `git tag` lists them", USAGE_ERROR)
    return ref


def _named(root: Path, out_dir: Path, release: str, stack: contextlib.ExitStack,
           dry_run: bool, flag: str = "") -> api.ArtifactRef:
    """`--release NAME`: a kept build, else a build of the release's tag (or git ref); `--tag`:
    a build of that tag (`release` is then `refs/tags/<tag>`)."""
    from fleet.release import namedrelease  # noqa: PLC0415
    from fleet.release.error import ReleaseError  # noqa: PLC0415

    flag = flag or f"--release {release}"
    if dry_run:
        out_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fleet-plan-")))
    try:
        found, where = namedrelease.resolve(root, out_dir, release)
    except (ReleaseError, OSError) as exc:
        raise Exit(f"error: {flag}: {exc}", USAGE_ERROR) from None
    print(f"{visible(flag)}: {visible(where)}", file=sys.stderr)
    if isinstance(found, Path):
        return api.load_artifact(found)
    return api.ArtifactRef(Path(found.path), found.sha256, str(found.version),
                           dict(found.components), False)


def _check_dirty(art: api.ArtifactRef, hosts: list[Host], allow_dirty: bool) -> None:
    from fleet.release.artifact import is_dirty  # noqa: PLC0415

    outside = [h.name for h in hosts if not h.sandbox]
    if is_dirty(art.version) and outside and not allow_dirty:
        raise Exit(f"error: refusing: {art.version} was built from uncommitted sources and "
                   f"{', '.join(outside)} {'is' if len(outside) == 1 else 'are'} outside the "
                   "sandbox; commit the changes (or pass --allow-dirty)", USAGE_ERROR)


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP,
            "parallel": PARALLEL_HELP,
            "batch": "rolling batches of N hosts or N%: a batch starts when the one before "
                     "finished within the failure budget",
            "max_fail": BUDGET_HELP,
            "dry_run": "connect, read status, print each host's plan; change and write nothing",
            "force": "restart even where this release is already active and ready",
            "artifact": "deploy this .pyz instead of building one",
            "release": "deploy a named release instead of the checkout: a version (its kept "
                       "build in dist/, else a build of its release tag), a tag, a branch or "
                       "a commit",
            "tag": "deploy a build of this tag of the checkout (e.g. v5.0.1), built in a clean "
                   "temporary checkout of it; not with --release or --artifact",
            "retry_failed": "only the selected hosts that did not succeed in the last deploy",
            "yes": YES_HELP,
            "allow_dirty": "deploy a build of uncommitted sources outside the sandbox",
            "allow_unproven_openclaw": "deploy to OpenClaw hosts whose OpenClaw this release "
                                       "was not proven on (their results say so); never to one "
                                       "older than it supports",
            "waves": "progressive rollout in waves: sizes as N or N% of the hosts, e.g. "
                     "1,10%,50%,100% (the last takes the rest); each host passes readiness and "
                     "its plugins' self-test; a spent --max-fail takes every changed host back",
            "bake": "with --waves: watch the changed hosts this long between waves (30s, 5m)",
            "max_hook_errors": "with --bake: new hook errors/timeouts a host may show while "
                               "baking (default 0)",
            "resume": "finish the newest unfinished rollout (or --rollout ID), reading each "
                      "host's state first",
            "rollout": "with --resume: the rollout to finish (its id, see `invoke status`)",
            "skip_hooks": SKIP_HOOKS_HELP, "hook_timeout": HOOK_TIMEOUT_HELP,
            "engine": "with --waves: who drives the rollout: inprocess (this process, the "
                      "default) or temporal (a workflow on Temporal workers, `invoke worker`; "
                      "docs/operations.md)",
            "json": JSON_HELP})
def deploy(c, hosts=None, inventory="", parallel="10", batch="", max_fail="", dry_run=False,
           force=False, artifact="", retry_failed=False, yes=False, allow_dirty=False,
           allow_unproven_openclaw=False, waves_="", bake="", max_hook_errors="0", resume=False,
           rollout_="", release="", skip_hooks=False, hook_timeout=runhooks.DEFAULT_TIMEOUT,
           engine="inprocess", tag="", json_=False):
    """Deploy the current build to hosts: verified, atomic, restarted, rolled back on failure."""
    from fleet.cli import durable  # noqa: PLC0415 (it imports this module's flag helps)

    run = Run("deploy", json_)
    with run.guard(), contextlib.ExitStack() as stack:
        if durable.engine_of(engine) == "temporal" and (resume or not waves_):
            raise Exit("error: --engine temporal drives a progressive rollout: give --waves "
                       "(a Temporal rollout is resumed with `fleet rollout.resume ID`)",
                       USAGE_ERROR)
        hook_s = _hook_timeout(skip_hooks, hook_timeout)
        if resume:
            return _resume(c, run, inventory, rollout_, yes, json_, stack, hook_s)
        if bake and not waves_:
            raise Exit("error: --bake needs --waves (it is the watch between waves)", USAGE_ERROR)
        if waves_ and (batch or retry_failed):
            raise Exit("error: --waves replaces --batch and --retry-failed; use one",
                       USAGE_ERROR)
        options = _options(parallel, batch, max_fail)
        inv, selected = stack.enter_context(prepared_hosts(c, hosts, inventory, not dry_run))
        if retry_failed:
            failed = deploylog.last_failed(inv.path)
            if failed is None:
                raise Exit(f"error: no earlier deploy in {deploylog.log_path(inv.path)} to retry",
                           USAGE_ERROR)
            selected = [h for h in selected if h.name in failed]
            if not selected:
                if json_:
                    report.print_json(report.json_document("deploy", [], True, run.elapsed))
                else:
                    print("nothing to retry: the last deploy succeeded on every selected host")
                return
        art = _artifact(artifact, stack, dry_run, release, tag)
        title = f"{'plan' if dry_run else 'deploy'} {art.version} ({art.sha256[:12]})"
        where = _show_targets(title, selected)
        plan = _wave_plan(selected, waves_, max_fail, bake, max_hook_errors, options, force,
                          allow_unproven_openclaw)
        if plan is not None and dry_run:
            rolloutrun.show_plan_of([h.name for h in selected], plan)
        art_doc = {"path": None if dry_run and not art.reused else str(art.path),
                   "sha256": art.sha256, "version": art.version,
                   "components": art.components, "reused": art.reused}
        if dry_run:
            _no_hooks(inv, "a dry run changes nothing")
        else:
            rolloutrun.refuse_bad_release(inv.path, art, force)
            _check_dirty(art, selected, allow_dirty)
            _confirm(inv, selected, where, yes, json_)
            rollout_id = rollout.new_id() if plan is not None else ""
            _pre_hook(run, inv, selected, hook_s, runhooks.release_of(art),
                      _plan_extra(art_doc, selected, plan, rollout_id), rollout_id)
            if plan is not None and engine == "temporal":
                return durable.deploy(run, inv.path, selected, art, plan, json_, rollout_id)
            if plan is not None:
                view = rolloutrun.View(yes, json_)
                record = rolloutrun.drive(lambda: rollout.Rollout.start(
                    inv.path, selected, art, plan, view, rollout_id=rollout_id).run(), view)
                return rolloutrun.finish(run, record, json_)
        with report.LiveReport([h.name for h in selected], title, quiet=False) as live:
            results = api.deploy(selected, art, live.update, options, force, dry_run,
                                 allow_unproven_openclaw=allow_unproven_openclaw)
        if not dry_run:
            _record(inv, "deploy", results, art_doc)
        extra = {"artifact": art_doc, "dry_run": dry_run}
        if plan is not None:  # a dry run of a rollout: its waves too
            extra["waves"] = waves.plan([h.name for h in selected], plan.waves)
        run.finish(title, results, extra)


def _plan_extra(art_doc: dict, selected: list[Host], plan: rollout.Options | None,
                rollout_id: str) -> dict:
    """What a deploy's `pre-deploy` hook reads beside the hosts: the artifact, and for a rollout
    its waves and id."""
    extra = {"artifact": art_doc, "dry_run": False}
    if plan is not None:
        extra.update(waves=waves.plan([h.name for h in selected], plan.waves),
                     rollout={"id": rollout_id})
    return extra


def _wave_plan(selected: list[Host], waves_: str, max_fail: str, bake: str,
               max_hook_errors: str, options: RunOptions, force: bool,
               allow_unproven: bool) -> rollout.Options | None:
    """The rollout's options when `--waves` is given (checked before anything connects)."""
    if not waves_:
        return None
    try:
        waves.plan([h.name for h in selected], waves_)
        waves.budget(max_fail or None, len(selected))
        bake_s = waves.duration(bake) if bake else 0.0
    except waves.WaveError as exc:
        raise Exit(f"error: {exc}", USAGE_ERROR) from None
    return rollout.Options(waves=waves_, bake_s=bake_s, max_fail=max_fail or None,
                           parallel=options.parallel, force=force,
                           allow_unproven_openclaw=allow_unproven,
                           max_hook_errors=number(max_hook_errors, "--max-hook-errors",
                                                  minimum=0))


def _recorded(c, run: Run, inventory: str, rollout_id: str, yes: bool,
              stack: contextlib.ExitStack, what: str, resume: bool, hook_s: float | None):
    """A recorded rollout to resume or take back: its own hosts (shown and confirmed as for
    any run, then its `pre-*` hook), its artifact when it goes on deploying, and the view of its
    progress. One already taken back is handed back as it is, with nothing to drive."""
    inv_path = (load(inventory) if inventory else default_inventory()).path
    record = rolloutrun.pick(inv_path, rollout_id)
    if not resume and record["state"] == rollout.ABORTED:
        return record, None, None
    inv, selected = stack.enter_context(prepared_hosts(c, rolloutrun.hosts_of(record),
                                                       inventory))
    going_on = resume and record["state"] != rollout.ABORTING
    art = rolloutrun.artifact_of(record) if going_on else None
    where = _show_targets(f"{what} rollout {record['id']}", selected)
    _confirm(inv, selected, where, yes, run.as_json)
    _pre_hook(run, inv, selected, hook_s, record["artifact"], rollout.document(record),
              record["id"])
    view = rolloutrun.View(yes, run.as_json)
    try:
        return record, rollout.Rollout(inv.path, record, selected, art, view), view
    except rollout.RolloutError as exc:
        raise Exit(f"error: {exc}", USAGE_ERROR) from None


def _resume(c, run: Run, inventory: str, rollout_id: str, yes: bool, json_: bool,
            stack: contextlib.ExitStack, hook_s: float | None) -> None:
    """`deploy --resume`: the rollout's own hosts and artifact, each host read first."""
    record, driven, view = _recorded(c, run, inventory, rollout_id, yes, stack, "resume",
                                     True, hook_s)
    started_as = record["state"]
    rolloutrun.show_plan(record)
    rolloutrun.finish(run, rolloutrun.drive(driven.run, view), json_, started_as)


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP, "parallel": PARALLEL_HELP,
            "json": JSON_HELP})
def status(c, hosts=None, inventory="", parallel="10", json_=False):
    """What runs where: release, versions, gateway pid and uptime, free disk, lock, last change."""
    from fleet.cli import durable  # noqa: PLC0415 (it imports this module's flag helps)

    run = Run("status", json_)
    with run.guard():
        options = _options(parallel)
        inv, selected = select_hosts(c, hosts, inventory)
        with report.LiveReport([h.name for h in selected], "status", quiet=True) as live:
            results = api.status(selected, live.update, options)
        healthy = all(r.ok and r.status is not None and r.status.ready for r in results)
        lines, extra = rolloutrun.status_lines(inv.path, results)
        durable_lines, in_flight = durable.status_lines(inv.path)
        lines = durable_lines + lines
        extra["rollouts_in_progress"] += in_flight
        if json_:
            report.print_json(report.json_document("status", results, healthy, run.elapsed,
                                                   extra))
        else:
            console = report.stdout_console()
            console.print(report.status_table(results, console.width))
            console.print(report.status_summary(results, run.elapsed), highlight=False)
            for line in lines:
                console.print(visible(line), highlight=False, markup=False)
        if not healthy:
            raise Exit(code=1)


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP, "parallel": PARALLEL_HELP,
            "to": "release to go back to: version, release dir or SHA-256 prefix (4+ hex "
                  "digits); one that names several is refused, listing them (default previous)",
            "rollout": "take back this rollout: every host it changed goes back to the release "
                       "it ran before (its hosts, not -H); remembers its release as bad",
            "yes": YES_HELP, "skip_hooks": SKIP_HOOKS_HELP, "hook_timeout": HOOK_TIMEOUT_HELP,
            "json": JSON_HELP})
def rollback(c, hosts=None, inventory="", parallel="10", to="", rollout_="", yes=False,
             skip_hooks=False, hook_timeout=runhooks.DEFAULT_TIMEOUT, json_=False):
    """Switch hosts back to the previous (or a named) release, restart, verify it answers."""
    run = Run("rollback", json_)
    with run.guard(), contextlib.ExitStack() as stack:
        hook_s = _hook_timeout(skip_hooks, hook_timeout)
        if rollout_:
            return _take_back(c, run, inventory, rollout_, yes, json_, stack, hook_s)
        inv, selected = stack.enter_context(prepared_hosts(c, hosts, inventory))
        options = _options(parallel)
        where = _show_targets("rollback", selected)
        _confirm(inv, selected, where, yes, json_)
        _pre_hook(run, inv, selected, hook_s, {"release": to} if to else {}, {"to": to or None})
        with report.LiveReport([h.name for h in selected], "rollback") as live:
            results = api.rollback(selected, live.update, options, to or None)
        _record(inv, "rollback", results)
        run.finish("rollback", results)


def _take_back(c, run: Run, inventory: str, rollout_id: str, yes: bool, json_: bool,
               stack: contextlib.ExitStack, hook_s: float | None) -> None:
    """`rollback --rollout`: every host the rollout touched back to its release before."""
    record, driven, view = _recorded(c, run, inventory, rollout_id, yes, stack, "take back",
                                     False, hook_s)
    if driven is None:  # taken back already: nothing to do, no hook to run
        return rolloutrun.finish(run, record, json_)
    started_as = record["state"]
    done = rolloutrun.drive(lambda: driven.take_back(
        f"taken back by {api.default_owner()} (invoke rollback --rollout)"), view)
    rolloutrun.finish(run, done, json_, started_as)


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP, "parallel": PARALLEL_HELP,
            "batch": "rolling restart in batches of N or N%", "max_fail": BUDGET_HELP,
            "yes": YES_HELP, "json": JSON_HELP})
def restart(c, hosts=None, inventory="", parallel="10", batch="", max_fail="", yes=False,
            json_=False):
    """Restart gateways through their managers (never pkill -f) and wait until they are ready."""
    _gateway_task(c, "restart", hosts, inventory, parallel, batch, max_fail, yes, json_)


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP, "parallel": PARALLEL_HELP,
            "yes": YES_HELP, "json": JSON_HELP})
def stop(c, hosts=None, inventory="", parallel="10", yes=False, json_=False):
    """Stop gateways through their managers and leave them stopped, as Kamal's app stop.

    `start`, `restart` or a deploy starts them again."""
    _gateway_task(c, "stop", hosts, inventory, parallel, "", "", yes, json_)


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP, "parallel": PARALLEL_HELP,
            "yes": YES_HELP, "json": JSON_HELP})
def start(c, hosts=None, inventory="", parallel="10", yes=False, json_=False):
    """Start stopped gateways and wait until they are ready, as Kamal's app start.

    They start on their active release; a gateway already ready is left alone."""
    _gateway_task(c, "start", hosts, inventory, parallel, "", "", yes, json_)


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP, "parallel": PARALLEL_HELP,
            "yes": "remove without asking (asked every time otherwise)", "json": JSON_HELP})
def remove(c, hosts=None, inventory="", parallel="10", yes=False, json_=False):
    """Take fleet off hosts: stop the gateway and delete fleet's releases, as Kamal's remove.

    Each host's gateway is stopped, fleet's plugins are taken out of its config (OpenClaw:
    openclaw.json, validated by OpenClaw), and fleet's releases, artifacts, audit log, run
    files and logs are deleted. What the agents wrote (sessions, memory) stays, and so does
    OpenClaw. Asked every time, even on the sandbox; `--yes` answers it."""
    _gateway_task(c, "remove", hosts, inventory, parallel, "", "", yes, json_)


REMOVES = ("stop its gateway, take fleet's plugins out of its config and delete fleet's "
           "releases, artifacts, audit log and logs there (the agents' sessions and memory stay)")


def _confirm_remove(selected: list[Host], yes: bool, as_json: bool) -> None:
    """`remove` is asked every time (as Kamal's), on a terminal; elsewhere `--yes` says it."""
    if yes:
        return
    names = ", ".join(h.name for h in selected)
    answer = ""
    if not as_json and sys.stdin.isatty() and sys.stderr.isatty():
        print(f"Remove fleet from {visible(names)}: {REMOVES}. Continue? [y/N] ", end="",
              file=sys.stderr, flush=True)
        answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise Exit(f"error: refusing to remove fleet from {names} without a yes: it would "
                   f"{REMOVES}; pass --yes to confirm", USAGE_ERROR)


def _gateway_task(c, action: str, hosts, inventory: str, parallel: str, batch: str,
                  max_fail: str, yes: bool, json_: bool) -> None:
    """restart, stop, start or remove: confirmed, leased, recorded, reported alike."""
    run = Run(action, json_)
    with run.guard(), prepared_hosts(c, hosts, inventory) as (inv, selected):
        options = _options(parallel, batch, max_fail)
        where = _show_targets(action, selected)
        if action == "remove":
            _confirm_remove(selected, yes, json_)
            yes = True  # one question is enough: it names the hosts
        _confirm(inv, selected, where, yes, json_)
        with report.LiveReport([h.name for h in selected], action) as live:
            if action == "restart":
                results = api.restart(selected, live.update, options)
            elif action == "remove":
                results = api.remove(selected, live.update, options)
            else:
                results = api.gateway(selected, action, live.update, options)
        _record(inv, action, results)
        run.finish(action, results)


TASKS = [deploy, status, rollback, restart, stop, start, remove]
