"""`invoke logs --hosts H [-n N] [-f]`: the gateway log of each host, prefixed by host.

Thin: select hosts, call fleet.deploy.logs. `-f` follows (a poll per second per host, each
bounded by a timeout) until Ctrl-C.
"""

from __future__ import annotations

from invoke import Exit

from fleet.cli.deploy import HOSTS_HELP, INV_HELP, select_hosts
from fleet.cli.flags import FleetTask, number, task
from fleet.cli.taskrun import Run
from fleet.deploy import logs as host_logs


class _TailFlags(FleetTask):
    """`-n N` for `--lines`, as tail and Kamal spell it (invoke would pick `-l`)."""

    def arg_opts(self, name, default, taken_names):
        opts = super().arg_opts(name, default, taken_names)
        if name == "lines":
            opts["names"] = ["lines", "n"]
        return opts


@task(klass=_TailFlags, help={"hosts": HOSTS_HELP, "inventory": INV_HELP,
            "lines": "how many of the last lines to show per host (default 50)",
            "follow": "keep printing new lines as they are written, until Ctrl-C",
            "json": "one JSON object per line, {schema, action, host, line, error}, also "
                    "with -f (a usage error: one document, as every task's)"})
def logs(c, hosts=None, inventory="", lines="50", follow=False, json_=False):
    """Show each host's gateway log (`<state>/logs/gateway.log`), each line prefixed by host."""
    with Run("logs", json_).guard():
        count = number(lines, "--lines", minimum=0)
        _, selected = select_hosts(c, hosts, inventory)
    emit = host_logs.json_lines() if json_ else None
    try:
        failed = host_logs.show(selected, count, follow, emit)
    except KeyboardInterrupt:
        return
    if failed and not follow:
        raise Exit(code=1)


TASKS = [logs]
