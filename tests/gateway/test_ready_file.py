"""run/ready.json: written once by a ready gateway, removed when it stops, never someone else's."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from gateway_helpers import RECORDER, REPO, call, run_cli, write_plugin

from fleet.gateway import daemon, process
from fleet.gateway.layout import Layout


def init_with(tmp_path: Path, state: Path, **plugins: str) -> None:
    src = tmp_path / "plugins"
    for pid, code in plugins.items():
        write_plugin(src, pid, code, version="2.0.0")
    res = run_cli(state, "init", "--link-plugins-from", str(src))
    assert res.returncode == 0, res.stderr


def ready_file(state: Path) -> Path:
    return Layout(state).ready_file


def read_ready(state: Path) -> dict:
    text = ready_file(state).read_text()
    assert text.endswith("\n") and text.count("\n") == 1, text  # one line
    return json.loads(text)


def start(state: Path, gateways, *extra: str) -> int:
    res = run_cli(state, "start", "--json", *extra)
    assert res.returncode == 0, res.stdout + res.stderr
    gateways.append(state)
    return json.loads(res.stdout)["pid"]


def wait_gone(state: Path, pid: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:  # reap it if it is our child
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} still alive")


def test_started_gateway_writes_ready_file_and_stop_removes_it(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    pid = start(state, gateways)
    rec = read_ready(state)
    assert rec["pid"] == pid and rec["ready"] is True
    assert rec["release"] == REPO.resolve().name  # the dir holding `fleet/`
    assert rec["sha256"] is None  # a checkout, not an installed release
    assert rec["versions"] == {"recorder": "2.0.0"}
    # one line of sorted JSON, written whole (what the deploy's lease take reads)
    assert ready_file(state).read_text() == json.dumps(rec, sort_keys=True) + "\n"
    assert not [p for p in ready_file(state).parent.iterdir()
                if ".fleet-tmp." in p.name or p.name.endswith(".tmp")]
    res = run_cli(state, "stop")
    assert res.returncode == 0, res.stderr
    assert not ready_file(state).exists()


def test_shutdown_request_removes_ready_file(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    pid = start(state, gateways)
    assert read_ready(state)["pid"] == pid
    call(state, "shutdown")
    wait_gone(state, pid)
    assert not ready_file(state).exists()


def test_gateway_whose_plugin_fails_writes_no_ready_file(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER, broken="raise RuntimeError('broken')\n")
    # a stale file from some earlier gateway must go too, not only "none written"
    ready_file(state).write_text(json.dumps({"pid": 999999, "ready": True}) + "\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleet.gateway", "--state-dir", str(state), "run"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=str(REPO))
    try:
        deadline = time.monotonic() + 20
        health = None
        while time.monotonic() < deadline and proc.poll() is None:
            if (state / "run" / "gateway.sock").exists():
                resp = call(state, "health")
                if resp["ok"]:
                    health = resp["result"]
                    break
            time.sleep(0.05)
        assert health is not None and health["pid"] == proc.pid
        assert health["ready"] is False
        assert not ready_file(state).exists()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert not ready_file(state).exists()


def test_stale_file_of_a_killed_gateway_is_replaced_by_the_next_start(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    old = start(state, gateways)
    os.kill(old, signal.SIGKILL)
    wait_gone(state, old)
    assert read_ready(state)["pid"] == old  # a SIGKILL leaves it behind: the pid check covers it
    new = start(state, gateways)
    assert new != old and read_ready(state)["pid"] == new


def test_stale_file_goes_when_next_gateway_is_not_ready(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    old = start(state, gateways)
    os.kill(old, signal.SIGKILL)
    wait_gone(state, old)
    write_plugin(tmp_path / "plugins", "recorder", "raise RuntimeError('now broken')\n")
    res = run_cli(state, "start")
    assert res.returncode == 1 and "plugin load failed" in res.stderr
    assert not ready_file(state).exists()


def test_sigkill_by_stop_removes_the_ready_file(tmp_path, state, gateways):
    stubborn = ("import signal\n"
                "def register(api):\n"
                "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n")
    init_with(tmp_path, state, stubborn=stubborn)
    pid = start(state, gateways)
    assert read_ready(state)["pid"] == pid
    res = run_cli(state, "stop", "--timeout", "0.3")
    assert res.stdout.strip() == f"gateway pid {pid} stopped (killed)"
    assert not ready_file(state).exists()


def test_stopping_gateway_leaves_a_file_naming_another_pid(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    pid = start(state, gateways)
    other = json.dumps({"pid": pid + 100000, "ready": True, "release": "x"}, sort_keys=True)
    ready_file(state).write_text(other + "\n")  # e.g. a successor's, written after ours
    assert run_cli(state, "stop").returncode == 0
    assert ready_file(state).read_text() == other + "\n"
    # nor does the clean-up after a SIGKILL, which goes by the killed pid
    process.clean_after_kill(Layout(state), pid)
    assert ready_file(state).read_text() == other + "\n"


def _release(tmp_path: Path, components: dict, plugins: dict) -> Path:
    rel = tmp_path / "releases" / "1.0.0-abcdef012345"
    (rel / "fleet").mkdir(parents=True)
    meta = {"sha256": "ab" * 32, "version": "1.0.0", "components": components, "plugins": plugins}
    (rel / "fleet_release.json").write_text(json.dumps(meta, sort_keys=True))
    return rel


def test_ready_record_checks_the_release_versions(tmp_path):
    rel = _release(tmp_path, {"recorder": "2.0.0", "fleet": "1.0.0"}, {"recorder": "recorder"})
    health = {"ready": True, "versions": {"recorder": "2.0.0"}, "release": rel.name,
              "releaseRoot": str(rel), "started_at": "t"}
    rec, why = daemon.ready_record(health)
    assert why == "" and rec is not None
    assert rec["sha256"] == "ab" * 32 and rec["release"] == "1.0.0-abcdef012345"
    rec, why = daemon.ready_record(dict(health, versions={"recorder": "1.9.0"}))
    assert rec is None and "recorder is 1.9.0 (want 2.0.0)" in why
    rec, why = daemon.ready_record(dict(health, versions={}))
    assert rec is None and "not loaded" in why
    rec, why = daemon.ready_record(dict(health, ready=False, error="boom"))
    assert rec is None and "boom" in why
    shutil.rmtree(rel)
    rec, _ = daemon.ready_record(dict(health, versions={}))
    assert rec is not None and rec["sha256"] is None  # no fleet_release.json: a checkout
