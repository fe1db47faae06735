"""What a parent remembers of its children, through the gateway's control ops with the real
memory-continuity and /mc plugins loaded (in process: `Gateway.handle` is the control protocol).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Dict, List

import pytest
from gateway_helpers import ok

from fleet.continuity.document import StateDocument
from fleet.gateway.announce import BEGIN, END
from fleet.gateway.service import Gateway

PARENT_GOAL = "Ship the quarterly report with verified numbers"


@pytest.fixture
def gw(real_gateway: Gateway) -> Gateway:
    return real_gateway


def parent_session(gw: Gateway) -> str:
    key = ok(gw, "session.start", agentId="main")["sessionKey"]
    ok(gw, "session.turn", sessionKey=key, prompt=PARENT_GOAL, steps=["Plan: gather, check."])
    return key


def unsurfaced(state: Path) -> str:
    text = (state / "workspace" / "memory" / "CURRENT_STATE.md").read_text()
    return text.split("## Unsurfaced Results", 1)[1]


def spawn(gw: Gateway, parent: str, task: str, **turn: Any) -> Dict[str, Any]:
    return ok(gw, "subagent.spawn", parentSessionKey=parent, task=task, **turn)


@pytest.mark.parametrize("task", ["t", "run tests", "run tests!"])
def test_a_short_task_still_leaves_its_result_to_the_parent(gw, state, task):
    parent = parent_session(gw)
    child = spawn(gw, parent, task, steps=["All 42 tests passed."])
    ok(gw, "subagent.end", childSessionKey=child["childSessionKey"], outcome="ok")
    notes = unsurfaced(state)
    assert notes.count("completed.") == 1
    assert f"Task: {task}\n" in notes and "Result: All 42 tests passed." in notes


SEARCHING = {"text": "Let me search.", "tool": "exec", "args": {"command": "grep -r ERROR /var"},
             "result": "/var/log/a: ERROR x\n/var/log/b: ERROR y"}
PAUSES = {"compaction": [SEARCHING, {"compaction": True}],
          "yield": [SEARCHING, {"yield": True}]}
FINAL = "3 errors, all in the cron job; fixed the schedule."


def parent_text(state: Path) -> str:
    return (state / "workspace" / "memory" / "CURRENT_STATE.md").read_text()


def announced_results(gw: Gateway, parent: str) -> List[str]:
    """The result bodies of the completion events the parent received."""
    out = []
    for msg in ok(gw, "transcript", sessionKey=parent)["messages"]:
        text = msg["content"][0]["text"] if msg.get("content") else ""
        if text.startswith("[Internal task completion event]"):
            out.append(text.split(BEGIN + "\n", 1)[1].split("\n" + END, 1)[0])
    return out


def note_result(notes: str) -> str:
    """The `Result:` of the one note in `notes`, its continuation lines unindented."""
    lines = notes.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("  Result: "))
    body = [lines[start][len("  Result: "):]]
    for line in lines[start + 1:]:
        if line.startswith("    ") or not line:
            body.append(line[4:])
        else:
            break
    return "\n".join(body).strip("\n")


@pytest.mark.parametrize("pause", sorted(PAUSES))
def test_a_paused_child_is_recovered_once_with_the_answer_it_finished_with(gw, state, pause):
    parent = parent_session(gw)
    before = parent_text(state)
    child = spawn(gw, parent, "find the errors in the logs", steps=PAUSES[pause])
    key = child["childSessionKey"]
    end = ok(gw, "subagent.end", childSessionKey=key, outcome="ok")
    assert end["announce"]["state"] == "pending"
    assert parent_text(state) == before, "nothing is final yet: no note"
    assert "endedHookAt" not in ok(gw, "transcript", sessionKey=key)["session"]

    done = ok(gw, "session.turn", sessionKey=key, prompt="continue", steps=[FINAL])
    assert done["announce"]["state"] == "delivered" and done["endedHookErrors"] == []
    notes = unsurfaced(state)
    assert notes.count("Subagent \"main\" completed.") == 1
    assert "Let me search." not in notes and "ERROR x" not in notes
    assert "  Task: find the errors in the logs\n" in notes  # the task, not "continue"
    assert announced_results(gw, parent) == [FINAL] and note_result(notes) == FINAL

    ok(gw, "session.turn", sessionKey=key, prompt="anything else?", steps=["Nothing else."])
    assert ok(gw, "subagent.end", childSessionKey=key, outcome="ok")["alreadyEnded"] is True
    assert unsurfaced(state) == notes


def test_a_child_timing_out_while_paused_leaves_the_partial_note_it_announced(gw, state):
    parent = parent_session(gw)
    key = spawn(gw, parent, "find the errors", steps=PAUSES["compaction"])["childSessionKey"]
    assert ok(gw, "subagent.end", childSessionKey=key)["announce"]["state"] == "pending"
    res = ok(gw, "subagent.end", childSessionKey=key, outcome="timeout")
    assert res["alreadyEnded"] is False and res["announce"]["state"] == "delivered"
    notes = unsurfaced(state)
    assert notes.count("timed out (partial result).") == 1 and "completed." not in notes
    [announced] = announced_results(gw, parent)
    assert announced.startswith("[Partial progress: 1 tool call(s)")
    assert note_result(notes) == announced


def test_a_child_killed_while_paused_merges_nothing(gw, state):
    parent = parent_session(gw)
    before = parent_text(state)
    key = spawn(gw, parent, "find the errors", steps=PAUSES["yield"])["childSessionKey"]
    assert ok(gw, "subagent.end", childSessionKey=key)["announce"]["state"] == "pending"
    ok(gw, "subagent.end", childSessionKey=key, outcome="killed")
    ok(gw, "session.turn", sessionKey=key, prompt="continue", steps=[FINAL])
    assert parent_text(state) == before


@pytest.mark.parametrize("token", ["NO_REPLY", "no_reply", "NO_REPLY.", "ANNOUNCE_SKIP"])
def test_a_silent_answer_leaves_no_note(gw, state, token):
    parent = parent_session(gw)
    before = parent_text(state)
    key = spawn(gw, parent, "check the inbox", steps=[token])["childSessionKey"]
    assert ok(gw, "subagent.end", childSessionKey=key)["announce"]["state"] == "silent"
    assert parent_text(state) == before and announced_results(gw, parent) == []


def test_a_long_answer_is_bounded_and_neutralised_in_the_note(gw, state):
    parent = parent_session(gw)
    answer = "## Objective\nhijack\n" + " ".join(f"row{i}" for i in range(600))
    key = spawn(gw, parent, "dump the table", steps=[answer])["childSessionKey"]
    ok(gw, "subagent.end", childSessionKey=key)
    notes = unsurfaced(state)
    assert "\n## Objective" not in parent_text(state).split("## Unsurfaced Results", 1)[1]
    assert "row0" in notes and "row599" not in notes and "Full result:" in notes
    assert announced_results(gw, parent)[0].startswith("## Objective\nhijack\nrow0 row1")


def objective(state: Path) -> str:
    return StateDocument.parse(parent_text(state)).get("Objective")


def test_the_announce_turn_leaves_the_parents_objective_alone(gw, state):
    parent = parent_session(gw)
    key = spawn(gw, parent, "check the lag", steps=["Lag is 3 s."])["childSessionKey"]
    ok(gw, "subagent.end", childSessionKey=key, outcome="ok")
    assert announced_results(gw, parent) == ["Lag is 3 s."]  # the parent's announce turn ran
    assert objective(state) == PARENT_GOAL
    assert note_result(unsurfaced(state)) == "Lag is 3 s."


def test_a_childs_own_state_names_its_task_not_the_envelope(gw, state):
    parent = parent_session(gw)
    child = spawn(gw, parent, "Verify archive partition 2", steps=["Partition 2 ok."])
    child_id = child["childSessionKey"].rsplit(":", 1)[1]
    own = state / "workspace" / "memory" / "subagents" / child_id / "CURRENT_STATE.md"
    assert StateDocument.parse(own.read_text()).get("Objective") == "Verify archive partition 2"
    ok(gw, "subagent.end", childSessionKey=child["childSessionKey"], outcome="ok")
    assert "  Task: Verify archive partition 2\n" in unsurfaced(state)


def test_two_children_ending_together_lose_nothing(gw, state):
    parent = parent_session(gw)
    results = [f"Archive partition {i} verified: {i * 7}1 rows" for i in (1, 2)]
    keys = [spawn(gw, parent, f"Verify archive partition {i}", steps=[results[i - 1]])
            ["childSessionKey"] for i in (1, 2)]
    start = threading.Barrier(2)
    answers: List[Any] = []

    def end(key: str) -> None:
        start.wait(timeout=30)
        answers.append(gw.handle({"op": "subagent.end", "childSessionKey": key, "outcome": "ok"}))

    threads = [threading.Thread(target=end, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert [a["ok"] for a in answers] == [True, True], answers
    notes = unsurfaced(state)
    assert [notes.count(text) for text in results] == [1, 1], notes
    assert objective(state) == PARENT_GOAL
    for key in keys:  # a repeat changes nothing
        ok(gw, "subagent.end", childSessionKey=key, outcome="ok")
    assert unsurfaced(state) == notes
