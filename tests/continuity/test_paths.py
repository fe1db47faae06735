from __future__ import annotations

from pathlib import Path

import pytest

from fleet.continuity.paths import (
    InvalidAgentId,
    check_session_key,
    child_state_file,
    child_state_files,
    list_agents,
    load_config,
    parse_session_key,
    resolve_agent_workspace,
    resolve_config_path,
    resolve_state_dir,
    validate_agent_id,
)


def test_state_dir_and_config_path_follow_openclaw():
    assert resolve_state_dir({"OPENCLAW_STATE_DIR": "/s"}) == Path("/s")
    assert resolve_state_dir({"OPENCLAW_HOME": "/h", "HOME": "/x"}) == Path("/h/.openclaw")
    assert resolve_state_dir({"HOME": "/x"}) == Path("/x/.openclaw")
    assert resolve_config_path({"OPENCLAW_CONFIG_PATH": "/c.json"}) == Path("/c.json")
    assert resolve_config_path({}, state_dir=Path("/s")) == Path("/s/openclaw.json")


def test_load_config_missing_and_broken(tmp_path):
    assert load_config(tmp_path / "none.json") == {}
    bad = tmp_path / "openclaw.json"
    bad.write_text("{nope")
    with pytest.raises(ValueError, match=r"openclaw\.json.*line 1"):
        load_config(bad)


def test_workspaces_as_openclaw_resolves_them(tmp_path):
    state = tmp_path
    env = {"HOME": "/home/u"}
    cfg = {"agents": {"list": [{"id": "Main"}, {"id": "coder", "workspace": "~/code"},
                               {"id": "ops"}]}}
    assert resolve_agent_workspace("main", cfg, state, env) == state / "workspace"
    assert resolve_agent_workspace("CODER", cfg, state, env) == Path("/home/u/code")
    assert resolve_agent_workspace("ops", cfg, state, env) == state / "workspace-ops"
    cfg["agents"]["defaults"] = {"workspace": "~/ws"}
    assert resolve_agent_workspace("main", cfg, state, env) == Path("/home/u/ws")
    assert resolve_agent_workspace("ops", cfg, state, env) == Path("/home/u/ws/ops")
    # default agent is the `default: true` entry, not necessarily `main`
    cfg2 = {"agents": {"list": [{"id": "a"}, {"id": "b", "default": True}]}}
    assert resolve_agent_workspace("b", cfg2, state, env) == state / "workspace"
    assert resolve_agent_workspace("a", cfg2, state, env) == state / "workspace-a"
    assert resolve_agent_workspace("main", {}, state, env) == state / "workspace"


def test_list_agents_from_config_and_agent_dirs(tmp_path):
    (tmp_path / "agents" / "extra").mkdir(parents=True)
    (tmp_path / "agents" / "Bad..Name").mkdir(parents=True)
    cfg = {"agents": {"list": [{"id": "coder"}, {"id": "main", "default": True}]}}
    assert list_agents(cfg, tmp_path) == ["main", "coder", "extra"]


@pytest.mark.parametrize("bad", ["", "..", "../x", "a/b", "a\x00b", "x:y", "é", " ", "a" * 200])
def test_unsafe_agent_ids_are_refused(bad, tmp_path):
    with pytest.raises(InvalidAgentId, match="invalid agent id"):
        validate_agent_id(bad)
    with pytest.raises(InvalidAgentId):
        resolve_agent_workspace(bad, {}, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_session_keys_are_normalised():
    key = parse_session_key("  AGENT:Coder::subagent:ABC:subagent:def ")
    assert (key.agent_id, key.rest, key.is_subagent, key.depth, key.child_id) == (
        "coder", "subagent:abc:subagent:def", True, 2, "def")
    assert key.parent_key == "agent:coder:subagent:abc"
    top = parse_session_key("agent:main:subagent:1")
    assert top.parent_key == "agent:main:main"
    plain = parse_session_key("agent:main:telegram:dm:42")
    assert (plain.is_subagent, plain.depth, plain.child_id, plain.parent_key) == (
        False, 0, None, None)


@pytest.mark.parametrize("key", ["agent:../../x:subagent:1", "agent:main:subagent:..%2f",
                                 "agent:a/b:main", "nope", "agent:main", "", None])
def test_hostile_or_malformed_keys_parse_to_none(key):
    assert parse_session_key(key) is None
    with pytest.raises(ValueError):
        check_session_key(key)


def test_child_state_file_stays_under_the_workspace(tmp_path):
    assert child_state_file(tmp_path, "abc-1") == (
        tmp_path / "memory" / "subagents" / "abc-1" / "CURRENT_STATE.md")
    with pytest.raises(InvalidAgentId):
        child_state_file(tmp_path, "../evil")


def test_child_state_files_lists_each_child_once_sorted(tmp_path):
    """Only directories named by a valid, normalised child id and holding a state file count;
    `Child-B/` names the same child as `child-b/` and would report its file twice."""
    for name in ("child-b", "child-a", "Child-B", "bad id", "empty"):
        (tmp_path / "memory" / "subagents" / name).mkdir(parents=True)
    for name in ("child-b", "child-a", "bad id"):
        (tmp_path / "memory" / "subagents" / name / "CURRENT_STATE.md").write_text("x")
    assert child_state_files(tmp_path) == [child_state_file(tmp_path, "child-a"),
                                           child_state_file(tmp_path, "child-b")]
    assert child_state_files(tmp_path / "no-such-workspace") == []
