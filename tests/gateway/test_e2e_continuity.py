"""Parent/child end to end on a real gateway with the real plugins, through the client CLI.

The parent seed reaches the child, the child's unsurfaced result is recovered into the parent's
state file, and the announce lands in the parent's transcript.
"""

from __future__ import annotations

import json

from gateway_helpers import call, run_cli

OBJECTIVE = "Migrate the billing service to Postgres 16 this week"
CHILD_RESULT = "Replication lag on db-2 is 3 seconds, safe to switch."


def test_parent_child_continuity_through_the_cli(state, gateways):
    assert run_cli(state, "init").returncode == 0
    res = run_cli(state, "start", "--expect", "memory-continuity=5.0.0", "--expect", "mc=2.1.0")
    assert res.returncode == 0, res.stderr
    gateways.append(state)

    parent = call(state, "session.start", {"agentId": "main"})["result"]["sessionKey"]
    call(state, "session.turn", {"sessionKey": parent, "prompt": OBJECTIVE,
                                 "steps": ["Plan: dump, restore, switch DNS."]})
    parent_state = state / "workspace" / "memory" / "CURRENT_STATE.md"
    assert OBJECTIVE in parent_state.read_text()

    child = call(state, "subagent.spawn", {
        "parentSessionKey": parent,
        "task": "Check the replication lag on db-2",
        "steps": [{"tool": "exec", "args": {"cmd": "psql -c 'select lag'"}, "result": "3s"},
                  CHILD_RESULT],
    })["result"]
    seed = child["turn"]["injectedContext"]
    assert "=== PARENT AGENT CONTEXT ===" in seed and OBJECTIVE in seed

    end = call(state, "subagent.end", {"childSessionKey": child["childSessionKey"],
                                       "outcome": "ok"})["result"]
    assert end["hookErrors"] == []
    assert end["announce"]["state"] == "delivered"
    recovered = parent_state.read_text().split("## Unsurfaced Results", 1)[1]
    assert CHILD_RESULT in recovered

    msgs = call(state, "transcript", {"sessionKey": parent})["result"]["messages"]
    announce = msgs[-1]["content"][0]["text"]
    assert announce.startswith("[Internal task completion event]")
    assert f"session_key: {child['childSessionKey']}" in announce
    assert f"\n{CHILD_RESULT}\n" in announce and "\n3s\n" not in announce

    mc = call(state, "command", {"command": "/mc state"})["result"]["text"]
    assert OBJECTIVE in mc

    res = run_cli(state, "status", "--json")
    assert json.loads(res.stdout)["health"]["ready"] is True


def test_mc_commands_through_the_cli_and_settings_reach_the_gateway(state, gateways):
    """/mc runs from the client CLI; a setting it writes is the one the gateway applies."""
    assert run_cli(state, "init").returncode == 0
    assert run_cli(state, "start").returncode == 0
    gateways.append(state)
    parent = call(state, "session.start", {"agentId": "main"})["result"]["sessionKey"]
    call(state, "session.turn", {"sessionKey": parent, "prompt": OBJECTIVE,
                                 "steps": ["Plan: dump, restore, switch DNS."]})
    child = call(state, "subagent.spawn", {"parentSessionKey": parent,
                                           "task": "Check the replication lag on db-2",
                                           "steps": [CHILD_RESULT]})["result"]

    def mc(args: str) -> str:
        return call(state, "command", {"command": f"/mc {args}"})["result"]["text"]

    overview = mc("subagents")
    assert "Subagent State Overview" in overview and OBJECTIVE[:40] in overview
    assert child["childSessionKey"].rsplit(":", 1)[1] in overview  # the child's own file
    assert "/mc recall" in mc("help")

    assert "autoExtract = false" in mc("settings autoExtract false")
    config = json.loads((state / "openclaw.json").read_text())
    assert config["plugins"]["entries"]["memory-continuity"]["config"]["autoExtract"] is False
    call(state, "session.turn", {"sessionKey": parent,
                                 "prompt": "Now rewrite the onboarding guide from scratch",
                                 "steps": ["Sure."]})
    parent_state = (state / "workspace" / "memory" / "CURRENT_STATE.md").read_text()
    assert OBJECTIVE in parent_state and "onboarding guide" not in parent_state

    refused = call(state, "command", {"command": "/mc settings maxArchiveCount -3"})
    assert "maxArchiveCount" in json.dumps(refused)
    config_after = json.loads((state / "openclaw.json").read_text())
    assert config_after == config  # a refused value changes nothing


def test_a_paused_child_is_recovered_exactly_once_across_a_gateway_restart(state, gateways):
    """Pause (compaction), restart the gateway, then the final answer: one note, that answer."""
    assert run_cli(state, "init").returncode == 0
    assert run_cli(state, "start").returncode == 0, "start"
    gateways.append(state)
    parent = call(state, "session.start", {"agentId": "main"})["result"]["sessionKey"]
    call(state, "session.turn", {"sessionKey": parent, "prompt": OBJECTIVE,
                                 "steps": ["Plan: dump, restore, switch DNS."]})
    child = call(state, "subagent.spawn", {
        "parentSessionKey": parent, "task": "Check the replication lag on db-2",
        "steps": [{"text": "Let me search.", "tool": "exec", "args": {"cmd": "psql"},
                   "result": "lag 3s"}, {"compaction": True}],
    })["result"]["childSessionKey"]
    end = call(state, "subagent.end", {"childSessionKey": child, "outcome": "ok"})["result"]
    assert end["announce"]["state"] == "pending"
    parent_state = state / "workspace" / "memory" / "CURRENT_STATE.md"
    assert "Subagent" not in parent_state.read_text()

    assert run_cli(state, "restart").returncode == 0
    turn = call(state, "session.turn", {"sessionKey": child, "prompt": "continue",
                                        "steps": [CHILD_RESULT]})["result"]
    assert turn["announce"]["state"] == "delivered" and turn["endedHookErrors"] == []
    assert run_cli(state, "restart").returncode == 0
    again = call(state, "subagent.end", {"childSessionKey": child, "outcome": "ok"})["result"]
    assert again["alreadyEnded"] is True
    call(state, "session.turn", {"sessionKey": child, "prompt": "more?", "steps": ["No."]})

    notes = parent_state.read_text().split("## Unsurfaced Results", 1)[1]
    assert notes.count("Subagent \"main\" completed.") == 1
    assert f"Result: {CHILD_RESULT}" in notes and "Let me search." not in notes
