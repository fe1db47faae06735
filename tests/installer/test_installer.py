"""The host-side installer run directly (as the control side does), with a stand-in gateway.

The `command` manager drives tests/support/fakegw.py, so these tests exercise the installer's own
rules (hash check, lock lease, pruning, first-install failure, Python 3.9) quickly.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deploy_helpers import FAKEGW, release_of, run_installer


def find_python39() -> str | None:
    """A working Python 3.9 (the oldest host Python we support), if this machine has one."""
    candidates = [shutil.which("python3.9"),
                  *sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.9*/bin/python3"))]
    for candidate in filter(None, candidates):
        try:
            out = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.strip() == "(3, 9)":
            return candidate
    return None


PY39 = find_python39()


def install(art, state, manager_args, *extra, python=None):
    args = ["install", "--state-dir", str(state), "--sha256", art.sha256, "--timeout", "20",
            *manager_args, *extra]
    return run_installer(art.path, *args, **({"python": python} if python else {}))


def current(state: Path) -> str | None:
    link = state / "fleet" / "current"
    return os.readlink(link).split("/")[-1] if link.is_symlink() else None


def test_version_prints_the_embedded_manifest(artifacts):
    art = artifacts()
    code, data = run_installer(art.path, "--version")
    assert code == 0 and data["version"] == art.version
    assert data["components"]["memory-continuity"] == art.version


def test_wrong_sha256_is_refused_before_anything_changes(artifacts, host_states,
                                                         fake_manager_args):
    art, state = artifacts(), host_states[0]
    code, data = run_installer(art.path, "install", "--state-dir", str(state), "--sha256",
                               "0" * 64, *fake_manager_args)
    assert code == 1 and data["result"] == "failed"
    assert "SHA-256" in data["reason"] and art.sha256 in data["reason"]
    assert not (state / "fleet" / "releases").exists() and current(state) is None
    assert not (state / "fleet" / "deploy.lock").exists()


def test_command_manager_install_then_unchanged(artifacts, host_states, fake_manager_args):
    art, state = artifacts(), host_states[0]
    code, first = install(art, state, fake_manager_args)
    assert code == 0 and first["result"] == "installed", first
    assert set(first["steps"]) >= {"lock", "verify", "unpack", "switch", "restart", "ready",
                                   "audit", "prune"}
    assert first["gateway"]["versions"]["memory-continuity"] == art.version
    code, second = install(art, state, fake_manager_args)
    assert code == 0 and second["result"] == "unchanged" and not second["restarted"]
    assert second["gateway"]["pid"] == first["gateway"]["pid"]
    code, forced = install(art, state, fake_manager_args, "--force")
    assert forced["result"] == "restarted"  # same release: a restart, not an install
    assert forced["gateway"]["pid"] != first["gateway"]["pid"]


def test_prune_keeps_newest_and_never_active_or_previous(artifacts, host_states,
                                                         fake_manager_args):
    state = host_states[0]
    builds = [artifacts(), artifacts(bump="5.0.1"), artifacts(bump="5.0.3")]
    for art in builds:
        code, data = install(art, state, fake_manager_args, "--keep", "2")
        assert code == 0, data
    assert data["pruned"] == [release_of(builds[0])]
    left = sorted(p.name for p in (state / "fleet" / "releases").iterdir())
    assert left == sorted([release_of(builds[1]), release_of(builds[2])])
    assert current(state) == release_of(builds[2])
    assert os.readlink(state / "fleet" / "previous").endswith(release_of(builds[1]))
    assert not (state / "fleet" / "artifacts" / f"{builds[0].sha256}.pyz").exists()


def write_lock(state: Path, **fields) -> None:
    lock = {"owner": "ops@laptop", "pid": os.getpid(), "host": socket.gethostname(),
            "time": time.time(), "lease": 900}
    lock.update(fields)
    (state / "fleet").mkdir(parents=True, exist_ok=True)
    (state / "fleet" / "deploy.lock").write_text(json.dumps(lock))


def test_live_lock_holder_is_named_in_the_refusal(artifacts, host_states, fake_manager_args):
    art, state = artifacts(), host_states[0]
    write_lock(state)
    code, data = install(art, state, fake_manager_args)
    assert code == 1 and data["result"] == "refused"
    assert "ops@laptop" in data["reason"] and f"pid {os.getpid()}" in data["reason"]
    assert current(state) is None
    assert json.loads((state / "fleet" / "deploy.lock").read_text())["owner"] == "ops@laptop"


def test_expired_lease_is_taken_over_and_reported(artifacts, host_states, fake_manager_args):
    art, state = artifacts(), host_states[0]
    write_lock(state, host="elsewhere", time=time.time() - 3600, lease=60)
    code, data = install(art, state, fake_manager_args)
    assert code == 0 and data["result"] == "installed"
    assert data["lock_takeover"]["owner"] == "ops@laptop"
    assert data["lock_takeover"]["reason"] == "lease expired"
    assert not (state / "fleet" / "deploy.lock").exists()


def test_injected_failure_at_ready_switches_back(artifacts, host_states, fake_manager_args):
    base, bumped, state = artifacts(), artifacts(bump="5.0.1"), host_states[0]
    install(base, state, fake_manager_args)
    (state / "fleet" / "faults").mkdir(parents=True)
    (state / "fleet" / "faults" / "ready").write_text("fail\n")
    code, data = install(bumped, state, fake_manager_args)
    assert code == 1 and data["result"] == "rolled_back"
    assert "injected fault at step 'ready'" in data["reason"]
    assert data["to"]["release"] == release_of(base) and current(state) == release_of(base)
    assert data["gateway"]["versions"]["memory-continuity"] == base.version


def test_an_installer_killed_after_its_switch_is_reconciled_by_the_next_run(
        artifacts, host_states, fake_manager_args):
    """kill -9 (a power cut) after the switch and restart, before the audit line: the host runs
    the new release, the log says the old one and the dead installer's lock stays. The next
    installer takes the lock over and records what the host runs before anything else."""
    base, bumped, state = artifacts(), artifacts(bump="5.0.1"), host_states[0]
    install(base, state, fake_manager_args)
    kill = state / "fleet" / "faults" / "audit"
    kill.parent.mkdir(parents=True)
    kill.write_text("kill\n")
    code, _ = install(bumped, state, fake_manager_args)
    assert code == -signal.SIGKILL
    assert current(state) == release_of(bumped)
    assert (state / "fleet" / "deploy.lock").exists()
    log = state / "fleet" / "audit.jsonl"
    assert json.loads(log.read_text().splitlines()[-1])["to"] == release_of(base)
    kill.unlink()
    code, data = install(bumped, state, fake_manager_args)
    assert code == 0 and data["result"] == "unchanged", data
    assert data["reconciled"] == {"from": release_of(base), "to": release_of(bumped)}
    assert "reason" in data["lock_takeover"]
    entries = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(e["action"], e["result"], e["to"]) for e in entries[-2:]] == [
        ("reconcile", "reconciled", release_of(bumped)),
        ("install", "unchanged", release_of(bumped))]
    assert not (state / "fleet" / "deploy.lock").exists()
    code, again = install(bumped, state, fake_manager_args)
    assert "reconciled" not in again  # agreed since: nothing more to record


def test_failed_first_install_leaves_no_release(artifacts, host_states, fake_manager_args):
    broken, state = artifacts(bump="5.0.2", broken=True), host_states[0]
    code, data = install(broken, state, fake_manager_args)
    assert code == 1 and data["result"] == "rolled_back" and data["to"] is None
    assert "broken release" in data["reason"]
    assert current(state) is None
    audit = [json.loads(x) for x in (state / "fleet" / "audit.jsonl").read_text().splitlines()]
    assert audit[-1]["result"] == "rolled_back" and audit[-1]["to"] is None


def test_rollback_with_nothing_to_go_back_to_says_so(artifacts, host_states, fake_manager_args):
    art, state = artifacts(), host_states[0]
    install(art, state, fake_manager_args)
    code, data = run_installer(art.path, "rollback", "--state-dir", str(state),
                               *fake_manager_args)
    assert code == 1 and "nothing to roll back to" in data["reason"]
    assert current(state) == release_of(art)


def test_rollback_to_names_exactly_one_release(artifacts, host_states, fake_manager_args):
    """Two builds of the same versions: `--to 5.0.0` is ambiguous (an error listing both, nothing
    changed), a 4-hex-digit SHA-256 prefix names one, and the current release is no rollback."""
    first, second = artifacts(), artifacts(rebuild="second build")
    state = host_states[0]
    assert first.version == second.version and first.sha256 != second.sha256
    install(first, state, fake_manager_args)
    install(second, state, fake_manager_args)

    def rollback(to):
        return run_installer(second.path, "rollback", "--state-dir", str(state), "--to", to,
                             *fake_manager_args)

    code, data = rollback(first.version)
    assert code == 1 and data["result"] == "failed"
    assert f"{first.version!r} names 2 releases" in data["reason"]
    for built in (first, second):
        assert f"{release_of(built)} (version {built.version}, sha256 {built.sha256[:12]}" \
            in data["reason"]
    assert f"{release_of(second)} (version {second.version}, sha256 {second.sha256[:12]}, " \
           "installed " in data["reason"] and ", current)" in data["reason"]
    assert current(state) == release_of(second)  # nothing changed

    code, data = rollback(first.sha256[:4])
    assert code == 0 and data["result"] == "rolled_back", data
    assert current(state) == release_of(first)

    code, data = rollback(release_of(first))
    assert code == 0 and data["result"] == "unchanged"
    assert data["from"] == data["to"] and not data["restarted"]
    assert f"{release_of(first)} is the current release already" in " ".join(data["notes"])

    code, data = rollback("abc")  # too short to be a SHA prefix, and no such version
    assert code == 1 and "a SHA-256 prefix of 4+ hex digits" in data["reason"]


@pytest.mark.skipif(PY39 is None, reason="python3.9 not installed")
def test_installer_runs_on_python_39(artifacts, host_states, fake_manager_args):
    art, state = artifacts(), host_states[0]
    code, data = install(art, state, fake_manager_args, python=PY39)
    assert code == 0 and data["result"] == "installed", data
    code, status = run_installer(art.path, "status", "--state-dir", str(state),
                                 *fake_manager_args, python=PY39)
    assert code == 0 and status["ready"] and status["current"]["release"] == release_of(art)


def test_dropped_connection_mid_install_still_completes_the_transaction(
        artifacts, host_states, fake_manager_args):
    """ssh gone (pipes closed, SIGHUP) while the installer works: it finishes and records it."""
    art, state = artifacts(), host_states[0]
    hold = state / "fleet" / "faults" / "verify"
    hold.parent.mkdir(parents=True)
    hold.write_text("hold")
    proc = subprocess.Popen([sys.executable, str(art.path), "install", "--state-dir", str(state),
                             "--sha256", art.sha256, *fake_manager_args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + 30
    while not (state / "fleet" / "deploy.lock").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.stdout.close()
    proc.stderr.close()
    os.killpg(proc.pid, signal.SIGHUP)
    hold.unlink()
    proc.wait(timeout=60)
    assert current(state) == release_of(art)
    audit = [json.loads(x) for x in (state / "fleet" / "audit.jsonl").read_text().splitlines()]
    assert audit[-1]["result"] == "installed"
    assert not (state / "fleet" / "deploy.lock").exists()


def test_lock_whose_pid_was_reused_by_another_process_is_taken_over(
        artifacts, host_states, fake_manager_args):
    """A killed installer's pid now names an unrelated live process: still a stale lock."""
    from fleet.continuity.detached import start_time

    if start_time(os.getpid()) is None:
        pytest.skip("no /proc on this system: liveness falls back to the pid and the lease")
    art, state = artifacts(), host_states[0]
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        write_lock(state, pid=sleeper.pid, start="1")  # started at tick 1: not this process
        code, data = install(art, state, fake_manager_args)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert code == 0 and data["result"] == "installed", data.get("reason")
    assert "another process" in data["lock_takeover"]["reason"]


def test_lock_from_before_a_reboot_is_taken_over(artifacts, host_states, fake_manager_args):
    from fleet.installer.lock import boot_id

    if boot_id() is None:
        pytest.skip("no boot id on this system")
    art, state = artifacts(), host_states[0]
    write_lock(state, boot_id="0" * 32)  # our own (live) pid, but recorded in an earlier boot
    code, data = install(art, state, fake_manager_args)
    assert code == 0 and "rebooted" in data["lock_takeover"]["reason"]


def test_corrupt_stored_artifact_is_refused_and_removed(artifacts, host_states,
                                                        fake_manager_args):
    art, state = artifacts(), host_states[0]
    stored = state / "fleet" / "artifacts" / f"{art.sha256}.pyz"
    stored.parent.mkdir(parents=True)
    stored.write_bytes(b"not the artifact")
    code, data = install(art, state, fake_manager_args, "--artifact", str(stored))
    assert code == 1 and "removed; the next deploy uploads it again" in data["reason"]
    assert not stored.exists() and current(state) is None


@pytest.mark.parametrize("manager, tool, opts, expected", [
    ("systemd", "systemctl", ["unit=gw.service"], "--user restart gw.service"),
    ("launchd", "launchctl", ["label=ai.test.gw"], f"kickstart -k gui/{os.getuid()}/ai.test.gw"),
])
def test_service_managers_restart_through_their_tool(artifacts, host_states, tmp_path, manager,
                                                     tool, opts, expected):
    """Each manager calls its supervisor's restart command (never pkill), then waits for health."""
    art, state = artifacts(), host_states[0]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / tool
    fake.write_text(f'#!/bin/sh\necho "$@" >> "$FLEET_STATE_DIR/{tool}.log"\n'
                    f'exec {sys.executable} {FAKEGW} restart "$FLEET_STATE_DIR"\n')
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    args = [sys.executable, str(art.path), "install", "--state-dir", str(state), "--sha256",
            art.sha256, "--manager", manager, "--timeout", "20"]
    for opt in opts:
        args += ["--manager-opt", opt]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and data["result"] == "installed", data
    assert (state / f"{tool}.log").read_text().strip() == expected
    assert data["gateway"]["versions"]["memory-continuity"] == art.version


def test_a_first_install_whose_plugin_fails_is_reported_at_once(artifacts, host_states):
    """No gateway answered before (no old pid to tell the new one by): a plugin's load error in
    the first answer is still final, not 'not yet' until the timeout."""
    broken, state = artifacts(bump="5.0.2", broken=True), host_states[0]
    code, data = run_installer(broken.path, "install", "--state-dir", str(state), "--sha256",
                               broken.sha256, "--timeout", "60", "--manager", "fleet")
    assert code != 0 and data["result"] == "rolled_back", data
    assert data["reason"].startswith("plugin load failed: ") and "broken release" in \
        data["reason"], data["reason"]
    assert "not ready within" not in data["reason"]
    assert current(state) is None


def test_a_release_whose_plugin_fails_rolls_back_without_waiting_for_the_timeout(
        artifacts, host_states):
    """The new gateway answers at once with the load error: that is final, not 'not yet'."""
    base, broken, state = artifacts(), artifacts(bump="5.0.2", broken=True), host_states[0]
    args = ["--manager", "fleet"]
    code, data = run_installer(base.path, "install", "--state-dir", str(state), "--sha256",
                               base.sha256, "--timeout", "60", *args)
    assert code == 0, data
    code, data = run_installer(broken.path, "install", "--state-dir", str(state), "--sha256",
                               broken.sha256, "--timeout", "60", *args)
    assert data["result"] == "rolled_back", data
    assert "broken release" in data["reason"] and "not ready within" not in data["reason"]
    assert data["steps"]["ready"] < 30, data["steps"]  # generous: the failure is immediate
    assert current(state) == release_of(base)
