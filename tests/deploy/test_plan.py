"""The dry-run plan mirrors the installer's decision from a host's status alone."""

from __future__ import annotations

from fleet.deploy.plan import plan_host
from fleet.installer.protocol import HostStatus

SHA = "ab" * 32
OTHER = "cd" * 32


def status(sha=None, ready=True, lock=None, free=10**9, problem=None):
    current = {"release": f"5.0.0-{sha[:12]}", "sha256": sha} if sha else None
    return HostStatus.from_dict({"current": current, "ready": ready, "lock": lock,
                                 "disk_free_bytes": free, "problem": problem})


def test_same_sha_ready_is_nothing_to_do():
    plan = plan_host("h", status(SHA), True, "5.0.0", SHA, 1000)
    assert plan.action == "nothing" and not plan.upload


def test_same_sha_not_ready_is_a_restart_and_force_too():
    plan = plan_host("h", status(SHA, ready=False, problem="gateway does not answer"), True,
                     "5.0.0", SHA, 1000)
    assert plan.action == "restart" and "gateway does not answer" in plan.describe()
    assert plan_host("h", status(SHA), True, "5.0.0", SHA, 1000, force=True).action == "restart"


def test_other_release_is_an_install_with_upload_when_missing():
    plan = plan_host("h", status(OTHER), False, "5.0.1", SHA, 1000)
    assert plan.action == "install" and plan.upload
    assert f"from 5.0.0-{OTHER[:12]}" in plan.describe() and "upload 1000 bytes" in plan.describe()
    assert not plan_host("h", status(OTHER), True, "5.0.1", SHA, 1000).upload


def test_live_lock_blocks_and_stale_lock_is_announced():
    live = {"owner": "ops@ci", "pid": 7, "host": "h", "stale": None}
    plan = plan_host("h", status(OTHER, lock=live), True, "5.0.1", SHA, 1000)
    assert plan.action == "blocked" and "ops@ci" in plan.describe()
    stale = dict(live, stale="owner process 7 is gone")
    plan = plan_host("h", status(OTHER, lock=stale), True, "5.0.1", SHA, 1000)
    assert plan.action == "install" and "stale lock" in plan.describe()


def test_low_disk_is_flagged():
    plan = plan_host("h", status(OTHER, free=2000), False, "5.0.1", SHA, 1000)
    assert "LOW DISK: 2000 bytes free" in plan.describe()
    assert "LOW DISK" not in plan_host("h", status(OTHER), False, "5.0.1", SHA, 1000).describe()
