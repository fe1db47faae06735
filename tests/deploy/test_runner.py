"""The runner: bounded pool, rolling batches with a failure budget, per-host deadlines."""

from __future__ import annotations

import threading
import time

import pytest

from fleet.deploy.inventory import Host
from fleet.deploy.runner import HostResult, RunOptions, parse_count, run

HOSTS = [Host(name=f"h{i}", connection="local") for i in range(6)]


def noop(*_):
    return None


def worker(fail=(), hang=(), sleep=0.0, log=None, active=None, gate=None):
    """A host's work: `hang` hosts block until `gate` is set (so a test can tell whether the
    run waited for them), `fail` hosts raise."""
    lock = threading.Lock()

    def work(host, progress):
        progress("working", "")
        if log is not None:
            with lock:
                log.append(host.name)
        if active is not None:
            with lock:
                active["now"] += 1
                active["max"] = max(active["max"], active["now"])
        try:
            if host.name in hang:
                gate.wait(60)
            time.sleep(sleep)
            if host.name in fail:
                raise RuntimeError(f"{host.name} broke")
            return HostResult(host.name, "installed", True)
        finally:
            if active is not None:
                with lock:
                    active["now"] -= 1

    return work


def by_name(results):
    return {r.host: r for r in results}


def test_one_failure_does_not_stop_the_others():
    results = by_name(run(HOSTS, worker(fail={"h1"}), noop, RunOptions(parallel=3)))
    assert results["h1"].result == "failed" and "h1 broke" in results["h1"].note
    assert all(results[h.name].ok for h in HOSTS if h.name != "h1")


def test_pool_is_bounded():
    active = {"now": 0, "max": 0}
    run(HOSTS, worker(sleep=0.1, active=active), noop, RunOptions(parallel=2))
    assert active["max"] == 2


def test_rolling_batches_stop_when_budget_spent():
    log = []
    results = by_name(run(HOSTS, worker(fail={"h0"}, log=log), noop,
                          RunOptions(parallel=4, batch="2")))
    assert sorted(log) == ["h0", "h1"]  # first batch only; default budget with --batch is 0
    assert [results[f"h{i}"].result for i in range(2, 6)] == ["skipped"] * 4
    assert "budget" in results["h2"].note


def test_batches_continue_within_budget_and_percentages():
    log = []
    results = run(HOSTS, worker(fail={"h0"}, log=log), noop,
                  RunOptions(parallel=1, batch="50%", max_fail="1"))
    assert sorted(log) == [h.name for h in HOSTS]
    assert [r.ok for r in results] == [False, True, True, True, True, True]


def test_budget_without_batches_skips_hosts_not_started():
    results = run(HOSTS, worker(fail={"h0", "h1"}, sleep=0.05), noop,
                  RunOptions(parallel=1, max_fail="1"))
    assert [r.result for r in results][:2] == ["failed", "failed"]
    assert {r.result for r in results[2:]} == {"skipped"}


def test_hung_host_fails_by_its_deadline_without_blocking_others():
    gate = threading.Event()
    try:
        # had the run waited for h1, h1 would have waited out its gate and been "installed"
        results = by_name(run(HOSTS[:3], worker(hang={"h1"}, gate=gate), noop,
                              RunOptions(parallel=3, deadline=lambda host: 0.5)))
    finally:
        gate.set()
    assert results["h1"].result == "failed" and "deadline exceeded" in results["h1"].note
    assert results["h0"].ok and results["h2"].ok


def test_progress_reports_each_host():
    seen = []
    run(HOSTS[:2], worker(), lambda host, step, note: seen.append((host, step)), RunOptions())
    assert ("h0", "working") in seen and ("h1", "installed") in seen


@pytest.mark.parametrize("value, total, expected", [
    ("2", 6, 2), ("50%", 6, 3), ("10%", 6, 1), ("100%", 3, 3), (None, 5, None), (0, 4, 0)])
def test_parse_count(value, total, expected):
    assert parse_count(value, total, "--batch") == expected


@pytest.mark.parametrize("value", ["x", "-1", "0%", "150%"])
def test_parse_count_rejects_with_the_flag_named(value):
    with pytest.raises(ValueError, match="--batch"):
        parse_count(value, 4, "--batch")


def test_ctrl_c_reports_unfinished_hosts_without_waiting_for_them():
    def progress(host, step, note):
        if step == "installed" and threading.current_thread() is threading.main_thread():
            raise KeyboardInterrupt

    gate = threading.Event()
    try:
        results = by_name(run(HOSTS[:3], worker(hang={"h1", "h2"}, gate=gate), progress,
                              RunOptions(parallel=3)))
    finally:
        gate.set()  # released only after run() returned: it did not wait for h1 and h2
    assert results["h0"].result == "installed"
    assert results["h1"].result == "interrupted" and "fleet status -H h1" in results["h1"].note


def test_local_command_timeout_is_bounded_and_named():
    from fleet.deploy.connection import ConnectionError_, LocalConnection

    conn = LocalConnection(Host(name="slowbox", connection="local"))
    with pytest.raises(ConnectionError_, match="slowbox: command timed out after 1s"):
        conn.run("sleep 30", timeout=1)
