"""`invoke deploy` / `invoke status` against real SSH hosts in Docker, with faults.

The session harness (cloud/opc, pi/administrator, edge-1/opc) moves forward through releases in
file order: base -> upgrade (while a second deploy is refused) -> bad release (rolled back) ->
a release while one host is paused -> a release while one host shows a changed host key. Faults
that damage a host (killed mid-deploy, full disk, corrupt upload) use fresh hosts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import time

import pytest
from crcforge import damage_unseen
from integration_helpers import (
    REPO,
    assert_on,
    current_release,
    deploy,
    health,
    invoke_task,
    release_name,
)

from fleet.continuity.statelayout import StateLayout
from lab.harness import faults, hosts

pytestmark = pytest.mark.docker

NAMES = ["cloud", "pi", "edge-1"]


def test_deploy_reaches_every_host_as_its_non_root_user(deployed, base_deploy, artifacts):
    results = base_deploy.hosts()
    assert [results[n]["result"] for n in NAMES] == ["installed"] * 3, base_deploy.data
    assert_on(deployed, artifacts())
    for name, host in deployed.hosts.items():
        pid = health(deployed, name)["pid"]
        assert host.exec_ok(f"ps -o user= -p {pid}").strip() == host.user
        assert current_release(host) == release_name(artifacts())


def test_pi_runs_the_deployed_gateway_on_debian_bullseye_python_3_9(deployed):
    pi = deployed.hosts["pi"]
    assert pi.exec_ok("cat /etc/debian_version").startswith("11.")
    pid = health(deployed, "pi")["pid"]
    exe = pi.exec_ok(f"readlink /proc/{pid}/exe", user=pi.user).strip()
    version = pi.exec_ok(f"{exe} -c 'import sys; print(sys.version_info[:2])'").strip()
    assert version == "(3, 9)", (exe, version)


def test_redeploy_changes_nothing(deployed, artifacts):
    before = {n: health(deployed, n) for n in NAMES}
    run = deploy(deployed.inventory_path, artifacts())
    assert run.code == 0, run.data
    assert [run.hosts()[n]["result"] for n in NAMES] == ["unchanged"] * 3
    for name in NAMES:
        after = health(deployed, name)
        assert (after["pid"], after["started_at"]) == (before[name]["pid"],
                                                      before[name]["started_at"])


def test_second_concurrent_deploy_is_refused_and_the_upgrade_moves_every_host(
        deployed, artifacts):
    upgrade = artifacts("5.0.1")
    cloud = deployed.hosts["cloud"]
    faults.set_step_fault(cloud, "verify", "hold")
    first = subprocess.Popen(
        [sys.executable, "-m", "invoke", "-r", str(REPO), "deploy", "--inventory",
         str(deployed.inventory_path), "--hosts", "all", "--artifact", str(upgrade.path),
         "--json", "--yes"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lock = f"{cloud.state_dir}/fleet/deploy.lock"
        deadline = time.monotonic() + 60
        while not cloud.exec(f"test -s {lock}").ok:
            assert time.monotonic() < deadline, "the first deploy never took cloud's lock"
            assert first.poll() is None, first.communicate()
            time.sleep(0.2)
        second = deploy(deployed.inventory_path, upgrade, "cloud")
        assert second.code != 0
        refused = second.hosts()["cloud"]
        assert refused["result"] == "refused" and "lock" in refused["note"], refused
    finally:
        faults.clear_step_fault(cloud, "verify")
        out, err = first.communicate(timeout=180)
    assert first.returncode == 0, out + err[-2000:]
    assert_on(deployed, upgrade)
    # each host ran the release before: it got a patch of that release's artifact, not the file
    rows = {row["host"]: row["data"] for row in json.loads(out)["hosts"]}
    size = upgrade.path.stat().st_size
    for name in NAMES:
        assert rows[name]["patched_from"] == artifacts().sha256, rows[name]
        assert rows[name]["upload_bytes"] < size / 10, rows[name]


def test_status_shows_one_version_everywhere(deployed):
    run = invoke_task("status", "--inventory", str(deployed.inventory_path), "--hosts", "all")
    assert run.code == 0, run.stderr[-2000:]
    releases = {h["host"]: (h.get("data") or {}).get("current") for h in run.data["hosts"]}
    assert set(releases) == set(NAMES)
    names = {(r or {}).get("release") if isinstance(r, dict) else r for r in releases.values()}
    assert names == {health(deployed, "cloud")["release"]}, releases


def test_host_with_sshd_down_fails_fast_while_its_gateway_keeps_running(deployed):
    edge = deployed.hosts["edge-1"]
    pid = health(deployed, "edge-1")["pid"]
    with faults.sshd_stopped(edge):
        run = invoke_task("status", "--inventory", str(deployed.inventory_path), "--hosts", "all")
        assert edge.exec(f"kill -0 {pid}").ok, "the gateway must not depend on sshd"
    assert run.code != 0
    results = run.hosts()
    assert results["edge-1"]["ok"] is False and "edge-1" in results["edge-1"]["note"]
    assert results["edge-1"]["result"] == "unreachable"
    assert results["cloud"]["ok"] and results["pi"]["ok"]
    assert health(deployed, "edge-1")["pid"] == pid


def test_bad_release_is_rolled_back_on_every_host(deployed, artifacts):
    good = deploy(deployed.inventory_path, artifacts("5.0.1"))
    assert good.code == 0, good.data
    run = deploy(deployed.inventory_path, artifacts("5.0.2", broken=True))
    assert run.code != 0
    assert [run.hosts()[n]["result"] for n in NAMES] == ["rolled_back"] * 3, run.data
    assert_on(deployed, artifacts("5.0.1"))


def test_paused_host_fails_within_its_deadline_while_the_rest_finish(deployed, artifacts):
    release = artifacts("5.0.3")
    before = current_release(deployed.hosts["edge-1"])
    assert before != release_name(release)
    with faults.paused(deployed.hosts["edge-1"]):
        run = deploy(deployed.inventory_path, release)
    assert run.code != 0
    results = run.hosts()
    assert results["edge-1"]["ok"] is False
    assert results["edge-1"]["result"] in ("failed", "unreachable")  # deadline or banner timeout
    assert [results[n]["result"] for n in ("cloud", "pi")] == ["installed"] * 2
    assert_on(deployed, release, ["cloud", "pi"])
    assert current_release(deployed.hosts["edge-1"]) == before
    assert health(deployed, "edge-1")["release"] == before
    rerun = deploy(deployed.inventory_path, release)
    assert rerun.code == 0, rerun.data
    assert rerun.hosts()["edge-1"]["result"] == "installed"
    assert_on(deployed, release)


def test_changed_host_key_is_refused(deployed, artifacts):
    release = artifacts("5.0.4")
    before = current_release(deployed.hosts["pi"])
    assert before != release_name(release)
    with faults.host_key_changed(deployed.hosts["pi"]):
        run = deploy(deployed.inventory_path, release)
        assert run.code != 0
        pi = run.hosts()["pi"]
        assert pi["result"] == "host_key" and "key" in pi["note"].lower(), pi
        assert [run.hosts()[n]["result"] for n in ("cloud", "edge-1")] == ["installed"] * 2
        assert current_release(deployed.hosts["pi"]) == before
    rerun = deploy(deployed.inventory_path, release)
    assert rerun.code == 0, rerun.data
    assert_on(deployed, release)


@pytest.mark.parametrize("step", ["lock", "unpack", "switch", "restart", "ready"])
def test_host_killed_mid_deploy_recovers_and_a_rerun_converges(fresh_fleet, artifacts, step):
    run = fresh_fleet([hosts.HostSpec("cloud", "opc"), hosts.HostSpec("edge-2", "opc")])
    base, upgrade = artifacts(), artifacts("5.0.1")
    assert deploy(run.inventory_path, base).code == 0
    with faults.kill_at_step(run, "edge-2", step) as kill:
        result = deploy(run.inventory_path, upgrade)
        assert kill.killed, f"the host must have been killed at the {step} step"
    assert result.code != 0
    assert result.hosts()["cloud"]["result"] == "installed"
    assert result.hosts()["edge-2"]["ok"] is False
    edge = run.hosts["edge-2"]
    assert current_release(edge) in (release_name(base), release_name(upgrade))
    assert edge.exec(f"test -f {edge.state_dir}/fleet/current/fleet_manifest.json").ok
    rerun = deploy(run.inventory_path, upgrade)
    assert rerun.code == 0, rerun.data
    assert_on(run, upgrade)


def test_full_disk_fails_that_host_cleanly_on_its_old_version(fresh_fleet, artifacts):
    run = fresh_fleet([hosts.HostSpec("cloud", "opc"),
                       hosts.HostSpec("edge-3", "opc", state_tmpfs_mb=64)])
    base, upgrade = artifacts(), artifacts("5.0.1")
    assert deploy(run.inventory_path, base).code == 0
    with faults.disk_full(run.hosts["edge-3"]):
        result = deploy(run.inventory_path, upgrade)
        assert result.code != 0
        assert result.hosts()["cloud"]["result"] == "installed"
        assert result.hosts()["edge-3"]["ok"] is False
        assert_on(run, base, ["edge-3"])
        assert current_release(run.hosts["edge-3"]) == release_name(base)
    rerun = deploy(run.inventory_path, upgrade)
    assert rerun.code == 0, rerun.data
    assert_on(run, upgrade)


def test_corrupted_upload_is_refused_and_a_rerun_converges(fresh_fleet, artifacts):
    run = fresh_fleet([hosts.HostSpec("edge-4", "opc")])
    base, upgrade = artifacts(), artifacts("5.0.1")
    assert deploy(run.inventory_path, base).code == 0
    with faults.corrupt_artifact(run.hosts["edge-4"]) as corrupted:
        result = deploy(run.inventory_path, upgrade)
        assert corrupted.done.is_set(), "the uploaded artifact must have been corrupted"
    assert result.code != 0 and result.hosts()["edge-4"]["ok"] is False
    assert_on(run, base)
    rerun = deploy(run.inventory_path, upgrade)
    assert rerun.code == 0, rerun.data
    assert_on(run, upgrade)


def test_a_stored_base_the_patch_cannot_use_gets_the_whole_artifact(fresh_fleet, artifacts,
                                                                   tmp_path):
    """The host's copy of its release's artifact changed where its records cannot tell (same
    CRC-32): the rebuilt file is not the upgrade (its SHA-256 differs), so the host keeps
    nothing of it, the whole artifact follows and the upgrade lands."""
    run = fresh_fleet([hosts.HostSpec("edge-5", "opc")])
    base, upgrade = artifacts(), artifacts("5.0.1")
    assert deploy(run.inventory_path, base).code == 0
    host = run.hosts["edge-5"]
    stored = f"{host.state_dir}/{StateLayout.ARTIFACT.format(sha256=base.sha256)}"
    local = tmp_path / "base.pyz"
    local.write_bytes(base64.b64decode(host.exec_ok(f"base64 -w0 {stored}")))
    assert local.read_bytes() == base.path.read_bytes()
    damage_unseen(local, upgrade.path)
    for offset, (was, now) in enumerate(zip(base.path.read_bytes(), local.read_bytes())):
        if was != now:
            host.exec_ok(f"printf '\\{now:03o}' | dd of={stored} bs=1 seek={offset} "
                         "conv=notrunc 2>/dev/null")
    assert host.exec_ok(f"sha256sum {stored}").split()[0] == hashlib.sha256(
        local.read_bytes()).hexdigest()
    result = deploy(run.inventory_path, upgrade)
    assert result.code == 0, result.data
    data = result.hosts()["edge-5"]["data"]
    assert data["patched_from"] is None and data["patch_failed"], data
    assert data["upload_bytes"] > upgrade.path.stat().st_size, data
    assert_on(run, upgrade)


def test_rerun_after_a_reboot_is_not_blocked_by_a_reused_lock_pid(fresh_fleet, artifacts):
    """After a power cut the dead installer's pid can belong to another process on the rebooted
    host; the leftover deploy lock must still count as stale."""
    run = fresh_fleet([hosts.HostSpec("edge-5", "opc")])
    base, upgrade = artifacts(), artifacts("5.0.1")
    assert deploy(run.inventory_path, base).code == 0
    with faults.kill_at_step(run, "edge-5", "restart") as kill:
        killed_run = deploy(run.inventory_path, upgrade)
        assert kill.killed, {k: v for k, v in killed_run.hosts()["edge-5"].items() if k != "data"}
    host = run.hosts["edge-5"]
    lock = json.loads(host.exec_ok(f"cat {host.state_dir}/fleet/deploy.lock"))
    pid = int(lock["pid"])
    occupy = (f'for i in $(seq 1 30000); do sleep 600 & p=$!; [ "$p" -eq {pid} ] && exit 0; '
              f'kill $p; wait $p 2>/dev/null; done; exit 1')
    assert host.exec(occupy, user=host.user, timeout=120).ok, f"pid {pid} not reached"
    assert host.exec(f"kill -0 {pid}", user=host.user).ok
    rerun = deploy(run.inventory_path, upgrade)
    assert rerun.code == 0, rerun.hosts()["edge-5"].get("note")
    assert_on(run, upgrade)
