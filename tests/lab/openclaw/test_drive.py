"""A real-OpenClaw test's failure says what happened to the parent's children: which requests the
scripted model got, each child's state and the parent's Unsurfaced Results, so a child that never
ran can be told from a result that was lost (`drive.wait_for(..., explain=children_story)`)."""

from __future__ import annotations

import json

import pytest

from fleet.deploy.inventory import Host
from lab.openclaw.drive import Driver, children_story, wait_for


def _request(*users: str, tool_before_last: bool = False) -> dict:
    messages = [{"role": "user", "content": text} for text in users]
    if tool_before_last:
        messages.insert(-1, {"role": "tool", "content": "spawned"})
    return {"body": {"messages": messages}}


def test_a_timed_out_wait_tells_each_request_and_child(tmp_path):
    driver = Driver(Host(name="oc-a", connection="local", state_dir=str(tmp_path)))
    (tmp_path / "model").mkdir()
    requests = [_request("Earlier turn"),
                _request("Check archive partition 1 [[spawn: Verify archive partition 1]]"),
                _request("[Subagent Task] Verify archive partition 1"),
                _request("[Internal task completion event] part1 ended")]
    (tmp_path / "model" / "requests.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in requests))
    child = tmp_path / "workspace" / "memory" / "subagents" / "part1"
    child.mkdir(parents=True)
    (child / "CURRENT_STATE.md").write_text("## Objective\nVerify archive partition 1\n")
    (child.parent.parent / "CURRENT_STATE.md").write_text(
        "## Objective\nCheck\n## Unsurfaced Results\n- Result: partition 2 verified\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "openclaw.log").write_text(
        "model ready\nsubagent part1 announce failed: timeout\n")

    with pytest.raises(AssertionError) as failed:
        wait_for("partition 1's result", lambda: False, timeout=0, every=0,
                 explain=lambda: children_story(driver, since=1))
    story = str(failed.value)
    assert "timed out after 0s waiting for partition 1's result" in story
    assert "Earlier turn" not in story  # before `since`
    assert "#1 parent: 'Check archive partition 1" in story
    assert "#2 child: '[Subagent Task] Verify archive partition 1'" in story
    assert "#3 completion: '[Internal task completion event] part1 ended'" in story
    assert "child part1:\n    ## Objective\n    Verify archive partition 1" in story
    assert "- Result: partition 2 verified" in story
    assert "subagent part1 announce failed: timeout" in story
    assert "model ready" not in story


def test_the_story_of_a_host_that_wrote_nothing_yet(tmp_path):
    driver = Driver(Host(name="oc-a", connection="local", state_dir=str(tmp_path)))
    assert children_story(driver) == "model requests:"


def test_a_story_that_fails_does_not_hide_the_timeout():
    def broken() -> str:
        raise OSError("state dir gone")

    with pytest.raises(AssertionError) as failed:
        wait_for("the result", lambda: False, timeout=0, every=0, explain=broken)
    assert str(failed.value).startswith("timed out after 0s waiting for the result")
    assert "no account of the state: OSError: state dir gone" in str(failed.value)
