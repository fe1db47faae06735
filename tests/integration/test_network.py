"""`invoke deploy` over a network like the internet's: round-trip time, a dropped connection
mid-upload and mid-install, a partition longer than the deadline, a partition that heals.

Every host here sits behind a lab.harness.network link (a TCP proxy on 127.0.0.1 in front of its
sshd); the deploy dials the links through the run's inventory. The pi hosts are Debian bullseye
(Python 3.9), the cloud hosts bookworm, as in a fleet of a cloud VM and a Pi at home.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from integration_helpers import REPO, assert_on, current_release, deploy, release_name

from fleet.continuity.statelayout import StateLayout
from lab.harness import faults, hosts
from lab.harness.network import UP, LinkSet, Profile

pytestmark = pytest.mark.docker

CLOUD = hosts.HostSpec("cloud", "opc")
PI = hosts.HostSpec("pi", "administrator", suite="bullseye")


def _installer_gone(host: hosts.Host, timeout: float = 90) -> None:
    """Wait until no installer runs on the host (one cut off from its client may still finish)."""
    deadline = time.monotonic() + timeout
    while host.exec("pgrep -f -- '[.]pyz install ' >/dev/null").ok:
        assert time.monotonic() < deadline, f"{host.name}: the installer never finished"
        time.sleep(0.3)


def test_deploy_under_100ms_round_trip_converges(fresh_fleet, artifacts):
    run = fresh_fleet([CLOUD, PI])
    with LinkSet(run, Profile(rtt_ms=100)) as links:
        first = deploy(run.inventory_path, artifacts())
        assert first.code == 0, first.data
        assert [first.hosts()[n]["result"] for n in ("cloud", "pi")] == ["installed"] * 2
        for name in ("cloud", "pi"):
            assert links[name].connections_total >= 1, "the deploy must go through the link"
            assert links[name].bytes[UP] >= artifacts().path.stat().st_size
        again = deploy(run.inventory_path, artifacts())
        assert again.code == 0, again.data
        assert [again.hosts()[n]["result"] for n in ("cloud", "pi")] == ["unchanged"] * 2
    assert_on(run, artifacts())


def test_connection_dropped_mid_upload_leaves_the_old_release_and_a_rerun_converges(
        fresh_fleet, artifacts):
    run = fresh_fleet([CLOUD, PI])
    base, upgrade = artifacts(), artifacts("5.0.1")
    with LinkSet(run, Profile(rtt_ms=20)) as links:
        assert deploy(run.inventory_path, base).code == 0
        # without its stored artifact, pi gets the upgrade whole (0.9 MB), not as a ~30 KB
        # patch of it, so half the artifact's size is mid-upload
        pi = run.hosts["pi"]
        pi.exec_ok(f"rm {pi.state_dir}/{StateLayout.ARTIFACT.format(sha256=base.sha256)}")
        dropped = links["pi"].drop_after(upgrade.path.stat().st_size // 2, UP)
        result = deploy(run.inventory_path, upgrade)
        assert dropped.is_set(), "the upload must have been cut halfway"
        assert result.hosts()["cloud"]["data"]["patched_from"] == base.sha256
        assert result.code != 0
        assert result.hosts()["cloud"]["result"] == "installed"
        assert result.hosts()["pi"]["ok"] is False
        assert current_release(run.hosts["pi"]) == release_name(base)
        assert_on(run, base, ["pi"])
        rerun = deploy(run.inventory_path, upgrade)
        assert rerun.code == 0, rerun.data
    assert_on(run, upgrade)


@pytest.mark.parametrize("step", ["unpack", "restart"])
def test_connection_dropped_mid_install_leaves_old_or_new_and_a_rerun_converges(
        fresh_fleet, artifacts, step):
    run = fresh_fleet([PI])
    pi = run.hosts["pi"]
    base, upgrade = artifacts(), artifacts("5.0.1")
    with LinkSet(run, Profile(rtt_ms=20)) as links:
        assert deploy(run.inventory_path, base).code == 0
        faults.set_step_fault(pi, step, "hold")
        held = f"{pi.state_dir}/fleet/faults/{step}.held"
        proc = subprocess.Popen(
            [sys.executable, "-m", "invoke", "-r", str(REPO), "deploy", "--inventory",
             str(run.inventory_path), "--hosts", "all", "--artifact", str(upgrade.path),
             "--json", "--yes"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while not pi.exec(f"test -e {held}").ok:
                assert time.monotonic() < deadline, f"the installer never reached {step}"
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.1)
            assert links["pi"].cut() >= 1, "the deploy's connection must be open to be dropped"
        finally:
            faults.clear_step_fault(pi, step)
            out, err = proc.communicate(timeout=240)
        assert proc.returncode != 0, f"the deploy cannot succeed on a dropped connection: {out}"
        _installer_gone(pi)
        assert current_release(pi) in (release_name(base), release_name(upgrade))
        assert pi.exec(f"test -f {pi.state_dir}/fleet/current/fleet_manifest.json").ok
        rerun = deploy(run.inventory_path, upgrade)
        assert rerun.code == 0, rerun.data
    assert_on(run, upgrade)


def test_partition_longer_than_the_deadline_fails_that_host_only(fresh_fleet, artifacts):
    run = fresh_fleet([CLOUD, PI])
    base, upgrade = artifacts(), artifacts("5.0.1")
    with LinkSet(run, Profile(rtt_ms=50)) as links:
        assert deploy(run.inventory_path, base).code == 0
        with links["pi"].partitioned_for():
            result = deploy(run.inventory_path, upgrade)
        assert result.code != 0
        assert result.hosts()["cloud"]["result"] == "installed"
        pi = result.hosts()["pi"]
        assert pi["ok"] is False and pi["result"] == "unreachable", pi
        assert current_release(run.hosts["pi"]) == release_name(base)
        assert_on(run, base, ["pi"])
        assert_on(run, upgrade, ["cloud"])
        rerun = deploy(run.inventory_path, upgrade)
        assert rerun.code == 0, rerun.data
    assert_on(run, upgrade)


def test_partition_that_heals_within_the_deadline_does_not_fail_the_deploy(
        fresh_fleet, artifacts):
    run = fresh_fleet([PI])
    base, upgrade = artifacts(), artifacts("5.0.1")
    with LinkSet(run, Profile(rtt_ms=50, rate_bps=256_000)) as links:
        assert deploy(run.inventory_path, base).code == 0
        link = links["pi"]
        start = link.bytes[UP]
        errors: list[str] = []

        def flap() -> None:  # partition once the upload is under way, heal 3 s later
            deadline = time.monotonic() + 60
            while link.bytes[UP] - start < 20_000:
                if time.monotonic() > deadline:
                    errors.append("the upload never started")
                    return
                time.sleep(0.01)
            with link.partitioned_for():
                time.sleep(3)

        flapper = threading.Thread(target=flap)
        flapper.start()
        result = deploy(run.inventory_path, upgrade)
        flapper.join(timeout=90)
        assert not errors, errors
        assert result.code == 0, result.data
        assert result.hosts()["pi"]["result"] == "installed"
    assert_on(run, upgrade)
