"""A gateway that dies after a deploy comes back: the fleet manager's supervisor starts it again
with backoff, writes an audit line, and `status` and `doctor` say so. A clean stop stays stopped,
every stop takes the supervisor along, and a gateway without its supervisor is a doctor warning.

Before, `installed, ok` meant "was ready when checked": a gateway killed after the deploy
stayed down until the next deploy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from deploy_helpers import REPO
from rich.console import Console

from fleet.deploy import doctor as fleet_doctor
from fleet.deploy.report import status_table
from fleet.gateway import process
from fleet.gateway.layout import Layout
from fleet.gateway.pidfile import running_pid
from fleet.installer import supervision


def wait_for(cond, timeout: float = 40.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout:.0f} s: {cond.__doc__ or cond}")


def ready_pid(sandbox, name: str):
    health = sandbox.health(name)
    return health["pid"] if health and health.get("ready") else None


def status_of(sandbox, name: str):
    [res] = sandbox.run("status", hosts=name).values()
    console = Console(width=250, record=True)
    console.print(status_table([res], width=250))
    return res, console.export_text()


def finding(sandbox, name: str) -> dict:
    [checked] = fleet_doctor.doctor(sandbox.inventory.select(name), sandbox.sink)
    [found] = [c for c in checked.data["checks"] if c["check"] == "supervisor"]
    return found


def test_a_gateway_killed_after_a_deploy_comes_back_and_every_view_says_so(sandbox, artifacts):
    assert sandbox.deploy(artifacts(), hosts="a")["a"].ok
    res, table = status_of(sandbox, "a")
    assert res.status.supervisor["running"] and res.status.supervisor["restarts"] == 0
    assert finding(sandbox, "a")["severity"] == "ok"
    old = ready_pid(sandbox, "a")
    os.kill(old, signal.SIGKILL)  # the OOM killer, say

    new = wait_for(lambda: (ready_pid(sandbox, "a") or old) != old and ready_pid(sandbox, "a"))
    [line] = [e for e in sandbox.audit("a") if e.get("action") == "supervise"]
    assert line["result"] == "restarted" and line["restarts"] == 1
    assert line["who"] == "fleet supervisor" and line["to"] == sandbox.current("a")
    assert line["reason"].startswith(f"gateway (pid {old}) was killed by signal 9 (SIGKILL) "
                                     "after ")
    assert line["reason"].endswith("; started again after 1 s")
    res, table = status_of(sandbox, "a")
    assert res.status.ready and res.status.gateway["pid"] == new
    assert res.status.supervisor["restarts"] == 1
    assert res.status.supervisor["last_exit"]["pid"] == old
    assert f"restarted 1x, last: gateway (pid {old}) was killed by signal 9" in table
    found = finding(sandbox, "a")
    assert found["severity"] == "warning"
    assert found["message"].startswith("the gateway failed and was started again 1 time(s); "
                                       f"last: gateway (pid {old}) was killed by signal 9")
    # the next deploy starts a fresh supervisor: its count starts over
    assert sandbox.deploy(artifacts(bump="5.0.1"), hosts="a")["a"].ok
    assert status_of(sandbox, "a")[0].status.supervisor["restarts"] == 0


def test_a_clean_stop_stays_stopped_and_takes_the_supervisor_along(sandbox, artifacts):
    assert sandbox.deploy(artifacts(), hosts="a")["a"].ok
    layout = Layout(sandbox.state("a"))
    supervisor = running_pid(process.supervisor_pidfile(layout))
    assert supervisor
    proc = subprocess.run([sys.executable, "-m", "fleet.gateway", "--state-dir",
                           str(sandbox.state("a")), "stop"], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    assert running_pid(process.supervisor_pidfile(layout)) is None
    time.sleep(2 * supervision.BACKOFF_MIN_S + 0.5)  # past the first restart it would make
    assert running_pid(layout.pidfile) is None and sandbox.health("a") is None
    assert not [e for e in sandbox.audit("a") if e.get("action") == "supervise"]


def test_a_gateway_without_its_supervisor_is_a_doctor_warning(sandbox, artifacts):
    assert sandbox.deploy(artifacts(), hosts="a")["a"].ok
    layout = Layout(sandbox.state("a"))
    os.kill(running_pid(process.supervisor_pidfile(layout)), signal.SIGKILL)
    wait_for(lambda: running_pid(process.supervisor_pidfile(layout)) is None)
    assert ready_pid(sandbox, "a")  # the gateway itself runs on
    res, table = status_of(sandbox, "a")
    assert res.status.ready and "not supervised" in table
    found = finding(sandbox, "a")
    assert found["severity"] == "warning" and "runs without its supervisor" in found["message"]
    assert sandbox.run("restart", hosts="a")["a"].ok
    assert finding(sandbox, "a")["severity"] == "ok"


@pytest.mark.parametrize("quick, delay", [(1, 1), (2, 2), (3, 4), (6, 32), (7, 60), (30, 60)])
def test_restarts_back_off_doubling_up_to_a_minute(quick, delay):
    assert supervision.backoff(quick) == delay


def test_an_exit_is_said_in_words():
    assert supervision.describe_exit(3) == "exited with code 3"
    assert supervision.describe_exit(-9) == "was killed by signal 9 (SIGKILL)"

