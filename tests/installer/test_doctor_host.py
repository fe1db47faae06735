"""The host side of `invoke doctor` (fleet/installer/doctor.py): one test per host check."""

from __future__ import annotations

import json
import os
import socket
import time
from collections import namedtuple

import pytest

from fleet.continuity.doctor import exit_code, worst
from fleet.deploy.doctor import clock_check
from fleet.installer import doctor


def test_python_is_ok_here():
    assert doctor.check_python()["severity"] == "ok"


@pytest.mark.parametrize("free,severity", [(50 << 30, "ok"), (500 << 20, "warning"),
                                           (100 << 20, "critical")])
def test_disk_thresholds(tmp_path, monkeypatch, free, severity):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(doctor.shutil, "disk_usage", lambda p: usage(free * 2, free, free))
    assert doctor.check_disk(tmp_path)["severity"] == severity


@pytest.mark.parametrize("mode,severity", [(0o700, "ok"), (0o755, "info"), (0o770, "warning"),
                                           (0o777, "critical")])
def test_state_dir_permissions(tmp_path, mode, severity):
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(mode)
    found = doctor.check_state_dir(state)
    assert found["severity"] == severity
    if severity in ("warning", "critical"):
        assert f"chmod 700 {state}" in found["message"]


def test_missing_state_dir_is_critical(tmp_path):
    assert doctor.check_state_dir(tmp_path / "nope")["severity"] == "critical"


def status(ready=True, plugins=None, components=None, problem=None):
    return {"ready": ready, "problem": problem,
            "current": {"release": "5.0.0-abc", "components": components or {
                "memory-continuity": "5.0.0", "mc": "2.1.0", "fleet": "0.1.0"}},
            "gateway": {"plugins": plugins if plugins is not None else {
                "memory-continuity": {"version": "5.0.0", "loaded": True},
                "mc": {"version": "2.1.0", "loaded": True}}}}


def test_gateway_ready_and_every_plugin_loaded_at_its_version():
    found = doctor.check_gateway(status())
    assert [(f["check"], f["severity"]) for f in found] == [
        ("gateway", "ok"), ("plugin mc", "ok"), ("plugin memory-continuity", "ok")]


def test_gateway_down_wrong_version_and_failed_plugin():
    found = doctor.check_gateway(status(ready=False, problem="gateway not running",
                                        plugins={}))
    assert found == [{"check": "gateway", "severity": "critical",
                      "message": "not ready: gateway not running"}]
    found = {f["check"]: f for f in doctor.check_gateway(status(plugins={
        "memory-continuity": {"version": "4.9.0", "loaded": True},
        "mc": {"version": "2.1.0", "loaded": False, "error": "SyntaxError in plugin.py"}}))}
    assert found["plugin memory-continuity"]["severity"] == "warning"
    assert "4.9.0 loaded, the release ships 5.0.0" in found["plugin memory-continuity"]["message"]
    assert found["plugin mc"]["severity"] == "critical"
    assert "SyntaxError" in found["plugin mc"]["message"]


def test_no_release_is_critical():
    found = doctor.check_gateway({"ready": False, "current": None, "gateway": None})
    assert found[0]["severity"] == "critical" and "no release installed" in found[0]["message"]


def write_lock(state, **holder):
    path = state / "fleet" / "deploy.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(holder))


def test_deploy_lock_free_live_and_stale(tmp_path):
    assert doctor.check_lock(tmp_path)["severity"] == "ok"
    write_lock(tmp_path, owner="me", pid=os.getpid(), host=socket.gethostname(),
               time=time.time(), lease=900)
    assert doctor.check_lock(tmp_path)["severity"] == "info"
    write_lock(tmp_path, owner="me", pid=os.getpid(), host=socket.gethostname(),
               time=time.time() - 1000, lease=900)
    found = doctor.check_lock(tmp_path)
    assert found["severity"] == "warning" and "lease expired" in found["message"]


def test_old_temp_files_are_found_new_ones_and_other_files_are_not(tmp_path):
    old = time.time() - 2 * 3600

    def touch(rel, age=old, is_dir=False):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir() if is_dir else path.write_text("x")
        os.utime(path, (age, age))
        return path

    stale = [touch("workspace/memory/.CURRENT_STATE.md.fleet-tmp.4242.ab12cd34"),
             touch("workspace/memory/.CURRENT_STATE.md.abc123.tmp"),
             touch("fleet/artifacts/deadbeef.pyz.0123abcd.part"),
             touch("fleet/releases/.tmp-5.0.0-abc-4242", is_dir=True),
             touch("fleet/.current.tmp-99")]
    touch("workspace/memory/.CURRENT_STATE.md.new.tmp", age=time.time())  # being written now
    touch("workspace/memory/notes.tmp.md")
    touch("fleet/releases/5.0.0-abc/fleet/.x.tmp")  # inside a release: never searched
    assert doctor.temp_files(tmp_path) == sorted(stale)
    found = doctor.check_temp_files(tmp_path)
    assert found["severity"] == "warning" and found["message"].startswith("5 temp file(s)")


def test_clock_skew():
    now = time.time()
    assert clock_check(now + 0.2, now - 0.5, now + 0.5)["severity"] == "ok"
    found = clock_check(now + 30, now - 0.5, now + 0.5)
    assert found["severity"] == "warning" and "+30.0s" in found["message"]
    assert clock_check(now - 600, now, now + 1)["severity"] == "critical"
    assert clock_check(None, now, now)["severity"] == "warning"


def test_severity_order_and_exit_codes():
    assert worst(["ok", "info"]) == "info" and worst(["warning", "critical", "ok"]) == "critical"
    assert [exit_code(s) for s in ("ok", "info", "warning", "critical")] == [0, 0, 1, 2]
