"""The maintenance lock's tasks: `lock.acquire`, `lock.release`, `lock.status` (thin: parse
flags, call fleet.deploy.maintenance, print). Like every task they take `-H` and `--inventory`,
print a table (or one `--json` document) and exit 0 only when every host did what was asked."""

from __future__ import annotations

from invoke import Collection, Exit

from fleet.cli.deploy import HOSTS_HELP, INV_HELP, JSON_HELP, select_hosts
from fleet.cli.flags import USAGE_ERROR, task
from fleet.cli.taskrun import Run
from fleet.deploy import api, maintenance, report
from fleet.deploy.duration import seconds as seconds_of

MAX_EXPIRES_S = 30 * 86400  # a maintenance window; a lock without an end needs no --expires


def duration_s(value: str) -> float:
    """`90`, `30m`, `2h`, `1d` in seconds, at most 30 days (a date beyond any calendar made
    every later `lock.status` fail); a usage error naming the flag otherwise."""
    seconds = seconds_of(value)
    if not seconds:
        raise Exit(f"error: --expires {value!r}: use a duration such as 30m, 2h or 1d",
                   USAGE_ERROR)
    if seconds > MAX_EXPIRES_S:
        raise Exit(f"error: --expires {value!r}: at most 30d; for a lock that holds until "
                   "`fleet lock.release`, leave out --expires", USAGE_ERROR)
    return seconds


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP,
            "message": "why (shown to everyone the lock refuses); required",
            "expires": "let it lapse after this long (30m, 2h, 1d; at most 30d); default: "
                       "until released",
            "json": JSON_HELP})
def acquire(c, hosts=None, inventory="", message="", expires="", json_=False):
    """Lock hosts for maintenance: every deploy, rollback and restart there is refused."""
    run = Run("lock.acquire", json_)
    with run.guard():
        if not message.strip():
            raise Exit("error: say why with -m/--message (e.g. -m 'OS upgrade, back at 14:00')",
                       USAGE_ERROR)
        seconds = duration_s(expires) if expires else None
        _on_hosts(c, run, hosts, inventory, lambda selected, update: maintenance.acquire(
            selected, update, message.strip(), api.default_owner(), seconds))


def _on_hosts(c, run: Run, hosts: str, inventory: str, action) -> None:
    """Select the hosts, run `action(selected, progress)` with a live table, report."""
    _, selected = select_hosts(c, hosts, inventory)
    with report.LiveReport([h.name for h in selected], run.action, quiet=True) as live:
        results = action(selected, live.update)
    run.finish(run.action, results)


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP, "json": JSON_HELP})
def release(c, hosts=None, inventory="", json_=False):
    """Release the maintenance lock of hosts, whoever took it (a run's own lease stays)."""
    run = Run("lock.release", json_)
    with run.guard():
        _on_hosts(c, run, hosts, inventory, maintenance.release)


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP, "json": JSON_HELP})
def status(c, hosts=None, inventory="", json_=False):
    """Show, per host, whether it is free, locked for maintenance, or held by a run."""
    run = Run("lock.status", json_)
    with run.guard():
        _on_hosts(c, run, hosts, inventory, maintenance.status)


ns = Collection("lock")
ns.add_task(acquire)
ns.add_task(release)
ns.add_task(status)
