"""Deploy tasks: `deploy`, `status`, `rollback`, `restart` (thin: parse flags, call fleet.deploy).

Every task takes `--hosts` (hosts, groups or `all`; default `sandbox`) and `--inventory`
(default ./inventory.yaml, else the embedded sandbox), prints live per-host lines on stderr, a
table (or `--json`) on stdout, and exits non-zero unless every host succeeded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from invoke import Exit, task

import fleet
from fleet.deploy import api, journal, report
from fleet.deploy.inventory import InventoryError, default_inventory, load
from fleet.deploy.runner import RunOptions

HOSTS_HELP = "hosts, groups or 'all', comma-separated (default: sandbox)"
INV_HELP = "inventory file (default: ./inventory.yaml, else the embedded sandbox)"


def _select(hosts: str, inventory: str, prepare: bool = False):
    """(inventory, selected hosts); bad files or names exit 2 with the loader's message.

    Sandbox OpenClaw hosts get their toolchain paths (and, with `prepare`, their dirs, first
    config and scripted model) here, so the rest of fleet sees ordinary openclaw hosts.
    """
    from fleet.openclaw import sandbox  # noqa: PLC0415

    try:
        inv = load(inventory) if inventory else default_inventory()
        selected = sandbox.resolve(inv.select(hosts or "sandbox"))
        if prepare:
            sandbox.prepare(selected)
        return inv, selected
    except InventoryError as exc:
        raise Exit(f"error: {exc}", code=2) from None
    except sandbox.SandboxError as exc:
        raise Exit(f"error: {exc}", code=2) from None


def _record(inv, action: str, results, artifact: dict | None = None) -> None:
    """Best effort: a read-only checkout must not turn a good deploy into a failure."""
    try:
        journal.record(inv.path, action, api.default_owner(), results, artifact)
    except OSError as exc:
        print(f"warning: could not append to the deploy log: {exc}", file=sys.stderr)


def _options(parallel: int, batch: str = "", max_fail: str = "") -> RunOptions:
    return RunOptions(parallel=int(parallel), batch=batch or None, max_fail=max_fail or None)


def _artifact(path: str) -> api.ArtifactRef:
    if path:
        try:
            return api.load_artifact(path)
        except ValueError as exc:
            raise Exit(f"error: --artifact {exc}", 2) from None
    root = Path(fleet.__file__).resolve().parent.parent
    out_dir = root / "dist" if os.access(root, os.W_OK) else Path.cwd() / ".fleet" / "dist"
    from fleet.release.error import ReleaseError

    try:
        return api.build_artifact(root, out_dir)
    except (ReleaseError, OSError, ValueError) as exc:  # e.g. version files disagree
        raise Exit(f"error: cannot build the artifact from {root}: {exc}", 2) from None


def _finish(title: str, results, as_json: bool, extra: dict | None = None) -> None:
    report.print_results(title, results, as_json, extra)
    if not all(r.ok for r in results):
        raise Exit(code=1)


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP,
            "parallel": "hosts at once (default 10)",
            "batch": "rolling batches of N hosts or N% (stop when --max-fail is exceeded)",
            "max_fail": "failures tolerated (N or N%) before hosts not yet started are skipped; "
                        "default: unlimited, or 0 with --batch",
            "dry_run": "connect, read status, print each host's plan; change nothing",
            "force": "restart even where this release is already active and ready",
            "artifact": "deploy this .pyz instead of building one",
            "retry_failed": "only the selected hosts that did not succeed in the last deploy",
            "json": "machine-readable result on stdout"})
def deploy(c, hosts="sandbox", inventory="", parallel=10, batch="", max_fail="", dry_run=False,
           force=False, artifact="", retry_failed=False, json_=False):
    """Deploy the current build to hosts: verified, atomic, restarted, rolled back on failure."""
    inv, selected = _select(hosts, inventory, prepare=not dry_run)
    if retry_failed:
        failed = journal.last_failed(inv.path)
        if failed is None:
            raise Exit(f"error: no earlier deploy in {journal.log_path(inv.path)} to retry", 2)
        selected = [h for h in selected if h.name in failed]
        if not selected:
            print("nothing to retry: the last deploy succeeded on every selected host")
            return
    art = _artifact(artifact)
    title = f"{'plan' if dry_run else 'deploy'} {art.version} ({art.sha256[:12]})"
    with report.LiveReport([h.name for h in selected], title, quiet=False) as live:
        try:
            results = api.deploy(selected, art, live.update,
                                 _options(parallel, batch, max_fail), force, dry_run)
        except ValueError as exc:
            raise Exit(f"error: {exc}", code=2) from None
    art_doc = {"path": str(art.path), "sha256": art.sha256, "version": art.version,
               "components": art.components, "reused": art.reused}
    if not dry_run:
        _record(inv, "deploy", results, art_doc)
    _finish(title, results, json_, {"artifact": art_doc, "dry_run": dry_run})


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP, "parallel": "hosts at once",
            "json": "machine-readable result on stdout"})
def status(c, hosts="sandbox", inventory="", parallel=10, json_=False):
    """What runs where: release, versions, gateway pid and uptime, lock, last change; drift."""
    inv, selected = _select(hosts, inventory)
    with report.LiveReport([h.name for h in selected], "status", quiet=True) as live:
        results = api.status(selected, live.update, _options(parallel))
    if json_:
        report.print_results("status", results, True)
    else:
        report.stdout_console().print(report.status_table(results))
    if not all(r.ok and (r.data or {}).get("ready") for r in results):
        raise Exit(code=1)


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP, "parallel": "hosts at once",
            "to": "release to go back to (version, release dir or SHA prefix; default previous)",
            "json": "machine-readable result on stdout"})
def rollback(c, hosts="sandbox", inventory="", parallel=10, to="", json_=False):
    """Switch hosts back to the previous (or a named) release, restart, verify it answers."""
    inv, selected = _select(hosts, inventory, prepare=True)
    with report.LiveReport([h.name for h in selected], "rollback") as live:
        results = api.rollback(selected, live.update, _options(parallel), to or None)
    _record(inv, "rollback", results)
    _finish("rollback", results, json_)


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP, "parallel": "hosts at once",
            "batch": "rolling restart in batches of N or N%", "max_fail": "failure budget",
            "json": "machine-readable result on stdout"})
def restart(c, hosts="sandbox", inventory="", parallel=10, batch="", max_fail="", json_=False):
    """Restart gateways through their managers (never pkill -f) and wait until they are ready."""
    inv, selected = _select(hosts, inventory, prepare=True)
    with report.LiveReport([h.name for h in selected], "restart") as live:
        results = api.restart(selected, live.update, _options(parallel, batch, max_fail))
    _record(inv, "restart", results)
    _finish("restart", results, json_)


TASKS = [deploy, status, rollback, restart]
