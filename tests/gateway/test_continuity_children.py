"""What a parent remembers of its children, through the gateway's control ops with the real
memory-continuity and /mc plugins loaded (in process: `Gateway.handle` is the control protocol).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest
from gateway_helpers import ok

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
