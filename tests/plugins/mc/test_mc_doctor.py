"""/mc doctor [agent|--all]: the continuity doctor from chat."""

from __future__ import annotations

from mc_helpers import state_text


def test_doctor_default_agent_is_healthy(mc):
    mc.write_state()
    body = mc("doctor")
    assert body.startswith("Continuity doctor: main\n")
    assert "Overall status: OK" in body and "(exit 0:" in body


def test_doctor_all_lists_every_agent_and_child(mc):
    mc.write_state()
    child = mc.mem() / "subagents" / "kid" / "CURRENT_STATE.md"
    child.parent.mkdir(parents=True)
    child.write_text(state_text(unsurfaced='[2026-03-31T11:00:00.000Z] Subagent "kid" '
                                           'completed.\n  Result: The kid found the bug'))
    (mc.state / "agents" / "ops" / "sessions").mkdir(parents=True)
    (mc.state / "agents" / "ops" / "sessions" / "s.jsonl").write_text("{}\n")
    body = mc("doctor --all")
    assert "main/kid:" in body and "Unsurfaced Results waits for review" in body
    assert "ops:" in body and "[CRITICAL]" in body
    assert body.rstrip().endswith("(exit 2: 0 healthy, 1 warnings, 2 critical)")
    assert "Overall status: CRITICAL" in body


def test_doctor_unknown_agent(mc):
    assert mc("doctor ghost") == 'Agent "ghost" not found.'
    assert mc("doctor ../etc") == 'Agent "../etc" not found.'
