"""The openclaw manager's pieces that need no real OpenClaw: readiness from a `plugins.list`
answer, and the supervised gateway's stop protocol (SIGTERM, then SIGKILL after the grace)."""

from __future__ import annotations

import json
import os
import sys
import time

from fleet.gateway.process import NOT_YET, PLUGIN_FAILED, READY, judge
from fleet.installer.managers import make_manager
from fleet.installer.openclawgw import health_from_listing

OURS = ["memory-continuity", "mc"]


def _entry(pid, version, state="active", error=None, enabled=True):
    runtime = {"state": state}
    if error:
        runtime["error"] = error
    return {"id": pid, "version": version, "enabled": enabled, "origin": "config",
            "runtime": runtime}


def test_ready_when_every_plugin_is_active_at_the_version():
    listing = {"plugins": [_entry("memory-continuity", "5.0.1"), _entry("mc", "2.1.0"),
                           _entry("other", "1.0", state="unloaded", error="not ours")],
               "diagnostics": [{"level": "warn", "message": "catalog fallback: offline"}]}
    health = health_from_listing(listing, OURS, "2026.9.6", 42)
    assert health["versions"] == {"memory-continuity": "5.0.1", "mc": "2.1.0"}
    assert judge(health, {"memory-continuity": "5.0.1", "mc": "2.1.0"}).state == READY
    assert "memory-continuity is 5.0.1 (want 5.0.2)" in judge(
        health, {"memory-continuity": "5.0.2"}).reason


def test_a_load_error_or_a_diagnostic_naming_a_plugin_is_a_plugin_failure():
    broken = {"plugins": [_entry("memory-continuity", "5.0.2", state="unloaded",
                                 error="Error: boom"), _entry("mc", "2.1.0")]}
    problem = judge(health_from_listing(broken, OURS, None, None), {})
    assert problem.state == PLUGIN_FAILED
    assert problem.reason.startswith("plugin memory-continuity failed to load: Error: boom")
    named = {"plugins": [_entry("memory-continuity", "5.0.1"), _entry("mc", "2.1.0")],
             "diagnostics": [{"pluginId": "mc", "message": "manifest invalid"}]}
    assert judge(health_from_listing(named, OURS, None, None), {}).reason.startswith(
        "plugin mc failed to load: manifest invalid")


def test_a_catalog_listing_gives_no_version_or_state_but_its_errors_count():
    """OpenClaw 2026.8 lists what is installed: the version on disk and `state: "enabled"` say
    nothing of what runs (the plugins' own answers do); a catalog error still fails."""
    catalog = {"plugins": [
        {"id": "memory-continuity", "version": "5.0.2", "enabled": True, "state": "enabled"},
        {"id": "mc", "version": "2.1.0", "enabled": True, "state": "error",
         "error": "manifest invalid: configSchema"}],
        "diagnostics": [{"level": "warn", "pluginId": "memory-continuity",
                         "message": "OpenClaw can't verify where this plugin came from"}]}
    health = health_from_listing(catalog, OURS, "2026.8.2", 42, runtime=False)
    assert health["versions"] == {}
    assert health["plugins"]["memory-continuity"]["loaded"] is None  # a warning is no failure
    assert judge(health, {}).reason == "plugin mc failed to load: manifest invalid: configSchema"


def test_a_plugin_still_loading_or_not_yet_discovered_is_waited_for():
    listing = {"plugins": [_entry("memory-continuity", "5.0.1", state="loading")]}
    health = health_from_listing(listing, OURS, None, None)
    problem = judge(health, {"memory-continuity": "5.0.1", "mc": "2.1.0"})
    assert problem.state == NOT_YET and "mc is not loaded" in problem.reason


FAKE_GATEWAY = """
import os, signal, sys, time
assert sys.argv[1:3] == ["gateway", "run"], sys.argv
if os.environ["FAKE_BEHAVIOUR"] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("gateway up", flush=True)
while True:
    time.sleep(0.1)
"""


def _supervised(tmp_path, behaviour):
    script = tmp_path / "fake-openclaw.py"
    script.write_text(FAKE_GATEWAY)
    opts = {"mode": "supervised", "node": sys.executable, "openclaw": str(script),
            "port": "1", "stop_grace": "1", "env.FAKE_BEHAVIOUR": behaviour}
    return make_manager("openclaw", tmp_path / "state", opts)


def test_supervised_gateway_is_stopped_by_sigterm(tmp_path):
    manager = _supervised(tmp_path, "polite")
    pid = manager.process.start()
    record = json.loads(manager.process.pidfile.read_text())
    assert record["pid"] == pid and manager.process.pid() == pid
    assert manager.process.stop(5.0) == "terminated"
    assert manager.process.pid() is None and not manager.process.pidfile.exists()
    assert manager.process.stop(5.0) is None  # nothing left to stop


def test_supervised_gateway_ignoring_sigterm_is_killed_after_the_grace(tmp_path):
    manager = _supervised(tmp_path, "stubborn")
    pid = manager.process.start()
    deadline = time.monotonic() + 60  # it says "up" once its SIGTERM handler is in place
    while "gateway up" not in (manager.process.log.read_text() if manager.process.log.exists()
                               else ""):
        assert time.monotonic() < deadline, "the fake gateway never came up"
        time.sleep(0.02)
    assert manager.process.stop(1.0) == "killed"
    assert manager.process.child.exit_code() is not None
    assert not os.path.exists(f"/proc/{pid}") or manager.process.pid() is None


def test_a_reused_pid_is_not_taken_for_the_gateway(tmp_path):
    manager = _supervised(tmp_path, "polite")
    manager.process.pidfile.parent.mkdir(parents=True)
    # our own pid, but recorded with another start time: a pid reused after a crash
    manager.process.pidfile.write_text(json.dumps({"pid": os.getpid(), "started": "1"}))
    if os.path.exists(f"/proc/{os.getpid()}/stat"):
        assert manager.process.pid() is None
        assert manager.process.stop(1.0) is None


def test_an_install_on_an_openclaw_too_old_for_the_release_is_refused_and_changes_nothing(
        tmp_path, artifacts):
    """The release's plugins declare the OpenClaw versions they support; the installer checks
    this host's OpenClaw (here: its CLI, no gateway runs) before it unpacks or writes a thing."""
    from deploy_helpers import fake_openclaw_cli, run_installer

    cli = fake_openclaw_cli(tmp_path / "openclaw", "2026.3.28")
    state = tmp_path / "state"
    state.mkdir()
    config = state / "openclaw.json"
    config.write_text(json.dumps({"gateway": {"port": 9, "auth": {"mode": "none"}}}))
    before = sorted(p.relative_to(state) for p in state.rglob("*"))
    art = artifacts()
    code, out = run_installer(art.path, "install", "--state-dir", str(state),
                              "--sha256", art.sha256, "--manager", "openclaw",
                              "--manager-opt", f"openclaw={cli}", "--manager-opt", "port=9")
    assert code != 0 and out["result"] == "refused", out
    assert ("the OpenClaw CLI (no gateway answers) here is OpenClaw 2026.3.28: OpenClaw "
            "2026.3.28 is older than this release supports (>=2026.4.24") in out["reason"]
    assert "nothing was changed" in out["reason"]
    after = {p.relative_to(state) for p in state.rglob("*")}
    releases = {p for p in after if p.parts[:2] == ("fleet", "releases")}
    assert not releases and not (state / "fleet" / "current").exists()
    assert json.loads(config.read_text()) == {"gateway": {"port": 9, "auth": {"mode": "none"}}}
    assert set(before) <= after


def test_the_capability_record_is_what_the_gateway_says_of_itself():
    """One record per host from its hello-ok and its `plugins.list` answer, not its version."""
    from fleet.installer import openclawcaps

    hello = {"server": {"version": "2026.8.2"},
             "features": {"methods": ["plugins.list", "mc.ready", "status"]}}
    catalog = {"plugins": [{"id": "mc", "state": "enabled"}]}
    caps = openclawcaps.detect(hello, catalog)
    assert (caps.version, caps.listing, caps.reload) == ("2026.8.2", "catalog", False)
    assert caps.serves("mc.ready") and not caps.serves("memory-continuity.ready")
    assert caps.load_errors() == ["the gateway's log"]
    runtime = {"plugins": [{"id": "mc", "runtime": {"state": "active"}}]}
    assert openclawcaps.detect(hello, runtime).runtime_listing
    # a gateway reached through the CLI says nothing of itself: reload is tried, its answer tells
    blind = openclawcaps.detect({}, None)
    assert (blind.version, blind.methods, blind.listing) == (None, None, "none")
    assert blind.serves("plugins.reload") is None and blind.reload
