"""`invoke logs --hosts H [-n N] [-f] [--since 10m] [--grep RE]`: the gateway log of each host,
prefixed by host.

Thin: select hosts, call fleet.deploy.logs. `-f` follows (a poll per second per host, each
bounded by a timeout) until Ctrl-C. `--since` and `--grep` filter on the host, as Kamal's
`app logs --since/--grep` do.
"""

from __future__ import annotations

import re

from invoke import Exit

from fleet.cli.deploy import HOSTS_HELP, INV_HELP, select_hosts
from fleet.cli.flags import USAGE_ERROR, FleetTask, number, task
from fleet.cli.taskrun import Run
from fleet.deploy import duration
from fleet.deploy import logs as host_logs

SINCE_LINES = 10_000  # `--since` without `-n`: every line since then, up to this many per host


class _TailFlags(FleetTask):
    """`-n N` for `--lines`, as tail and Kamal spell it (invoke would pick `-l`)."""

    def arg_opts(self, name, default, taken_names):
        opts = super().arg_opts(name, default, taken_names)
        if name == "lines":
            opts["names"] = ["lines", "n"]
        return opts


@task(klass=_TailFlags, help={"hosts": HOSTS_HELP, "inventory": INV_HELP,
            "lines": "how many of the last lines to show per host (default 50; with --since, "
                     f"every line since then, up to {SINCE_LINES:,})",
            "follow": "keep printing new lines as they are written, until Ctrl-C",
            "since": "only lines written since then: a duration before the host's clock "
                     "(30s, 10m, 2h, 1d) or a moment (2026-12-05T10:00, local time unless it "
                     "ends in Z or an offset)",
            "grep": "only lines matching this Python regular expression ((?i) for any case)",
            "json": "one JSON object per line, {schema, action, host, line, error}, also "
                    "with -f (a usage error: one document, as every task's)"})
def logs(c, hosts=None, inventory="", lines="", follow=False, since="", grep="", json_=False):
    """Show each host's gateway log (`<state>/logs/gateway.log`), each line prefixed by host."""
    with Run("logs", json_).guard():
        default = SINCE_LINES if since else 50
        count = number(lines, "--lines", minimum=0) if lines != "" else default
        only = _filter(grep, since)
        _, selected = select_hosts(c, hosts, inventory)
    emit = host_logs.json_lines() if json_ else None
    try:
        failed = host_logs.show(selected, count, follow, emit, only=only)
    except KeyboardInterrupt:
        return
    if failed and not follow:
        raise Exit(code=1)



def _filter(grep: str, since: str) -> host_logs.Filter:
    """`--grep` and `--since` checked here, so a bad value is one usage error, not one per
    host; a duration is counted back by each host from its own clock."""
    try:
        re.compile(grep)
    except re.error as exc:
        raise Exit(f"error: --grep {grep!r}: not a valid regular expression ({exc})",
                   USAGE_ERROR) from None
    if not since:
        return host_logs.Filter(grep)
    seconds = duration.seconds(since)
    if seconds is not None:
        return host_logs.Filter(grep, since_ago=seconds)
    when = duration.moment(since)
    if when is None:
        raise Exit(f"error: --since {since!r}: use a duration (30s, 10m, 2h, 1d) or a moment "
                   "(2026-12-05T10:00, 2026-12-05 10:00:00+01:00)", USAGE_ERROR)
    return host_logs.Filter(grep, since_at=when)


TASKS = [logs]
