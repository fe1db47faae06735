"""The plugins' self-tests and hook statistics through our gateway's control ops (`selftest`,
`stats`): the real plugins pass, a broken one fails naming its check, the scratch never outlives
a run, real state is left as it was, and the self-test is not counted as hook calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

from gateway_helpers import call, install, ok, run_cli, write_config, write_plugin

from fleet.continuity.document import StateDocument
from fleet.gateway.layout import Layout
from fleet.gateway.scaffold import init
from fleet.gateway.service import Gateway
from lab.sourcetree import break_selftest, snapshot

MC_CHECKS = ["recovery", "spawn", "seed", "child checkpoint", "child handoff", "checkpoint",
             "recovery after checkpoint"]


def tree_bytes(root: Path) -> Dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def scratch(state: Path) -> list:
    parent = state / "selftest"
    return sorted(p.name for p in parent.iterdir()) if parent.exists() else []


def test_the_real_plugins_pass_and_touch_no_real_state(real_gateway, state):
    gw = real_gateway
    key = ok(gw, "session.start")["sessionKey"]
    ok(gw, "session.turn", sessionKey=key, prompt="Reconcile the Q3 ledger with the bank",
       steps=["Started: two accounts left."])
    child = ok(gw, "subagent.spawn", parentSessionKey=key, task="check account 7",
               steps=["Account 7 is fine."])
    workspace = tree_bytes(state / "workspace")
    requesters = json.loads((state / "memory-continuity" / "requesters.json").read_text())
    counted = ok(gw, "stats")

    answer = ok(gw, "selftest")

    assert answer["ok"] is True and sorted(answer["plugins"]) == ["mc", "memory-continuity"]
    mc = answer["plugins"]["memory-continuity"]
    assert [c["name"] for c in mc["checks"]] == MC_CHECKS
    assert all(c["ok"] for c in mc["checks"]), mc["checks"]
    assert mc["version"] == gw.health()["versions"]["memory-continuity"]
    assert mc["duration_ms"] >= 0
    assert [c["name"] for c in answer["plugins"]["mc"]["checks"]] == ["/mc state", "/mc doctor"]
    assert scratch(state) == []  # removed when the run ended
    assert tree_bytes(state / "workspace") == workspace  # the agent's memory untouched
    assert json.loads((state / "memory-continuity" / "requesters.json").read_text()) == requesters
    assert child["childSessionKey"] in requesters["children"]
    assert ok(gw, "stats") == counted  # the self-test's hook calls are not counted


def test_a_release_that_drops_the_recovered_state_fails_naming_the_check(tmp_path, state):
    """The plugin loads and the gateway is ready; only the self-test sees that recovery no
    longer reaches the prompt, and says what it expected."""
    plugin = snapshot(tmp_path / "tree")
    break_selftest(plugin)
    init(Layout(state), link_from=plugin.parent)
    gw = Gateway(Layout(state))
    gw.load_plugins()
    assert gw.health()["ready"], gw.health()

    answer = ok(gw, "selftest")

    assert answer["ok"] is False
    failed = {c["name"]: c["detail"] for c in answer["plugins"]["memory-continuity"]["checks"]
              if not c["ok"]}
    assert "recovery" in failed and "seed" in failed, failed
    assert failed["recovery"].startswith("expected the parent's prompt to carry 'Objective: "
                                         "Keep the fleet self-test ")
    assert failed["recovery"].endswith(", found nothing")
    assert answer["plugins"]["mc"]["ok"] is True
    assert scratch(state) == []  # removed on failure too


def test_a_plugin_without_a_self_test_says_so_and_passes(recorder_gateway):
    answer = ok(recorder_gateway, "selftest")
    assert answer == {"ok": True, "plugins": {"recorder": {
        "ok": True, "plugin": "recorder", "version": "1.0.0", "checks": [],
        "unsupported": "recorder has no self-test",
        "duration_ms": answer["plugins"]["recorder"]["duration_ms"]}}}


RAISING = """
def register(api):
    api.register_command("other", lambda ctx: {"text": "hi"})

def selftest(run):
    (run.workspace / "memory").mkdir(parents=True)
    run.check("first", True, "a check before it broke")
    run.command("/mc state")  # not this plugin's command
"""


def test_a_scenario_that_raises_fails_and_leaves_no_scratch(real_gateway, tmp_path, state):
    install(state, write_plugin(tmp_path / "plugins", "raising", RAISING))
    gw = Gateway(Layout(state))
    gw.load_plugins()
    answer = ok(gw, "selftest")["plugins"]["raising"]
    assert answer["ok"] is False
    assert answer["checks"] == [
        {"name": "first", "ok": True, "detail": "a check before it broke"},
        {"name": "scenario", "ok": False,
         "detail": "SelfTestError: /mc is not a command of raising"}]
    assert scratch(state) == []


FLAKY = """
import time
def register(api):
    api.on("before_prompt_build", lambda e, c: {"prependSystemContext": "fine"}, 5)
    def end(event, ctx):
        raise RuntimeError("checkpoint broke")
    api.on("agent_end", end, 5)
    api.on("session_end", lambda e, c: time.sleep(2), 5)
"""


def test_stats_count_each_plugins_calls_errors_and_timeouts(tmp_path, state):
    install(state, write_plugin(tmp_path / "plugins", "flaky", FLAKY))
    install(state, write_plugin(tmp_path / "plugins", "idle", "def register(api):\n    pass\n"))
    write_config(state, {"agents": {"list": [{"id": "main"}]}})
    gw = Gateway(Layout(state), hook_timeout_s=0.3)
    gw.load_plugins()
    key = ok(gw, "session.start")["sessionKey"]
    turn = ok(gw, "session.turn", sessionKey=key, prompt="p", steps=["a"])
    assert len(turn["hookErrors"]) == 1
    ok(gw, "session.close", sessionKey=key)  # session_end: past its time limit
    ok(gw, "selftest")  # no scenario: changes no count

    stats = ok(gw, "stats")["plugins"]

    since = stats["flaky"]["since"]
    assert stats == {"flaky": {"calls": 3, "errors": 1, "timeouts": 1, "restarts": 0,
                               "since": since},
                     "idle": {"calls": 0, "errors": 0, "timeouts": 0, "restarts": 0,
                              "since": since}}
    assert since.endswith("Z") and since[:4].isdigit()


def test_scratch_left_by_a_dead_process_is_removed_by_the_next_run(real_gateway, state):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = state / "selftest" / f"memory-continuity-{int(gone.stdout)}-abcd1234"
    live = state / "selftest" / f"mc-{os.getppid()}-efgh5678"  # another live process's
    for d in (dead, live):
        (d / "workspace").mkdir(parents=True)
    ok(real_gateway, "selftest")
    assert not dead.exists() and live.exists()


def test_a_symlink_in_place_of_the_scratch_dir_is_refused(real_gateway, state, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (state / "selftest").symlink_to(elsewhere)
    answer = ok(real_gateway, "selftest")
    check = answer["plugins"]["memory-continuity"]["checks"]
    assert answer["ok"] is False and check[0]["name"] == "scratch"
    assert "is a symlink" in check[0]["detail"]
    assert list(elsewhere.iterdir()) == []


def test_the_ops_over_the_socket_ignore_what_a_client_adds(state, gateways):
    """A client names nothing: extra arguments (a path of its choosing) are not used, and the
    gateway goes on serving."""
    init(Layout(state))
    gateways.append(state)
    assert run_cli(state, "start", "--timeout", "30").returncode == 0
    doc = StateDocument.new()
    doc.set("Objective", "Real work in progress")
    real = state / "workspace" / "memory" / "CURRENT_STATE.md"
    real.parent.mkdir(parents=True, exist_ok=True)
    real.write_text(doc.render())
    before = real.read_bytes()

    answer = call(state, "selftest", {"stateDir": "/", "workspace": str(real.parent),
                                      "plugins": 5})
    stats = call(state, "stats", {"plugin": ["x"]})

    assert answer["result"]["ok"] is True, answer
    assert sorted(stats["result"]["plugins"]) == ["mc", "memory-continuity"]
    assert real.read_bytes() == before and scratch(state) == []
    assert call(state, "health")["result"]["ready"] is True
