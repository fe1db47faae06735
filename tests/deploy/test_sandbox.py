"""Sandbox end to end: three local hosts, the real installer and gateway, via fleet.deploy.api."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from deploy_helpers import release_of

HOSTS = ("a", "b", "c")


def pids(sandbox) -> dict:
    return {h: (sandbox.health(h) or {}).get("pid") for h in HOSTS}


def test_deploy_then_status_shows_versions_everywhere(sandbox, artifacts):
    base = artifacts()
    results = sandbox.deploy(base)
    assert {h: r.result for h, r in results.items()} == dict.fromkeys(HOSTS, "installed")
    assert all(r.ok for r in results.values())
    status = sandbox.run("status")
    for host in HOSTS:
        data = status[host].data
        assert data["current"]["release"] == release_of(base)
        assert data["ready"] is True
        assert data["gateway"]["versions"]["memory-continuity"] == base.version
        assert data["gateway"]["pid"] == sandbox.health(host)["pid"]
        assert data["last_audit"]["result"] == "installed"
        assert sandbox.current(host) == release_of(base)


def test_second_deploy_changes_nothing_and_restarts_nothing(sandbox, artifacts):
    base = artifacts()
    sandbox.deploy(base)
    before = pids(sandbox)
    again = sandbox.deploy(base)
    assert {h: r.result for h, r in again.items()} == dict.fromkeys(HOSTS, "unchanged")
    assert all(r.ok and r.data["uploaded"] is False for r in again.values())
    assert all(not r.data["restarted"] for r in again.values())
    assert pids(sandbox) == before and None not in before.values()


def test_upgrade_switches_all_three(sandbox, artifacts):
    base, bumped = artifacts(), artifacts(bump="5.0.1")
    sandbox.deploy(base)
    before = pids(sandbox)
    results = sandbox.deploy(bumped)
    for host in HOSTS:
        assert results[host].result == "installed", results[host].note
        assert results[host].from_release["release"] == release_of(base)
        assert sandbox.current(host) == release_of(bumped)
        health = sandbox.health(host)
        assert health["versions"]["memory-continuity"] == "5.0.1"
        assert health["pid"] != before[host]
        ext = sandbox.state(host) / "extensions" / "memory-continuity"
        assert Path(os.path.realpath(ext)).parent.parent.parent.name == release_of(bumped)


def test_release_failing_on_import_is_rolled_back_everywhere(sandbox, artifacts):
    base, broken = artifacts(), artifacts(bump="5.0.2", broken=True)
    sandbox.deploy(base)
    results = sandbox.deploy(broken)
    for host in HOSTS:
        res = results[host]
        assert res.result == "rolled_back" and not res.ok
        assert "broken release" in res.note or "memory-continuity" in res.note, res.note
        assert res.to_release["release"] == release_of(base)
        assert sandbox.current(host) == release_of(base)
        health = sandbox.health(host)
        assert health["versions"]["memory-continuity"] == base.version
        assert health["plugins"]["memory-continuity"]["loaded"] is True
        assert sandbox.audit(host)[-1]["result"] == "rolled_back"


def test_second_concurrent_deploy_is_refused_naming_the_holder(sandbox, artifacts):
    base, bumped = artifacts(), artifacts(bump="5.0.1")
    sandbox.deploy(base, hosts="a")
    hold = sandbox.fault("a", "verify", "hold")
    first = {}
    thread = threading.Thread(target=lambda: first.update(
        sandbox.deploy(bumped, hosts="a", owner="first@ci")))
    thread.start()
    lock = sandbox.state("a") / "fleet" / "deploy.lock"
    deadline = time.monotonic() + 30
    while not lock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = sandbox.deploy(bumped, hosts="a", owner="second@ci")["a"]
    hold.unlink()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert second.result == "refused" and not second.ok
    assert "first@ci" in second.note and "pid" in second.note
    assert first["a"].result == "installed"
    assert sandbox.current("a") == release_of(bumped)


def test_lock_left_by_killed_installer_is_taken_over(sandbox, artifacts):
    base, bumped = artifacts(), artifacts(bump="5.0.1")
    sandbox.deploy(base, hosts="a")
    kill = sandbox.fault("a", "verify", "kill")
    killed = sandbox.deploy(bumped, hosts="a")["a"]
    assert killed.result == "failed" and not killed.ok
    assert (sandbox.state("a") / "fleet" / "deploy.lock").exists()
    kill.unlink()
    again = sandbox.deploy(bumped, hosts="a")["a"]
    assert again.result == "installed", again.note
    assert "gone" in again.data["lock_takeover"]["reason"]
    assert "took over a stale lock" in again.note


@pytest.mark.parametrize("step", ["lock", "verify", "unpack", "switch", "restart", "ready",
                                  "selftest", "audit", "prune"])
def test_kill_at_each_step_leaves_old_or_new_and_next_deploy_converges(sandbox, artifacts, step):
    base, bumped = artifacts(), artifacts(bump="5.0.1")
    sandbox.deploy(base, hosts="a")
    fault = sandbox.fault("a", step, "kill")
    killed = sandbox.deploy(bumped, hosts="a")["a"]
    assert not killed.ok
    state = sandbox.state("a")
    current = sandbox.current("a")
    assert current in (release_of(base), release_of(bumped))
    release_dir = state / "fleet" / "releases" / current
    assert (release_dir / "fleet_release.json").is_file()  # complete, never half unpacked
    for plugin in ("memory-continuity", "mc"):  # every plugin link resolves into current
        target = Path(os.path.realpath(state / "extensions" / plugin))
        assert target.is_relative_to(release_dir.resolve()), (plugin, target)
    fault.unlink()
    again = sandbox.deploy(bumped, hosts="a")["a"]
    assert again.ok and again.result in ("installed", "restarted", "unchanged"), again.note
    assert sandbox.current("a") == release_of(bumped)
    assert sandbox.health("a")["versions"]["memory-continuity"] == "5.0.1"


def test_rollback_and_restart_tasks(sandbox, artifacts):
    base, bumped = artifacts(), artifacts(bump="5.0.1")
    sandbox.deploy(base)
    sandbox.deploy(bumped)
    back = sandbox.run("rollback")
    for host in HOSTS:
        assert back[host].result == "rolled_back" and back[host].ok, back[host].note
        assert sandbox.current(host) == release_of(base)
        assert sandbox.health(host)["versions"]["memory-continuity"] == base.version
    forward = sandbox.run("rollback", hosts="b", to="5.0.1")["b"]
    assert forward.ok and sandbox.current("b") == release_of(bumped)
    before = sandbox.health("c")["pid"]
    restarted = sandbox.run("restart", hosts="c")["c"]
    assert restarted.result == "restarted" and restarted.ok
    assert sandbox.health("c")["pid"] != before
    assert sandbox.current("c") == release_of(base)
    assert [e["action"] for e in sandbox.audit("c")] == ["install", "install", "rollback",
                                                         "restart"]


def test_dry_run_plans_and_changes_nothing(sandbox, artifacts):
    base, bumped = artifacts(), artifacts(bump="5.0.1")
    sandbox.deploy(base, hosts="a,b")
    before = pids(sandbox)
    audit_before = {h: len(sandbox.audit(h)) for h in HOSTS}
    plans = sandbox.deploy(bumped, dry_run=True)
    for host in ("a", "b"):
        plan = plans[host].data["plan"]
        assert plans[host].result == "planned" and plan["action"] == "install"
        assert plan["current"] == release_of(base) and plan["upload"] is True
    assert plans["c"].data["plan"]["current"] is None
    assert not sandbox.state("c").exists()  # not even a directory was created
    assert pids(sandbox) == before
    assert {h: len(sandbox.audit(h)) for h in HOSTS} == audit_before
    for host in HOSTS:
        assert not (sandbox.state(host) / "fleet" / "artifacts" / f"{bumped.sha256}.pyz").exists()
        assert sandbox.current(host) in (release_of(base), None)


def test_manual_plugin_directory_is_moved_aside_not_deleted(sandbox, artifacts):
    manual = sandbox.state("a") / "extensions" / "memory-continuity"
    manual.mkdir(parents=True)
    (manual / "index.ts").write_text("// hand-copied by scp\n")
    res = sandbox.deploy(artifacts(), hosts="a")["a"]
    assert res.ok and "moved manual install" in res.note
    assert manual.is_symlink()
    aside = list((sandbox.state("a") / "fleet" / "manual-extensions").glob("memory-continuity-*"))
    assert len(aside) == 1 and (aside[0] / "index.ts").read_text() == "// hand-copied by scp\n"


def test_same_versions_different_build_is_switched_and_restarted(sandbox, artifacts):
    base, rebuilt = artifacts(), artifacts(rebuild="1")
    assert base.version == rebuilt.version and base.sha256 != rebuilt.sha256
    sandbox.deploy(base, hosts="a")
    before = sandbox.health("a")["pid"]
    res = sandbox.deploy(rebuilt, hosts="a")["a"]
    assert res.result == "installed", res.note
    health = sandbox.health("a")
    assert health["pid"] != before and health["release"] == release_of(rebuilt)


def test_status_highlights_the_host_that_drifted(sandbox, artifacts):
    from rich.console import Console

    from fleet.deploy.report import status_table

    base, bumped = artifacts(), artifacts(bump="5.0.1")
    sandbox.deploy(base, hosts="a,b")
    sandbox.deploy(bumped, hosts="c")
    results = list(sandbox.run("status").values())
    console = Console(record=True, width=250)
    console.print(status_table(results))
    rows = {line.split("│")[1].strip(): line for line in console.export_text().splitlines()
            if line.startswith("│") and line.split("│")[1].strip() in HOSTS}
    assert "drift" in rows["c"] and release_of(bumped) in rows["c"]
    assert "drift" not in rows["a"] and "drift" not in rows["b"]


def test_corrupt_artifact_on_the_host_is_uploaded_again(sandbox, artifacts):
    base, bumped = artifacts(), artifacts(bump="5.0.1")
    sandbox.deploy(base, hosts="a")
    stored = sandbox.state("a") / "fleet" / "artifacts" / f"{bumped.sha256}.pyz"
    stored.write_bytes(bumped.path.read_bytes()[:1000])  # a torn earlier upload
    res = sandbox.deploy(bumped, hosts="a")["a"]
    assert res.result == "installed" and res.data["uploaded"] is True, res.note
    assert stored.read_bytes() == bumped.path.read_bytes()


def test_rolling_batches_stop_after_a_failed_batch_and_leave_the_rest_alone(sandbox, artifacts):
    from fleet.deploy.runner import RunOptions

    base, broken = artifacts(), artifacts(bump="5.0.2", broken=True)
    sandbox.deploy(base)
    before = pids(sandbox)
    results = sandbox.deploy(broken, options=RunOptions(parallel=3, batch="1"))
    assert [results[h].result for h in HOSTS] == ["rolled_back", "skipped", "skipped"]
    assert "budget" in results["b"].note
    assert {h: sandbox.current(h) for h in HOSTS} == dict.fromkeys(HOSTS, release_of(base))
    assert pids(sandbox)["b"] == before["b"] and pids(sandbox)["c"] == before["c"]


def test_two_runs_of_different_releases_never_leave_a_mixed_fleet(sandbox, artifacts):
    """Run A is held on host a (b and c already switched); run B (another release, all hosts) is
    refused as a whole, naming A, before it changes any host; A then finishes: one release."""
    base, one, two = artifacts(), artifacts(bump="5.0.1"), artifacts(bump="5.0.2")
    sandbox.deploy(base)
    hold = sandbox.fault("a", "verify", "hold")
    first = {}
    thread = threading.Thread(target=lambda: first.update(sandbox.deploy(one, owner="first@ci")))
    thread.start()
    held = sandbox.state("a") / "fleet" / "faults" / "verify.held"
    deadline = time.monotonic() + 120
    while not (held.exists() and sandbox.current("b") == sandbox.current("c") == release_of(one)
               and not (sandbox.state("b") / "fleet" / "deploy.lock").exists()
               and not (sandbox.state("c") / "fleet" / "deploy.lock").exists()) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        second = sandbox.deploy(two, owner="second@ci")
    finally:
        hold.unlink()
        thread.join(timeout=120)
    assert all(r.result == "refused" and not r.ok for r in second.values()), second
    assert all("first@ci" in r.note for r in second.values())
    assert all(first[h].result == "installed" for h in "abc"), first
    assert {sandbox.current(h) for h in "abc"} == {release_of(one)}
    assert not (sandbox.state("b") / "fleet" / "run.lease").exists()  # released after the run


def test_a_crashed_runs_lease_expires_and_the_token_never_shows(sandbox, artifacts):
    import json as _json

    base = artifacts()
    lease_file = sandbox.state("b") / "fleet" / "run.lease"
    lease_file.parent.mkdir(parents=True, exist_ok=True)
    secret = "f" * 32
    live = {"owner": "ghost@ci", "pid": 1, "from": "ctl", "lease": 900, "run": secret,
            "time": time.time()}
    lease_file.write_text(_json.dumps(live))
    refused = sandbox.deploy(base)
    assert all(r.result == "refused" for r in refused.values())
    assert "ghost@ci" in refused["b"].note and secret not in repr(refused)
    assert sandbox.current("a") is None and sandbox.current("c") is None
    lease_file.write_text(_json.dumps(dict(live, time=time.time() - 901)))
    done = sandbox.deploy(base)
    assert all(r.result == "installed" for r in done.values()), done


def test_a_lease_left_by_a_dead_run_of_this_machine_is_taken_over_at_once(sandbox, artifacts):
    """A run whose release never reached a host (the host was down or killed at the time) left
    its lease there; its process on this machine is gone, so the next run need not wait."""
    import json as _json
    import socket
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    lease_file = sandbox.state("b") / "fleet" / "run.lease"
    lease_file.parent.mkdir(parents=True, exist_ok=True)
    lease_file.write_text(_json.dumps({"owner": "crashed@ci", "pid": gone.pid,
                                       "from": socket.gethostname(), "lease": 900,
                                       "run": "e" * 32, "time": time.time()}))
    done = sandbox.deploy(artifacts())
    assert all(r.result == "installed" for r in done.values()), done
    assert not lease_file.exists()
