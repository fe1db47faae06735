"""`invoke doctor --hosts H [--json] [--verbose]`: host and continuity health across the fleet.

Thin: select hosts, run fleet.deploy.doctor, print one table (or JSON) and exit 0 healthy,
1 warnings, 2 critical. Read-only on every host; safe to run from cron or a systemd timer.
"""

from __future__ import annotations

from invoke import Exit

from fleet.cli.deploy import HOSTS_HELP, INV_HELP, PARALLEL_HELP, _options, select_hosts
from fleet.cli.flags import task
from fleet.cli.taskrun import Run
from fleet.deploy import doctor as fleet_doctor
from fleet.deploy import report


@task(help={"hosts": HOSTS_HELP, "inventory": INV_HELP, "parallel": PARALLEL_HELP,
            "json": "one JSON document on stdout (docs/operations.md; per host: result = its "
                    "severity, data.checks, data.continuity)",
            "verbose": "list passing checks too"})
def doctor(c, hosts=None, inventory="", parallel="10", json_=False, verbose=False):
    """Diagnose hosts and every agent's state files, read-only.

    Per host: python, disk, clock, permissions, gateway, plugins, locks, temp files; then every
    agent's and child's state file. Never repairs. Exit 0 healthy, 1 warnings, 2 critical.
    """
    run = Run("doctor", json_)
    with run.guard():
        options = _options(parallel)
        _, selected = select_hosts(c, hosts, inventory)
    with report.LiveReport([h.name for h in selected], "doctor", quiet=True) as live:
        results = fleet_doctor.doctor(selected, live.update, options)
    severity = fleet_doctor.fleet_severity(results)
    code = fleet_doctor.exit_code(severity)
    if json_:
        run.document(code == 0, {"severity": severity}, code, results)
    else:
        console = report.stdout_console()
        console.print(fleet_doctor.table(results, verbose))
        console.print(f"Overall status: [{fleet_doctor.STYLE[severity]}]{severity.upper()}[/] "
                      f"({len(results)} host(s))")
    if code:
        raise Exit(code=code)


TASKS = [doctor]
