"""before_prompt_build: own snapshot, related history, parent seed, IMPORTANT line."""

from __future__ import annotations

import pytest
from continuity_fakes import write_state

from fleet.continuity.document import StateDocument
from fleet.continuity.snapshot import build_snapshot
from fleet.plugins.memory_continuity.startup import IMPORTANT_LINE


def ws_main(state_dir):
    return state_dir / "workspace"


def main_ctx(state_dir, **extra):
    ctx = {"agentId": "main", "sessionKey": "agent:main:main", "sessionId": "s1",
           "workspaceDir": str(ws_main(state_dir)), "trigger": "user"}
    ctx.update(extra)
    return ctx


def child_ctx(state_dir, key="agent:main:subagent:c1", **extra):
    """A child's `before_prompt_build` ctx as OpenClaw gives it: no requester in it."""
    agent = key.split(":")[1]
    ws = state_dir / ("workspace" if agent == "main" else f"workspace-{agent}")
    ctx = {"runId": "r2", "agentId": agent, "sessionKey": key, "sessionId": "s2",
           "workspaceDir": str(ws), "trigger": "user"}
    ctx.update(extra)
    return ctx


def spawned(api, key, requester="agent:main:main"):
    """`subagent_spawned` as OpenClaw fires it before the child's first prompt build."""
    event = {"runId": "r2", "childSessionKey": key, "agentId": key.split(":")[1],
             "mode": "run", "threadRequested": False}
    api.fire("subagent_spawned", event,
             {"runId": "r2", "childSessionKey": key, "requesterSessionKey": requester})


def child_start(api, state_dir, key="agent:main:subagent:c1", requester="agent:main:main"):
    if requester:
        spawned(api, key, requester)
    return api.fire("before_prompt_build", {"prompt": "task", "messages": []},
                    child_ctx(state_dir, key=key))


def snap_of(path):
    return build_snapshot(StateDocument.parse(path.read_text()))


def test_register_wires_openclaws_hooks_and_logs_success(api):
    assert {h: [p for p, _ in v] for h, v in api.hooks.items()} == {
        "before_prompt_build": [10], "before_compaction": [10], "before_reset": [10],
        "agent_end": [90], "session_end": [90], "subagent_spawned": [50], "llm_input": [50],
        "subagent_ended": [50]}
    assert api.logger.lines[-1] == ("info", "[memory-continuity] Plugin registered successfully")


def test_own_snapshot_then_important_line(api, state_dir):
    own = ws_main(state_dir) / "memory" / "CURRENT_STATE.md"
    write_state(own, objective="Ship v5\nwith tests", Next_Action="run CI")
    out = api.fire("before_prompt_build", {"prompt": "hi"}, main_ctx(state_dir))
    assert out == snap_of(own) + "\n\n" + IMPORTANT_LINE
    assert "Objective: Ship v5\n  with tests" in out
    assert IMPORTANT_LINE == (
        "IMPORTANT: The above is recovered working state from a previous session. If the user "
        "appears to be resuming work, surface this state immediately before any generic greeting."
        " This is a continuity requirement, not optional.")


def test_placeholder_or_missing_state_injects_nothing(api, state_dir):
    assert api.fire("before_prompt_build", {}, main_ctx(state_dir)) is None
    write_state(ws_main(state_dir) / "memory" / "CURRENT_STATE.md", objective="idle")
    assert api.fire("before_prompt_build", {}, main_ctx(state_dir)) is None


def test_related_history_unless_disabled(api, state_dir):
    ws = ws_main(state_dir)
    write_state(ws / "memory" / "CURRENT_STATE.md", objective="Repair the deploy pipeline")
    daily = ws / "memory" / "summaries" / "daily"
    daily.mkdir(parents=True)
    (daily / "2026-03-01.md").write_text("# Daily\n\n## Topics\n1. deploy pipeline broke\n")
    out = api.fire("before_prompt_build", {}, main_ctx(state_dir))
    assert "=== END RECOVERY ===\n\n=== RELATED HISTORY ===\n[2026-03-01] 1. deploy pipeline" \
        in out
    api.plugin_config = {"relevanceInjection": False}
    assert "RELATED HISTORY" not in api.fire("before_prompt_build", {}, main_ctx(state_dir))


# Fixed flaw of the original plugin: a fresh child (no own state) still gets its parent's seed.
def test_fresh_child_gets_parent_seed(api, state_dir):
    parent = ws_main(state_dir) / "memory" / "CURRENT_STATE.md"
    write_state(parent, objective="Parent objective")
    out = child_start(api, state_dir)
    assert out == ("=== PARENT AGENT CONTEXT ===\nThe following is the parent agent's working "
                   "state. Use this to understand the broader task context.\n"
                   + snap_of(parent) + "\n=== END PARENT CONTEXT ===\n\n" + IMPORTANT_LINE)


def test_a_child_spawned_by_a_running_turn_is_seeded_with_what_that_turn_asks(api, state_dir):
    """The parent's model is still answering when its child starts (the turn's checkpoint comes
    at its agent_end): the seed carries that turn's request, then the checkpoint takes over."""
    write_state(ws_main(state_dir) / "memory" / "CURRENT_STATE.md", objective="Earlier request")
    asked = "Check the replication lag on db-2 before the switch"
    api.fire("before_prompt_build", {"prompt": f"[Fri 2026-12-04 13:45 UTC] {asked}"},
             main_ctx(state_dir, runId="p1"))
    seeded = child_start(api, state_dir)
    seed = seeded.split("=== PARENT AGENT CONTEXT ===", 1)[1]
    assert f"Objective: {asked}" in seed and "Earlier request" not in seed
    api.fire("agent_end", {"messages": [{"role": "user", "content": "Another thing entirely"},
                                        {"role": "assistant", "content": "Done."}]},
             main_ctx(state_dir, runId="p1"))  # its checkpoint holds the request from here on
    later = child_start(api, state_dir, key="agent:main:subagent:c9")
    assert "Objective: Another thing entirely" in later and asked not in later


# Fixed flaw of the original plugin: a same-agent child reads its own per-child file, not the
# parent's, and the parent seed is the parent's file, so nothing is duplicated.
def test_same_agent_child_reads_own_file_and_seed_is_the_parents(api, state_dir):
    ws = ws_main(state_dir)
    write_state(ws / "memory" / "CURRENT_STATE.md", objective="Parent objective")
    write_state(ws / "memory" / "subagents" / "c1" / "CURRENT_STATE.md",
                objective="Child objective")
    out = child_start(api, state_dir)
    own, seed = out.split("=== PARENT AGENT CONTEXT ===")
    assert "Objective: Child objective" in own and "Parent objective" not in own
    assert "Objective: Parent objective" in seed and "Child objective" not in seed


def test_child_never_gets_its_own_file_as_parent(api, state_dir):
    key = "agent:main:subagent:c1"
    write_state(ws_main(state_dir) / "memory" / "subagents" / "c1" / "CURRENT_STATE.md",
                objective="Child objective")
    out = child_start(api, state_dir, key=key, requester=key)
    assert "PARENT AGENT CONTEXT" not in out
    assert out.count("Objective: Child objective") == 1


# Fixed flaw of the original plugin: the parent is the requester, not the agent named in the child's
# key.
def test_cross_agent_child_is_seeded_from_the_requester(api, state_dir):
    write_state(ws_main(state_dir) / "memory" / "CURRENT_STATE.md", objective="Main's plan")
    write_state(state_dir / "workspace-coder" / "memory" / "CURRENT_STATE.md",
                objective="Coder's own long-term state")
    out = child_start(api, state_dir, key="agent:coder:subagent:k9")
    assert "Objective: Main's plan" in out
    assert "Coder's own long-term state" not in out


def test_without_requester_the_parent_chain_is_used(api, state_dir):
    ws = ws_main(state_dir)
    write_state(ws / "memory" / "subagents" / "a" / "CURRENT_STATE.md", objective="Middle plan")
    write_state(ws / "memory" / "CURRENT_STATE.md", objective="Top plan")
    out = child_start(api, state_dir, key="agent:main:subagent:a:subagent:b", requester=None)
    assert "Objective: Middle plan" in out and "Top plan" not in out


def test_seed_can_be_disabled(api, state_dir):
    write_state(ws_main(state_dir) / "memory" / "CURRENT_STATE.md", objective="Parent objective")
    api.plugin_config = {"subagentSeed": False}
    assert child_start(api, state_dir) is None


def test_workspace_is_resolved_when_ctx_has_none(api, state_dir):
    write_state(state_dir / "workspace-coder" / "memory" / "CURRENT_STATE.md",
                objective="Coder plan")
    out = api.fire("before_prompt_build", {},
                   {"agentId": "coder", "sessionKey": "agent:coder:main"})
    assert "Objective: Coder plan" in out


def test_invalid_config_is_an_error_naming_the_key_and_changes_nothing(api, state_dir):
    write_state(ws_main(state_dir) / "memory" / "CURRENT_STATE.md", objective="Plan")
    api.plugin_config = {"relevanceInjection": "yes"}
    # raised to the hook bus (which reports it in the run's hookErrors), and logged
    with pytest.raises(ValueError, match="relevanceInjection"):
        api.fire("before_prompt_build", {}, main_ctx(state_dir))
    assert "relevanceInjection" in api.logger.text("error")


def test_non_agent_session_key_still_uses_the_ctx_workspace(api, state_dir):
    write_state(ws_main(state_dir) / "memory" / "CURRENT_STATE.md", objective="Plan")
    out = api.fire("before_prompt_build", {}, main_ctx(state_dir, sessionKey="global"))
    assert "Objective: Plan" in out


def test_requester_recorded_at_spawn_survives_a_new_plugin_instance(api, state_dir, make_api):
    """The record is a file: a restarted gateway (or OpenClaw worker) still finds the parent."""
    write_state(state_dir / "workspace-ops" / "memory" / "CURRENT_STATE.md",
                objective="Ops parent plan")
    spawned(api, "agent:main:subagent:x1", requester="agent:ops:main")
    fresh = make_api()
    out = fresh.fire("before_prompt_build", {}, child_ctx(state_dir, key="agent:main:subagent:x1"))
    assert "Objective: Ops parent plan" in out


def test_spawn_with_a_bad_key_records_nothing_and_warns(api, state_dir):
    spawned(api, "agent:main:subagent:../../x")
    assert not (state_dir / "memory-continuity" / "requesters.json").exists()
    assert "not recorded" in api.logger.text("warn")


class Unreadable(list):
    """An event field that fails on any look at its content."""

    def _refuse(self, *_args, **_kwargs):
        raise AssertionError("the hook read an event field it declares unread")

    __iter__ = __len__ = __getitem__ = __contains__ = __bool__ = __reversed__ = _refuse


def test_hooks_never_read_the_event_fields_the_openclaw_entry_leaves_out(api, state_dir):
    """UNREAD_EVENT_FIELDS (mirrored by index.js) lets the bridge drop before_prompt_build's
    and llm_input's transcript from every call; the answers must be the same with it as
    without it."""
    from fleet.plugins.memory_continuity.plugin import UNREAD_EVENT_FIELDS

    write_state(ws_main(state_dir) / "memory" / "CURRENT_STATE.md", objective="Ship v5")
    spawned(api, "agent:main:subagent:c1")
    assert UNREAD_EVENT_FIELDS  # the entry relies on it
    for hook, fields in UNREAD_EVENT_FIELDS.items():
        for ctx in (main_ctx(state_dir), child_ctx(state_dir)):
            without = api.fire(hook, {"prompt": "go on"}, dict(ctx))
            event = {"prompt": "go on", **{f: Unreadable([{"role": "user"}]) for f in fields}}
            assert api.fire(hook, event, dict(ctx)) == without
            if hook == "before_prompt_build":
                assert without and "Ship v5" in without
