"""A host with systemd as PID 1, its gateway a systemd user service of the login user, deployed
with the `systemd` gateway manager: `systemctl --user restart` acts for real, not on a fake tool.

The harness runs these containers with the cgroup hierarchy mounted read-only and tmpfs on /run,
the user lingers (so its systemd --user starts at boot) and the gateway's unit is
/etc/systemd/user/fleet-gateway.service, as an operator installs it once per host.
"""

from __future__ import annotations

import time

import pytest
from integration_helpers import assert_on, deploy, health

from lab.harness import hosts

pytestmark = pytest.mark.docker

SVC = hosts.HostSpec("svc", "opc", init="systemd")


def main_pid(run, name: str = "svc") -> int:
    """The unit's main pid as the user's systemd sees it, asked over SSH as the login user."""
    out = run.ssh(name, "systemctl --user show -p MainPID --value fleet-gateway.service")
    assert out.ok, out.stderr
    return int(out.stdout.strip())


def test_systemd_host_deploys_upgrades_and_rolls_back_through_its_user_service(
        fresh_fleet, artifacts):
    run = fresh_fleet([SVC])
    host = run.hosts["svc"]
    assert host.exec_ok("cat /proc/1/comm").strip() == "systemd"
    assert run.ssh("svc", "systemctl --user is-system-running").stdout.strip() == "running"

    first = deploy(run.inventory_path, artifacts())
    assert first.code == 0, first.data
    assert first.hosts()["svc"]["result"] == "installed"
    assert_on(run, artifacts())
    pid = health(run, "svc")["pid"]
    assert main_pid(run) == pid, "the ready gateway must be the unit's main process"

    upgrade = artifacts("5.0.1")
    second = deploy(run.inventory_path, upgrade)
    assert second.code == 0, second.data
    assert_on(run, upgrade)
    new_pid = health(run, "svc")["pid"]
    assert new_pid != pid and main_pid(run) == new_pid

    bad = deploy(run.inventory_path, artifacts("5.0.2", broken=True))
    assert bad.code != 0 and bad.hosts()["svc"]["result"] == "rolled_back", bad.data
    assert_on(run, upgrade)
    assert main_pid(run) == health(run, "svc")["pid"]

    again = deploy(run.inventory_path, upgrade)
    assert again.code == 0 and again.hosts()["svc"]["result"] == "unchanged", again.data


def test_systemd_restarts_a_crashed_gateway_on_the_same_release(fresh_fleet, artifacts):
    run = fresh_fleet([SVC])
    assert deploy(run.inventory_path, artifacts()).code == 0
    pid = main_pid(run)
    run.hosts["svc"].exec_ok(f"kill -9 {pid}")
    deadline = time.monotonic() + 60
    while True:
        new = main_pid(run)
        if new not in (0, pid):
            try:
                if health(run, "svc")["pid"] == new:
                    break
            except Exception:  # not answering yet
                pass
        assert time.monotonic() < deadline, "systemd never brought the gateway back"
        time.sleep(0.5)
    assert_on(run, artifacts())
