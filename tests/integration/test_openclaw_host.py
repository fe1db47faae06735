"""The OpenClaw host of the harness (`claw`): systemd as PID 1, Node + OpenClaw from the project's
toolchain in an image layer, the scripted model on the container's own loopback, OpenClaw's
gateway the login user's systemd service (installed by `openclaw gateway install`, as an operator
does once). `openclaw gateway restart` really replaces the gateway, and `invoke deploy` with the
`openclaw` manager puts fleet's plugins into it over SSH.

Needs the toolchain (`invoke openclaw.install`); marker `openclaw` (one real gateway at a time).
"""

from __future__ import annotations

import json

import pytest
from integration_helpers import deploy

from fleet.harness import hosts, openclawlayer
from fleet.installer.openclawgw import health_from_listing

pytestmark = [pytest.mark.docker, pytest.mark.openclaw]

CLAW = hosts.HostSpec("claw", "opc", init="systemd", openclaw=True)
PLUGINS = ("memory-continuity", "mc")


def plugin_versions(run) -> dict[str, str]:
    """Versions of fleet's plugins that the running gateway itself lists as active, over SSH."""
    out = run.ssh("claw", "openclaw gateway call plugins.list --json", timeout=180)
    assert out.ok, out.stdout[-2000:] + out.stderr[-2000:]
    return health_from_listing(json.loads(out.stdout), list(PLUGINS), None, None)["versions"]


@pytest.fixture
def claw(fresh_fleet, openclaw_toolchain):
    return fresh_fleet([CLAW])


@pytest.mark.timeout(1800)
def test_openclaw_host_restarts_for_real_and_takes_fleet_plugins_through_invoke_deploy(
        claw, artifacts):
    run = claw
    version = run.ssh("claw", "openclaw --version")
    assert version.ok and "2026.9.6" in version.stdout, version.stdout + version.stderr
    assert run.ssh("claw", "systemctl --user is-active fleet-model.service").ok

    first = openclawlayer.main_pid(run, "claw")
    owner = run.hosts["claw"].exec_ok(f"ps -o user= -p {first}").strip()
    assert owner == "opc", "the login user runs the gateway"
    # Its exit status is not asserted: on a loaded machine its own readiness budget (62 s) can
    # run out while the new gateway still starts; what must hold is the new ready gateway.
    run.ssh("claw", "openclaw gateway restart", timeout=240)
    second = openclawlayer.wait_ready(run, "claw", old_pid=first)
    assert second != first

    base = artifacts()
    result = deploy(run.inventory_path, base)
    assert result.code == 0, (result.data, result.stderr[-3000:])
    assert result.hosts()["claw"]["result"] == "installed"
    assert plugin_versions(run) == {pid: base.components[pid] for pid in PLUGINS}

    upgrade = artifacts("5.0.1")
    moved = deploy(run.inventory_path, upgrade)
    assert moved.code == 0, (moved.data, moved.stderr[-3000:])
    assert plugin_versions(run) == {pid: upgrade.components[pid] for pid in PLUGINS}
    assert upgrade.components["memory-continuity"] == "5.0.1"
