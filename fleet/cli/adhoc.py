"""`fleet exec -H HOSTS 'command'`: one ad-hoc shell command on the selected hosts.

Thin: select hosts, show them and confirm those outside the sandbox as every changing task does
(`--yes`), call fleet.deploy.adhoc (under the fleet lease: a maintenance lock refuses it), record
the run in the deploy log, print each host's output prefixed by its name (its stderr on stderr),
then a summary line; exit 1 when a host failed, was refused or the command exited non-zero
anywhere, 2 when nothing ran for a usage error or an unconfirmed host. `--json`: one
document, each host's exit code and output in `data`.
"""

from __future__ import annotations

import sys

from invoke import Exit

from fleet.cli.deploy import (
    HOSTS_HELP,
    INV_HELP,
    JSON_HELP,
    PARALLEL_HELP,
    YES_HELP,
    _confirm,
    _record,
    _show_targets,
    select_hosts,
)
from fleet.cli.flags import USAGE_ERROR, number, task
from fleet.cli.taskrun import Run
from fleet.deploy import adhoc, report
from fleet.deploy.runner import MAX_PARALLEL, RunOptions
from fleet.terminal.text import visible

MAX_TIMEOUT_S = 24 * 3600


@task(name="exec", positional=["command"], help={
    "command": "the shell command, run by each host's login shell (quote it; one that "
               "starts with a dash: put a space before it, ' -x')",
    "hosts": HOSTS_HELP, "inventory": INV_HELP, "parallel": PARALLEL_HELP,
    "timeout": "seconds the command may run on a host (default: its timeouts.command)",
    "yes": YES_HELP, "json": JSON_HELP})
def exec_(c, command=None, hosts=None, inventory="", parallel="10", timeout="", yes=False,
          json_=False):
    """Run one shell command on every selected host, as Ansible's ad-hoc shell does."""
    run = Run("exec", json_)
    with run.guard():
        if not (command or "").strip():
            raise Exit("error: give the command to run, e.g. fleet exec -H web 'uptime'",
                       USAGE_ERROR)
        if command.startswith("-"):
            raise Exit(f"error: the command {visible(command)!r} starts with a dash: fleet reads "
                       "that as a mistyped flag, and a shell as an option of its own; to run a "
                       f"program whose name starts with one, quote it with a space before it "
                       f"(fleet exec -H web ' {visible(command)}')", USAGE_ERROR)
        seconds = float(number(timeout, "--timeout", maximum=MAX_TIMEOUT_S)) if timeout else None
        options = RunOptions(parallel=number(parallel, "--parallel", maximum=MAX_PARALLEL))
        inv, selected = select_hosts(c, hosts, inventory)
        where = _show_targets(f"exec {command}", selected)
        _confirm(inv, selected, where, yes, json_)
        with report.LiveReport([h.name for h in selected], "exec", quiet=json_) as live:
            results = adhoc.exec_command(selected, command, live.update, options, seconds)
        _record(inv, "exec", results, command=command)
        if json_:
            return run.finish("exec", results)
        width = max(len(visible(r.host)) for r in results)
        for res in results:
            name = f"{visible(res.host):<{width}} |"
            head = res.note if res.result in ("ok", "failed") else f"{res.result}: {res.note}"
            print(f"{name} {visible(head)} ({res.duration_s:.2f}s)", flush=True)
            for line in res.data.get("stdout", "").splitlines():
                print(f"{name} {visible(line)}")
            for line in res.data.get("stderr", "").splitlines():
                print(f"{name} {visible(line)}", file=sys.stderr)
        sys.stdout.flush()
        report.stdout_console().print(report.summary_line(results, run.elapsed), highlight=False)
        if not all(r.ok for r in results):
            raise Exit(code=1)


TASKS = [exec_]
