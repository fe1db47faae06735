"""The task inside OpenClaw's subagent envelope; anything else is given back as it is."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.continuity import subagenttask

# The first message of a real OpenClaw 2026.9.6 child (sessions_spawn, mode "run").
OPENCLAW_CHILD_MESSAGE = (
    "[Subagent Context] You are running as a subagent (depth 1/5). Complete the current "
    "[Subagent Task]; inherited conversation is background context, not your assignment.\n\n"
    "[Subagent Task]\n\nVerify archive partition 2 [[reply: Archive partition 2 verified]]\n\n"
    "Begin. Execute the assigned task to completion.")


def test_the_task_of_a_real_openclaw_child_message():
    assert subagenttask.unwrap(OPENCLAW_CHILD_MESSAGE) == (
        "Verify archive partition 2 [[reply: Archive partition 2 verified]]")


def test_a_persistent_childs_envelope_is_unwrapped_too():
    wrapped = subagenttask.wrap("Watch the queue", depth=2, persistent=True)
    assert "This subagent session is persistent" in wrapped
    assert subagenttask.unwrap(wrapped) == "Watch the queue"


@pytest.mark.parametrize("text", [
    "Please check the lag",                                       # a plain task
    "[Subagent Context] Your prior run ended while waiting.",     # envelope without a task
    "[Subagent Context] x\n\n[Subagent Task]\n\n",                # empty task
    "Quote: [Subagent Context] ... [Subagent Task]\n\nnot an envelope",
])
def test_text_that_is_not_an_envelope_with_a_task_is_kept_as_is(text):
    assert subagenttask.unwrap(text) == text


@given(st.text(min_size=1).filter(lambda t: t.strip()), st.integers(1, 9), st.booleans())
def test_wrap_then_unwrap_gives_the_task_back(task, depth, persistent):
    assert subagenttask.unwrap(subagenttask.wrap(task, depth, persistent=persistent)) == \
        task.strip()
