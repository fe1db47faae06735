"""The worker behind the OpenClaw entries, spoken to over its JSON-lines protocol directly:
it loads the plugin as our gateway does, answers hooks and commands, and nothing a client sends
stops it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

from lab.sourcetree import break_selftest, snapshot

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "fleet" / "plugins"
BOOT = "import sys; from fleet.gateway.worker import main; sys.exit(main(sys.argv[1:]))"


def start(state: Path, plugin_dir: Path, plugin_id: str, root: Path = REPO) -> subprocess.Popen:
    env = dict(os.environ, OPENCLAW_STATE_DIR=str(state), PYTHONPATH=str(root))
    return subprocess.Popen([sys.executable, "-c", BOOT, "--plugin-dir", str(plugin_dir),
                             "--plugin-id", plugin_id], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=str(root))  # `-c` puts the cwd first on sys.path


def talk(proc: subprocess.Popen, lines: List[bytes], timeout: float = 60) -> List[Dict[str, Any]]:
    """Send the lines, close stdin, return every JSON line the worker wrote before exiting."""
    out, err = proc.communicate(b"".join(line + b"\n" for line in lines), timeout=timeout)
    assert proc.returncode == 0, err.decode()
    return [json.loads(x) for x in out.decode().splitlines()]


def answers(msgs: List[Dict[str, Any]]) -> Dict[Any, Dict[str, Any]]:
    return {m["id"]: m for m in msgs if "id" in m}


def state_dir(tmp_path: Path) -> Path:
    d = tmp_path / "state"
    (d / "workspace" / "memory").mkdir(parents=True)
    (d / "openclaw.json").write_text(json.dumps({"agents": {"list": [{"id": "main"}]}}))
    return d


def test_ready_line_names_the_plugin_and_its_openclaw_hooks(tmp_path):
    msgs = talk(start(state_dir(tmp_path), PLUGINS / "memory_continuity", "memory-continuity"),
                [])
    ready = next(m for m in msgs if "ready" in m)
    assert ready["ready"] is True and ready["plugin"] == "memory-continuity"
    assert ready["version"] == json.loads(
        (PLUGINS / "memory_continuity" / "openclaw.plugin.json").read_text())["version"]
    assert sorted(ready["hooks"]) == ["agent_end", "before_compaction", "before_prompt_build",
                                      "before_reset", "llm_input", "session_end",
                                      "subagent_ended", "subagent_spawned"]
    assert {"log": "info", "msg": "Plugin registered successfully"} in msgs


def test_bad_requests_are_answered_or_logged_and_the_worker_keeps_serving(tmp_path):
    state = state_dir(tmp_path)
    (state / "workspace" / "memory" / "CURRENT_STATE.md").write_text(
        "# Current State\n> Last updated: 2026-12-01T10:00:00.000Z\n\n## Objective\nKeep going\n")
    ctx = {"agentId": "main", "sessionKey": "agent:main:main", "sessionId": "s",
           "workspaceDir": str(state / "workspace")}
    lines = [
        b"not json at all",
        b"[1, 2, 3]",
        b"\xff\xfe garbage bytes",
        b'{"x": "' + b"a" * (9 * 1024 * 1024) + b'"}',  # longer than any request may be
        json.dumps({"id": 1, "op": "explode"}).encode(),
        json.dumps({"id": 2, "op": "hook", "hook": "before_prompt_build", "event": "x",
                    "ctx": 5}).encode(),
        json.dumps({"id": 3, "op": "hook", "hook": "agent_end", "event": {}, "ctx": ctx,
                    "pluginConfig": {"autoExtract": "yes"}}).encode(),
        json.dumps({"id": 4, "op": "hook", "hook": "before_prompt_build",
                    "event": {"prompt": "p", "messages": []}, "ctx": ctx}).encode(),
        json.dumps({"id": 5, "op": "ping"}).encode(),
    ]
    msgs = talk(start(state, PLUGINS / "memory_continuity", "memory-continuity"), lines)
    got = answers(msgs)
    assert got[1] == {"id": 1, "ok": False,
                      "error": "unknown op 'explode' (hook, command, probe, selftest, stats, "
                               "ping)"}
    assert got[2]["ok"] is True and got[2]["result"] is None
    assert got[3]["ok"] is False and "autoExtract" in got[3]["error"]
    assert "Objective: Keep going" in got[4]["result"]["prependSystemContext"]
    assert got[5]["ok"] is True and got[5]["result"]["pid"] > 0
    logged = [m["msg"] for m in msgs if m.get("log") == "error"]
    assert sum("not JSON" in m for m in logged) == 2
    assert sum("not a JSON object" in m for m in logged) == 1
    assert sum("longer than" in m for m in logged) == 1
    assert [m["ack"] for m in msgs if "ack" in m] == [1, 2, 3, 4]  # pings are not acknowledged


def test_a_probe_answers_what_the_worker_runs_and_checks_the_plugin_config(tmp_path):
    """`probe` (the `<id>.ready` readiness RPC) goes through the hook path: the answer names the
    plugin and its version, and a config the plugin would refuse is refused here too."""
    state = state_dir(tmp_path)
    good = {"id": 1, "op": "probe", "pluginConfig": {}, "config": {}}
    bad = {"id": 2, "op": "probe", "pluginConfig": {"autoExtract": "yes"}, "config": {}}
    got = answers(talk(start(state, PLUGINS / "memory_continuity", "memory-continuity"),
                       [json.dumps(good).encode(), json.dumps(bad).encode()]))
    version = json.loads((PLUGINS / "memory_continuity" / "openclaw.plugin.json").read_text())
    assert got[1]["ok"] is True and got[1]["errors"] == []
    assert (got[1]["result"]["plugin"], got[1]["result"]["version"]) == (
        "memory-continuity", version["version"])
    assert "before_prompt_build" in got[1]["result"]["hooks"]
    assert got[2]["ok"] is False and "autoExtract" in got[2]["error"]


def test_mc_command_with_the_config_the_bridge_passes(tmp_path):
    state = state_dir(tmp_path)
    req = {"id": 7, "op": "command", "command": "mc", "ctx": {"args": "help"},
           "pluginConfig": {}, "config": {"agents": {"list": [{"id": "main"}]}}}
    got = answers(talk(start(state, PLUGINS / "mc", "mc"), [json.dumps(req).encode()]))
    assert got[7]["ok"] is True and "MC Commands (Memory Continuity)" in got[7]["result"]["text"]


def test_a_plugin_that_cannot_load_is_one_fatal_line(tmp_path):
    bad = tmp_path / "broken"
    bad.mkdir()
    (bad / "openclaw.plugin.json").write_text(json.dumps(
        {"id": "broken", "version": "1.0.0", "configSchema": {"type": "object"}}))
    (bad / "plugin.py").write_text("raise RuntimeError('import fails')\n")
    proc = start(state_dir(tmp_path), bad, "broken")
    out, _ = proc.communicate(b"", timeout=60)
    assert proc.returncode == 2
    fatal = json.loads(out.decode().splitlines()[-1])["fatal"]
    assert fatal.startswith(f"plugin broken cannot load from {bad}: ")
    assert "RuntimeError: import fails" in fatal


def test_selftest_runs_the_scenario_here_and_stats_count_only_real_hooks(tmp_path):
    """`selftest` (the `<id>.selftest` RPC) runs the plugin's scenario through this worker's
    bus; the hook counts (`stats`, and every hook answer's) leave the self-test out."""
    state = state_dir(tmp_path)
    ctx = {"agentId": "main", "sessionKey": "agent:main:main", "sessionId": "s", "runId": "r",
           "workspaceDir": str(state / "workspace")}
    lines = [
        {"id": 1, "op": "stats", "junk": [1, 2]},
        {"id": 2, "op": "selftest", "pluginConfig": {}, "config": {}},
        {"id": 3, "op": "hook", "hook": "agent_end", "event": {"messages": []}, "ctx": ctx},
        {"id": 4, "op": "selftest", "pluginConfig": {"autoExtract": "yes"}},
    ]
    msgs = talk(start(state, PLUGINS / "memory_continuity", "memory-continuity"),
                [json.dumps(x).encode() for x in lines])
    got = answers(msgs)
    assert got[1]["result"] == {"plugin": "memory-continuity", "pid": got[1]["result"]["pid"],
                                "calls": 0, "errors": 0, "timeouts": 0,
                                "since": got[1]["result"]["since"]}
    result = got[2]["result"]
    assert got[2]["ok"] is True and result["ok"] is True, result
    assert (result["plugin"], result["version"]) == ("memory-continuity", json.loads(
        (PLUGINS / "memory_continuity" / "openclaw.plugin.json").read_text())["version"])
    assert len(result["checks"]) == 7 and all(c["ok"] for c in result["checks"])
    assert got[3]["stats"] == {"calls": 1, "errors": 0, "timeouts": 0}  # the hook, not the test
    assert got[4]["ok"] is False and "autoExtract" in got[4]["error"]  # refused, answered
    assert sorted((state / "selftest").iterdir()) == []


def test_selftest_follows_the_plugins_config(tmp_path):
    """A feature the host turned off is skipped, not failed: the gate tests what runs."""
    req = {"id": 1, "op": "selftest", "pluginConfig": {"autoExtract": False,
                                                        "subagentSeed": False}}
    got = answers(talk(start(state_dir(tmp_path), PLUGINS / "memory_continuity",
                             "memory-continuity"), [json.dumps(req).encode()]))
    result = got[1]["result"]
    details = {c["name"]: c["detail"] for c in result["checks"]}
    assert result["ok"] is True, result
    assert details["seed"] == "skipped: subagentSeed is off"
    assert details["checkpoint"].startswith("skipped: autoExtract is off")
    assert "recovery after checkpoint" not in details


def test_selftest_of_a_release_whose_mc_cannot_read_state_names_the_command(tmp_path):
    tree = tmp_path / "tree"
    snapshot(tree)
    break_selftest(tree / "fleet" / "plugins" / "mc")
    req = {"id": 1, "op": "selftest", "pluginConfig": {}, "config": {}}
    got = answers(talk(start(state_dir(tmp_path), tree / "fleet" / "plugins" / "mc", "mc",
                             root=tree), [json.dumps(req).encode()]))
    result = got[1]["result"]
    checks = {c["name"]: c for c in result["checks"]}
    assert got[1]["ok"] is True and result["ok"] is False
    assert checks["/mc state"]["ok"] is False
    assert "MC error: state unreadable" in checks["/mc state"]["detail"]
    assert checks["/mc doctor"]["ok"] is True
