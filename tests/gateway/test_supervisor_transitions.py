"""Supervisor: legal moves only; terminal states stay terminal."""

from __future__ import annotations

import pytest

from fleet.gateway import supervisor as sv


def test_run_goes_through_waiting_input_and_completes():
    s = sv.Supervisor()
    run = s.start("owner")["runId"]
    s.transition(run, sv.WAITING_INPUT)
    assert s.active("owner") == run
    s.transition(run, sv.RUNNING)
    s.transition(run, sv.COMPLETED)
    assert s.state(run) == sv.COMPLETED
    assert s.active("owner") is None
    assert s.runs("owner")[0]["history"] == ["running", "waiting_input", "running", "completed"]


@pytest.mark.parametrize("terminal", [sv.COMPLETED, sv.FAILED, sv.CANCELLED])
@pytest.mark.parametrize("target", sv.STATES)
def test_terminal_states_refuse_every_move(terminal, target):
    s = sv.Supervisor()
    run = s.start("o")["runId"]
    s.transition(run, terminal)
    with pytest.raises(sv.IllegalTransition, match=f"cannot go from {terminal} to {target}"):
        s.transition(run, target)
    assert s.state(run) == terminal


def test_waiting_input_cannot_complete_without_running_again():
    s = sv.Supervisor()
    run = s.start("o")["runId"]
    s.transition(run, sv.WAITING_INPUT)
    with pytest.raises(sv.IllegalTransition):
        s.transition(run, sv.COMPLETED)
    with pytest.raises(sv.IllegalTransition):
        s.transition(run, sv.WAITING_INPUT)


def test_unknown_state_and_unknown_run_are_refused():
    s = sv.Supervisor()
    run = s.start("o")["runId"]
    with pytest.raises(sv.IllegalTransition, match="unknown state"):
        s.transition(run, "paused")
    with pytest.raises(sv.UnknownRun):
        s.transition("nope", sv.COMPLETED)
    with pytest.raises(sv.IllegalTransition):
        s.start("o", run_id=run)
