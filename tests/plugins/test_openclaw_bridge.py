"""The plugins' OpenClaw entries driven as OpenClaw drives them (a Node harness plays its api):
hooks and /mc reach the Python plugins through one worker, and every fault fails open.

Needs Node >= 24 (the `node` fixture: skipped without one unless FLEET_REQUIRE_OPENCLAW=1).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from fleet.continuity.document import StateDocument
from fleet.plugins.memory_continuity.startup import IMPORTANT_LINE, SEED_BEGIN
from lab.sourcetree import snapshot

REPO = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).with_name("openclaw_api.mjs")
MC_ENTRY = REPO / "fleet" / "plugins" / "memory_continuity" / "index.js"
CMD_ENTRY = REPO / "fleet" / "plugins" / "mc" / "index.js"
CONFIG = {"agents": {"list": [{"id": "main", "default": True}]}}

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="the harness finds worker processes through /proc")


def state_text(objective: str, unsurfaced: str = "None") -> str:
    return ("# Current State\n> Last updated: 2026-12-01T10:00:00.000Z\n\n"
            f"## Objective\n{objective}\n\n## Current Step\nstep\n\n## Key Decisions\nNone\n\n"
            f"## Next Action\nnext\n\n## Blockers\nNone\n\n## Unsurfaced Results\n{unsurfaced}\n")


@pytest.fixture
def state(tmp_path: Path) -> Path:
    d = tmp_path / "state"
    (d / "workspace" / "memory").mkdir(parents=True)
    (d / "openclaw.json").write_text(json.dumps(CONFIG))
    return d


def run(node: str, state: Path, entry: Path, steps: List[Dict[str, Any]],
        plugin_config: Dict[str, Any] = None, timeout: float = 120,
        capture: bool = False, throwing_logger: bool = False,
        env: Dict[str, str] = None, openclaw_version: str = "2026.9.6") -> Dict[str, Any]:
    spec = {"entry": str(entry), "config": CONFIG, "steps": steps, "capture": capture,
            "throwingLogger": throwing_logger, "openclawVersion": openclaw_version,
            "pluginConfig": {"python": sys.executable} if plugin_config is None else plugin_config}
    full_env = dict(os.environ, OPENCLAW_STATE_DIR=str(state), HOME=str(state.parent))
    for name in ("FLEET_PYTHON", "FLEET_BRIDGE_TIMEOUT_MS", "FLEET_BRIDGE_STABLE_MS"):
        full_env.pop(name, None)
    full_env.update(env or {})
    env = full_env
    proc = subprocess.run([node, str(HARNESS)], input=json.dumps(spec), capture_output=True,
                          text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
    out = {"registered": lines[0]["registered"], "steps": lines[1:-1], **lines[-1]}
    out["errors"] = [m for level, m in out["logs"] if level == "error"]
    return out


def agent_ctx(state: Path, key: str = "agent:main:main", run_id: str = "r1") -> Dict[str, Any]:
    return {"runId": run_id, "agentId": key.split(":")[1], "sessionKey": key, "sessionId": "s1",
            "workspaceDir": str(state / "workspace"), "trigger": "user",
            "modelProviderId": "scripted", "modelId": "m"}


def prompt_build(state: Path, key: str = "agent:main:main",
                 prompt: str = "go on") -> Dict[str, Any]:
    return {"hook": "before_prompt_build", "event": {"prompt": prompt, "messages": []},
            "ctx": agent_ctx(state, key)}


def gone(pids: List[int], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_register_starts_nothing_and_registers_openclaws_hooks(node, state):
    out = run(node, state, MC_ENTRY, [])
    reg = out["registered"]
    assert reg["id"] == "memory-continuity" and reg["workers"] == [] and out["workers"] == []
    assert reg["methods"] == {"memory-continuity.ready": "operator.read",
                              "memory-continuity.selftest": "operator.write",
                              "memory-continuity.stats": "operator.read"}
    assert reg["hooks"] == {"before_prompt_build": 10, "before_compaction": 10,
                            "before_reset": 10, "subagent_spawned": 50, "llm_input": 50,
                            "subagent_ended": 50, "agent_end": 90, "session_end": 90}
    assert out["logs"] == []
    cmd = run(node, state, CMD_ENTRY, [])["registered"]
    assert (cmd["id"], cmd["commands"], cmd["hooks"], cmd["workers"]) == ("mc", ["mc"], {}, [])
    assert cmd["methods"] == {"mc.ready": "operator.read", "mc.selftest": "operator.write",
                              "mc.stats": "operator.read"}


def test_entry_hooks_are_the_python_plugins_hooks():
    """index.js declares the same hooks and priorities that plugin.py registers."""
    from fleet.plugins.memory_continuity.plugin import HOOKS, UNREAD_EVENT_FIELDS

    declared = re.findall(r'\["([a-z_]+)", (\d+)(?:, \[([^\]]*)\])?\]', MC_ENTRY.read_text())
    assert sorted((h, int(p)) for h, p, _ in declared) == sorted((h, p) for h, p, _ in HOOKS)
    unread = {h: tuple(re.findall(r'"([a-zA-Z_]+)"', f)) for h, _, f in declared if f}
    assert unread == UNREAD_EVENT_FIELDS


def test_hook_round_trip_reaches_the_python_plugin_and_returns_its_injection(node, state):
    own = state / "workspace" / "memory" / "CURRENT_STATE.md"
    own.write_text(state_text("Ship the OpenClaw bridge"))
    child = "agent:main:subagent:c1"
    spawn = {"hook": "subagent_spawned",
             "event": {"runId": "r2", "childSessionKey": child, "agentId": "main",
                       "mode": "run", "threadRequested": False},
             "ctx": {"runId": "r2", "childSessionKey": child,
                     "requesterSessionKey": "agent:main:main"}}
    asks = "Split the bridge work between two helpers"
    out = run(node, state, MC_ENTRY, [prompt_build(state, prompt=asks), spawn,
                                      prompt_build(state, child), {"workers": True}])
    main, _, seeded, workers = out["steps"]
    text = main["result"]["prependSystemContext"]
    assert "Objective: Ship the OpenClaw bridge" in text and text.endswith(IMPORTANT_LINE)
    seed = seeded["result"]["prependSystemContext"]
    # the child is seeded with what its parent's running turn asks (not yet checkpointed),
    # and the rest of the parent's state
    assert SEED_BEGIN in seed and f"Objective: {asks}" in seed and "Next Action: next" in seed
    assert len(workers["pids"]) == 1  # one long-lived worker served all three calls
    assert out["errors"] == []
    assert gone(workers["pids"])  # it exits with the process that started it


def test_entry_imported_from_a_capture_copy_still_runs_its_release(node, state, tmp_path):
    """OpenClaw imports a copy of the entry's module graph (under <state>/tmp), so the bridge
    finds the release through api.rootDir, through the extensions symlink, not its own path."""
    (state / "workspace" / "memory" / "CURRENT_STATE.md").write_text(state_text("Captured"))
    link = state / "extensions" / "memory-continuity"
    link.parent.mkdir()
    link.symlink_to(MC_ENTRY.parent)
    out = run(node, state, link / "index.js", [prompt_build(state)], capture=True)
    assert "Objective: Captured" in out["steps"][0]["result"]["prependSystemContext"]
    assert out["errors"] == []


def test_agent_end_and_subagent_ended_write_the_state_files(node, state):
    child = "agent:main:subagent:c9"
    msgs = [{"role": "user", "content": "please build the release pipeline"},
            {"role": "assistant", "content": [{"type": "text", "text": "Building it now."}]}]
    child_msgs = [{"role": "user", "content": "child task"},
                  {"role": "assistant", "content": [{"type": "text", "text": "found 3 issues"}]}]
    steps = [
        {"hook": "agent_end", "event": {"runId": "r1", "messages": msgs, "success": True,
                                        "durationMs": 5}, "ctx": agent_ctx(state)},
        {"hook": "agent_end", "event": {"runId": "r9", "messages": child_msgs, "success": True,
                                        "durationMs": 5}, "ctx": agent_ctx(state, child, "r9")},
        {"hook": "subagent_ended",
         "event": {"targetSessionKey": child, "targetKind": "subagent",
                   "reason": "subagent-complete", "sendFarewell": True, "runId": "r9",
                   "endedAt": 1, "outcome": "ok"},
         "ctx": {"runId": "r9", "childSessionKey": child,
                 "requesterSessionKey": "agent:main:main"}},
    ]
    out = run(node, state, MC_ENTRY, steps)
    assert [s["result"] for s in out["steps"]] == [None, None, None]
    doc = StateDocument.parse((state / "workspace" / "memory" / "CURRENT_STATE.md").read_text())
    assert "please build the release pipeline" in doc.get("Objective")
    assert "Task: child task\n  Result: found 3 issues" in doc.get("Unsurfaced Results")
    assert out["errors"] == []


def test_mc_command_answers_through_the_bridge(node, state):
    (state / "workspace" / "memory" / "CURRENT_STATE.md").write_text(state_text("Bridge it"))
    out = run(node, state, CMD_ENTRY, [{"command": "mc", "args": "state"},
                                       {"command": "mc", "args": "nonsense"}])
    state_reply, unknown = (s["result"]["text"] for s in out["steps"])
    assert state_reply.startswith("```\n") and "Bridge it" in state_reply
    assert "Unknown subcommand: nonsense" in unknown


@pytest.mark.parametrize("openclaw, verdict", [
    ("2026.9.6", None),
    ("2026.6.6", "declared but unproven"),
    ("2026.10.1", "outside the range"),
])
def test_an_openclaw_the_release_was_not_proven_on_is_said_once_in_the_log_and_by_mc_doctor(
        node, state, tmp_path, openclaw, verdict):
    release = tmp_path / "release"  # a release whose proof names two OpenClaw releases
    snapshot(release, files=())
    (release / "fleet" / "plugins" / "openclaw-proven.json").write_text(json.dumps(
        {"proven": ["2026.4.24", "2026.9.6"], "excluded": {}, "sources": "", "commit": "",
         "date": ""}))
    entry = release / "fleet" / "plugins" / "mc" / "index.js"
    out = run(node, state, entry, [{"command": "mc", "args": "doctor"},
                                   {"command": "mc", "args": "state"},
                                   {"command": "mc", "args": "doctor"}],
              openclaw_version=openclaw)
    warnings = [m for level, m in out["logs"] if level == "warn"]
    doctor = out["steps"][2]["result"]["text"]
    version = json.loads((entry.parent / "openclaw.plugin.json").read_text())["version"]
    if verdict is None:
        assert warnings == [] and f"OpenClaw {openclaw}: proven\n" in doctor
        return
    [warning] = warnings  # once, at the worker's start, not per command
    assert warning.startswith(f"mc {version} runs in OpenClaw {openclaw}, {verdict} for its "
                              f"release ({release.name}): OpenClaw {openclaw} is "), warning
    assert "(proven on 2026.4.24, 2026.9.6" in warning
    assert "`invoke deploy` (it re-checks each host" in warning
    assert f"OpenClaw {openclaw}: {verdict}\n" in doctor
    assert "fix: run `invoke deploy`: it re-checks and converges, or pass " \
           "--allow-unproven-openclaw" in doctor


def test_worker_killed_mid_session_the_next_hook_works(node, state):
    (state / "workspace" / "memory" / "CURRENT_STATE.md").write_text(state_text("Survive"))
    out = run(node, state, MC_ENTRY, [prompt_build(state), {"signal": "SIGKILL"},
                                      prompt_build(state), {"workers": True}])
    first, killed, second, after = out["steps"]
    assert "Objective: Survive" in first["result"]["prependSystemContext"]
    assert len(killed["pids"]) == 1
    assert "Objective: Survive" in second["result"]["prependSystemContext"]
    assert len(after["pids"]) == 1 and after["pids"] != killed["pids"]  # restarted
    assert any("exited (SIGKILL)" in e for e in out["errors"]), out["errors"]


def test_worker_hung_the_hook_returns_at_its_deadline_and_fails_open(node, state):
    (state / "workspace" / "memory" / "CURRENT_STATE.md").write_text(state_text("Not stuck"))
    cfg = {"python": sys.executable, "bridgeTimeoutMs": 1500}
    out = run(node, state, MC_ENTRY, [prompt_build(state), {"signal": "SIGSTOP"},
                                      prompt_build(state), {"sleep": 3000},
                                      prompt_build(state), {"workers": True}], cfg)
    first, stopped, hung, _, recovered, after = out["steps"]
    assert "Objective: Not stuck" in first["result"]["prependSystemContext"]
    assert hung["result"] is None  # no injection: the turn goes on without it
    assert any("no answer within 1500 ms" in e for e in out["errors"]), out["errors"]
    assert any("did not answer a ping" in e for e in out["errors"]), out["errors"]
    assert gone(stopped["pids"])  # the hung worker was killed
    assert "Objective: Not stuck" in recovered["result"]["prependSystemContext"]
    assert after["pids"] and after["pids"] != stopped["pids"]


def test_missing_python_is_a_diagnostic_and_the_host_keeps_serving(node, state, tmp_path):
    (state / "workspace" / "memory" / "CURRENT_STATE.md").write_text(state_text("Later"))
    missing = str(tmp_path / "no" / "python3")
    out = run(node, state, MC_ENTRY, [prompt_build(state), prompt_build(state),
                                      {"pluginConfig": {"python": sys.executable}},
                                      prompt_build(state)], {"python": missing})
    first, second, _, fixed = out["steps"]
    assert first["result"] is None and second["result"] is None
    assert any(f"{missing} not found" in e and "Python >= 3.9" in e
               and "plugins.entries.memory-continuity.config.python" in e
               for e in out["errors"]), out["errors"]
    assert "Objective: Later" in fixed["result"]["prependSystemContext"]
    cmd = run(node, state, CMD_ENTRY, [{"command": "mc", "args": "state"}], {"python": missing})
    assert cmd["steps"][0]["result"]["text"].startswith(
        "MC error: the continuity worker is unavailable")


def test_a_python_that_cannot_run_the_worker_is_named_with_its_output(node, state, tmp_path):
    fake = tmp_path / "python-old"
    fake.write_text("#!/bin/sh\necho 'SyntaxError: invalid syntax (python 2.7)' >&2\nexit 1\n")
    fake.chmod(0o755)
    out = run(node, state, MC_ENTRY, [prompt_build(state)], {"python": str(fake)})
    assert out["steps"][0]["result"] is None
    assert any("exited (code 1)" in e and "python 2.7" in e for e in out["errors"]), out["errors"]


def test_an_oversized_event_keeps_its_newest_messages(node, state):
    """OpenClaw hands agent_end the whole transcript; past the 8 MiB line limit the bridge sends
    the newest messages that fit, so a long session is still checkpointed."""
    msgs = [{"role": "user", "content": "please write the quarterly report now"},
            {"role": "assistant", "content": [{"type": "text", "text": "Report written."}]}]
    huge = {"hook": "agent_end", "event": {"runId": "r", "success": True, "messages": msgs},
            "ctx": agent_ctx(state), "padMessages": 9 * 1024 * 1024}
    out = run(node, state, MC_ENTRY, [huge])
    assert out["steps"][0]["result"] is None
    warns = [m for level, m in out["logs"] if level == "warn"]
    assert any("sending the newest 2 of 3 messages" in w for w in warns), out["logs"]
    doc = StateDocument.parse((state / "workspace" / "memory" / "CURRENT_STATE.md").read_text())
    assert "quarterly report" in doc.get("Objective")
    assert out["errors"] == []


def test_a_logger_that_throws_breaks_nothing(node, state, tmp_path):
    (state / "workspace" / "memory" / "CURRENT_STATE.md").write_text(state_text("Robust"))
    out = run(node, state, MC_ENTRY, [prompt_build(state)], throwing_logger=True)
    assert "Objective: Robust" in out["steps"][0]["result"]["prependSystemContext"]
    missing = run(node, state, MC_ENTRY, [prompt_build(state)],
                  {"python": str(tmp_path / "none")}, throwing_logger=True)
    assert missing["steps"][0]["result"] is None
    assert any("not found" in e for e in missing["errors"])


def test_a_too_old_python_is_a_clear_diagnostic(node, state, tmp_path):
    """The boot code checks the version before importing anything of fleet (this fake python
    runs it with sys.version_info of a 3.6)."""
    fake = tmp_path / "python3.6"
    fake.write_text(
        "#!/bin/sh\n"
        "# called as: python -s -E -c BOOT ROOT args...\n"
        "boot=\"$4\"; shift 4\n"
        f"exec {sys.executable} -c 'import sys; sys.version_info = (3, 6, 9, \"final\", 0); "
        "sys.version = \"3.6.9 (fake)\"; code = sys.argv.pop(1); exec(compile(code, \"b\", "
        "\"exec\"))' \"$boot\" \"$@\"\n")
    fake.chmod(0o755)
    out = run(node, state, MC_ENTRY, [prompt_build(state)], {"python": str(fake)})
    assert out["steps"][0]["result"] is None
    assert any("python 3.6.9 at" in e and "is too old: the fleet worker needs Python >= 3.9" in e
               for e in out["errors"]), out["errors"]


SLOW_PLUGIN = '''
import os, time

def register(api):
    def prompt(event, ctx):
        if event.get("prompt") == "hang":
            time.sleep(120)
        if event.get("prompt") == "raise":
            raise RuntimeError("prompt handler broke")
        if event.get("prompt") == "fields":
            return {"prependSystemContext": " ".join(sorted(event))}
        return {"prependSystemContext": f"worker {os.getpid()}"}

    def end(event, ctx):
        if event.get("messages"):
            return
        with open(os.path.join(str(api.state_dir), "ended.txt"), "a") as f:
            f.write(f"{os.getpid()}\\n")

    api.on("before_prompt_build", prompt, 10)
    api.on("agent_end", end, 90)
'''


@pytest.fixture
def slow_entry(tmp_path: Path) -> Path:
    """A release tree whose only plugin, `slowpoke`, hangs or raises in before_prompt_build on
    request; everything else (worker, continuity, bridge.mjs) is this checkout's."""
    fleet = tmp_path / "release" / "fleet"
    (fleet / "plugins" / "slowpoke").mkdir(parents=True)
    for part in (REPO / "fleet").iterdir():
        if part.name not in ("plugins", "__pycache__"):
            (fleet / part.name).symlink_to(part)
    (fleet / "plugins" / "__init__.py").symlink_to(REPO / "fleet" / "plugins" / "__init__.py")
    pkg = fleet / "plugins" / "slowpoke"
    (pkg / "bridge.mjs").symlink_to(REPO / "fleet" / "plugins" / "bridge.mjs")
    (pkg / "openclaw.plugin.json").write_text(json.dumps(
        {"id": "slowpoke", "version": "1.0.0", "configSchema": {"type": "object"}}))
    (pkg / "package.json").write_text(json.dumps({"version": "1.0.0", "type": "module",
                                                  "fleet": {"entry": "plugin.py"}}))
    (pkg / "plugin.py").write_text(SLOW_PLUGIN)
    (pkg / "index.js").write_text(
        'import { definePlugin } from "./bridge.mjs";\n'
        'export default definePlugin({ id: "slowpoke", name: "Slowpoke", description: "test", '
        'entryUrl: import.meta.url, hooks: [["before_prompt_build", 10, ["messages"]], '
        '["agent_end", 90]] });\n')
    return pkg / "index.js"


def prompt(text: str) -> Dict[str, Any]:
    return {"hook": "before_prompt_build", "event": {"prompt": text, "messages": []},
            "ctx": {"sessionKey": "agent:main:main", "agentId": "main"}}


def test_a_hung_prompt_handler_fails_open_and_the_worker_is_replaced(node, state, slow_entry):
    """before_prompt_build runs in the worker's reader thread: a handler that never returns is
    bounded by the bridge's deadline (no injection, the turn goes on), and the worker that
    cannot answer its ping is killed and replaced for the next call."""
    cfg = {"python": sys.executable, "bridgeTimeoutMs": 1500}
    end = {"hook": "agent_end", "event": {"success": True, "messages": []}, "ctx": {}}
    out = run(node, state, slow_entry, [prompt("go"), {"workers": True}, prompt("hang"),
                                        {"sleep": 3000}, prompt("go"), end, {"workers": True}],
              cfg)
    first, before, hung, _, after, _, workers = out["steps"]
    assert first["result"]["prependSystemContext"] == f"worker {before['pids'][0]}"
    assert hung["result"] is None
    assert any("no answer within 1500 ms" in e for e in out["errors"]), out["errors"]
    assert any("did not answer a ping" in e for e in out["errors"]), out["errors"]
    assert gone(before["pids"])
    assert workers["pids"] and workers["pids"] != before["pids"]
    assert after["result"]["prependSystemContext"] == f"worker {workers['pids'][0]}"
    assert (state / "ended.txt").read_text().split() == [str(workers["pids"][0])]  # void hooks too


def test_a_raising_prompt_handler_fails_open_and_the_same_worker_goes_on(node, state, slow_entry):
    out = run(node, state, slow_entry, [prompt("raise"), prompt("go"), {"workers": True}])
    broke, fine, workers = out["steps"]
    assert broke["result"] is None
    assert any("prompt handler broke" in e for e in out["errors"]), out["errors"]
    assert fine["result"]["prependSystemContext"] == f"worker {workers['pids'][0]}"
    assert not any("exited" in e for e in out["errors"])  # not restarted for it


def test_event_fields_a_hook_declares_unread_are_not_sent(node, state, slow_entry):
    """A hook entry's third element (the transcript for before_prompt_build) never reaches the
    worker; other hooks still get every field."""
    talk = {"messages": [{"role": "user", "content": "x" * 1000}] * 50}
    fields = dict(prompt("fields"), event={"prompt": "fields", "extra": 1, **talk})
    end = {"hook": "agent_end", "event": {"success": True, **talk}, "ctx": {}}
    out = run(node, state, slow_entry, [fields, end])
    assert out["steps"][0]["result"]["prependSystemContext"] == "extra prompt"
    assert not (state / "ended.txt").exists()  # agent_end saw the messages
    assert out["errors"] == []


def test_the_ready_method_starts_the_worker_and_names_the_version_it_runs(node, state):
    """`<id>.ready` is how a deploy learns that the plugin's Python runs: the worker is started
    on demand and probed; the answer carries the version the worker loaded."""
    out = run(node, state, MC_ENTRY, [{"method": "memory-continuity.ready"}, {"workers": True}])
    ready, workers = out["steps"]
    manifest = json.loads((MC_ENTRY.parent / "openclaw.plugin.json").read_text())
    assert ready["ok"] is True, ready
    payload = ready["payload"]
    assert (payload["id"], payload["plugin"], payload["version"]) == (
        "memory-continuity", "memory-continuity", manifest["version"])
    assert payload["pid"] == workers["pids"][0] and "before_prompt_build" in payload["hooks"]
    assert out["errors"] == []


def test_the_ready_method_says_a_plugin_that_cannot_load_is_final(node, state, slow_entry):
    """A release whose Python raises at import answers `ready` with the import's error, marked
    final: waiting longer cannot help, the deploy rolls back at once."""
    (slow_entry.parent / "plugin.py").write_text("raise RuntimeError('core broken at import')\n")
    out = run(node, state, slow_entry, [{"method": "slowpoke.ready"},
                                        {"method": "slowpoke.ready"}])
    for step in out["steps"]:  # the second is answered from the backoff, with the same reason
        assert step["ok"] is False, step
        assert "core broken at import" in step["error"]["message"], step
        assert step["error"]["details"] == {"final": True}


DYING_PLUGIN = """
import os, threading

def register(api):
    with open(os.path.join(str(api.state_dir), "starts.txt"), "a") as f:
        f.write(f"{os.getpid()}\\n")

    def end(event, ctx):
        threading.Timer(0.05, os._exit, [1]).start()  # dies right after answering

    api.on("agent_end", end, 90)
"""


def test_a_worker_that_answers_once_then_dies_is_restarted_with_backoff(node, state, slow_entry):
    """Answering a call is no proof of health: a worker that dies after every answer must not
    be restarted on every hook. Only one that stayed up a while resets the backoff."""
    (slow_entry.parent / "plugin.py").write_text(DYING_PLUGIN)
    end = {"hook": "agent_end", "event": {"success": True, "messages": []}, "ctx": {}}
    out = run(node, state, slow_entry, [end, {"sleep": 100}] * 40)  # each worker dead by the next
    starts = (state / "starts.txt").read_text().split()
    assert 2 <= len(starts) <= 12, starts  # restarted, but 40 hooks did not mean 40 starts
    assert any("next start in" in e for e in out["errors"]), out["errors"]

    (state / "starts.txt").unlink()
    (slow_entry.parent / "plugin.py").write_text(DYING_PLUGIN.replace("threading.Timer", "pass  #"))
    healthy = [end, {"sleep": 400}, {"signal": "SIGKILL"}]  # up longer than the stable time
    out = run(node, state, slow_entry, healthy * 3 + [end], env={"FLEET_BRIDGE_STABLE_MS": "200"})
    assert len((state / "starts.txt").read_text().split()) == 4  # each death: restarted at once
    assert not any("next start in" in e for e in out["errors"]), out["errors"]


def test_the_selftest_method_runs_the_scenario_in_the_worker(node, state):
    """`<id>.selftest` is a deploy's gate after readiness: the plugin's own scenario in its
    worker, on a scratch under the state dir; the agent's real state is not touched."""
    real = state / "workspace" / "memory" / "CURRENT_STATE.md"
    real.write_text(state_text("Real work"))
    before = real.read_bytes()
    out = run(node, state, MC_ENTRY, [{"method": "memory-continuity.selftest"}])
    step = out["steps"][0]
    assert step["ok"] is True, step
    payload = step["payload"]
    assert payload["id"] == payload["plugin"] == "memory-continuity" and payload["ok"] is True
    assert [c["name"] for c in payload["checks"]] == [
        "recovery", "spawn", "seed", "child checkpoint", "child handoff", "checkpoint",
        "recovery after checkpoint"]
    assert real.read_bytes() == before and list((state / "selftest").iterdir()) == []
    cmd = run(node, state, CMD_ENTRY, [{"method": "mc.selftest"}])["steps"][0]
    assert cmd["ok"] is True and cmd["payload"]["ok"] is True, cmd


def test_the_stats_method_merges_the_bridges_counts_with_its_workers(node, state, slow_entry):
    """A raising handler is the worker's error; a hung one is the bridge's timeout, and the
    worker it kills for it a restart; the dead worker's counts are kept. Readiness probes and
    self-tests are not hook calls."""
    cfg = {"python": sys.executable, "bridgeTimeoutMs": 1500}
    out = run(node, state, slow_entry, [
        {"method": "slowpoke.stats"}, {"method": "slowpoke.ready"},
        {"method": "slowpoke.selftest"}, prompt("raise"), prompt("go"), prompt("hang"),
        {"sleep": 3000}, prompt("go"), {"method": "slowpoke.stats"}], cfg)
    steps = out["steps"]
    first, last = steps[0]["payload"], steps[-1]["payload"]
    assert first == {"plugin": "slowpoke", "calls": 0, "errors": 0, "timeouts": 0,
                     "restarts": 0, "since": first["since"], "worker": None}
    assert steps[2]["payload"]["unsupported"] == "slowpoke has no self-test"
    assert {k: last[k] for k in ("calls", "errors", "timeouts", "restarts")} == {
        "calls": 4, "errors": 1, "timeouts": 1, "restarts": 1}, last
    assert last["since"] == first["since"]
    assert last["worker"]["calls"] == 1  # the new worker's own, since it started
