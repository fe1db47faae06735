"""The harness itself: hosts reachable only as intended, faults that bite and heal, cleanup."""

from __future__ import annotations

import pytest

from lab.harness import cleanup, faults, hosts, image, ssh
from lab.harness.run import Harness

pytestmark = pytest.mark.docker


def test_hosts_log_in_as_their_non_root_users_with_strict_host_keys(harness):
    assert list(harness.hosts) == ["cloud", "pi", "edge-1"]
    known = harness.known_hosts_path.read_text()
    for name, host in harness.hosts.items():
        result = harness.ssh(name, "id -u; id -un; echo $HOME")
        uid, user, home = result.stdout.split()
        assert (user, home) == (host.user, f"/home/{host.user}")
        assert uid != "0"
        assert host.known_hosts_line() + "\n" in known
    assert len({h.host_key for h in harness.hosts.values()}) == 3, "hosts must not share keys"


def test_sshd_is_published_on_loopback_only(harness):
    for host in harness.hosts.values():
        host.container.reload()
        bindings = host.container.attrs["NetworkSettings"]["Ports"]["22/tcp"]
        assert bindings and {b["HostIp"] for b in bindings} == {"127.0.0.1"}
        assert {int(b["HostPort"]) for b in bindings} == {host.port}


def test_inventory_lists_every_host_with_its_port_and_user(harness):
    import yaml

    data = yaml.safe_load(harness.inventory_path.read_text())
    assert data["vars"]["host_key_policy"] == "strict"
    assert data["vars"]["known_hosts"] == str(harness.known_hosts_path)
    for name, host in harness.hosts.items():
        entry = data["hosts"][name]
        assert (entry["host"], entry["port"], entry["user"]) == ("127.0.0.1", host.port, host.user)


def test_unknown_host_key_is_refused(harness, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    target = harness.hosts["cloud"].target(harness.key.path, empty)
    with pytest.raises(ssh.SshError, match="not found in known_hosts|Server"):
        ssh.run(target, "true", timeout=10)


def test_changed_host_key_is_refused_then_healed(harness):
    with faults.host_key_changed(harness.hosts["pi"]) as new_key:
        assert new_key not in harness.known_hosts_path.read_text()
        with pytest.raises(ssh.SshError):
            harness.ssh("pi", "true", timeout=10)
    assert harness.ssh("pi", "id -un").stdout.strip() == "administrator"


def test_stopped_sshd_keeps_host_up_and_heals(harness):
    host = harness.hosts["edge-1"]
    host.exec_ok("sleep 300 >/dev/null 2>&1 & echo $! > /tmp/sleeper", user=host.user)
    with faults.sshd_stopped(host):
        assert host.status() == "running"
        with pytest.raises(ssh.SshError):
            harness.ssh("edge-1", "true", timeout=5)
        assert host.exec("kill -0 $(cat /tmp/sleeper)").ok, "other processes must survive"
    assert harness.ssh("edge-1", "echo back").stdout.strip() == "back"


def test_paused_host_fails_within_the_deadline_then_heals(harness):
    with faults.paused(harness.hosts["cloud"]):
        with pytest.raises(ssh.SshError):  # by its timeout: the host answers nothing
            harness.ssh("cloud", "true", timeout=4)
        assert harness.ssh("pi", "true").ok, "other hosts are unaffected"
    assert harness.ssh("cloud", "true").ok


def test_killed_host_restarts_on_the_same_port_and_key(fresh_fleet):
    run = fresh_fleet([hosts.HostSpec("edge-9", "opc")])
    host = run.hosts["edge-9"]
    port, key = host.port, host.host_key
    run.ssh("edge-9", "echo kept > ~/.openclaw/marker")
    host.container.kill()
    run.restart_host(host)
    assert (host.port, host.host_key) == (port, key)
    assert run.ssh("edge-9", "cat ~/.openclaw/marker").stdout.strip() == "kept"


def test_full_state_dir_refuses_writes_then_heals(fresh_fleet):
    run = fresh_fleet([hosts.HostSpec("edge-8", "opc", state_tmpfs_mb=8)])
    write = "head -c 200000 /dev/zero > ~/.openclaw/probe && rm ~/.openclaw/probe"
    with faults.disk_full(run.hosts["edge-8"]) as free_kb:
        assert free_kb < 64
        result = run.ssh("edge-8", write)
        assert not result.ok and "No space left" in result.stderr
    assert run.ssh("edge-8", write).ok


def test_image_is_reused_when_inputs_are_unchanged(docker_engine, harness):
    build = image.ensure_image(docker_engine)
    assert build.tag == harness.image_tag
    assert not build.built_rootfs and not build.built_layer


def test_stale_runs_are_swept_and_runs_removed_by_id(docker_engine, harness, tmp_path):
    dead = Harness(docker_engine, tmp_path / "dead", owner_pid=2**22 + 12345,
                   images=harness.images)
    dead.directory.mkdir()
    from lab.harness.keys import generate_key

    dead.key = generate_key(dead.directory)
    labels = cleanup.run_labels(dead.run_id, dead.owner_pid)
    host = hosts.create_host(docker_engine, harness.image_tag, hosts.HostSpec("ghost", "opc"),
                             labels, dead.key.public, dead.name_prefix)
    try:
        swept = cleanup.sweep_stale(docker_engine)
        assert host.container.name in swept
        mine = docker_engine.containers.list(
            filters={"label": f"{cleanup.RUN_ID}={harness.run_id}"})
        assert len(mine) == 3, "the live session's hosts must survive the sweep"
    finally:
        cleanup.remove_run(docker_engine, dead.run_id)


def test_harness_tasks_bring_up_report_and_remove_a_fleet(docker_engine, tmp_path):
    import json
    import subprocess
    import sys

    from integration_helpers import REPO

    def task(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "invoke", "-r", str(REPO), *args,
                               "--dir", str(tmp_path / "h")], capture_output=True, text=True,
                              timeout=300, cwd=REPO)

    up = task("harness.up", "--count", "2")
    assert up.returncode == 0, up.stderr
    inventory = tmp_path / "h" / "inventory.yaml"
    assert up.stdout.strip().splitlines()[-1] == str(inventory)
    try:
        status = task("harness.status", "--json")
        rows = [r for r in json.loads(status.stdout)["containers"] if r["here"]]
        assert sorted(r["host"] for r in rows) == ["cloud", "pi"]
        assert all(r["state"] == "running" and r["ssh"] and r["kept"] for r in rows)
        swept = cleanup.sweep_stale(docker_engine)
        run_id = json.loads((tmp_path / "h" / "harness.json").read_text())["run_id"]
        assert not [n for n in swept if run_id in n], "harness.up runs survive sweeps"
    finally:
        down = task("harness.down")
    assert down.returncode == 0 and "removed 2 container(s)" in down.stdout
    assert not inventory.exists()
    status = task("harness.status", "--json")
    assert not [r for r in json.loads(status.stdout)["containers"] if r["here"]]


def test_a_host_can_get_a_cpu_of_its_own_and_back(harness):
    """The benchmarks' "own CPU" mode: the host itself sees the CFS quota, and it is lifted."""
    host = harness.hosts["pi"]
    show = ("cat /sys/fs/cgroup/cpu.max 2>/dev/null || "
            "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us")
    try:
        hosts.limit_cpu(host.container, 0.25)
        assert harness.ssh("pi", show).stdout.split() == ["25000", "100000"]
    finally:
        hosts.limit_cpu(host.container, None)
    assert harness.ssh("pi", show).stdout.split()[0] in ("max", "-1")
    with pytest.raises(ValueError, match="positive number of cores"):
        hosts.limit_cpu(host.container, 0)
