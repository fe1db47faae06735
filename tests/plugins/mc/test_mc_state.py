"""/mc help, state, state --all, subagents, compact; agent discovery and error replies."""

from __future__ import annotations

from mc_helpers import FakeApi, state_text

from fleet.plugins.mc import plugin

RULE = "\u2500" * 29


def test_register_uses_the_gateway_contract():
    api = FakeApi()
    plugin.register(api)
    handler, description = api.commands["mc"]
    assert callable(handler) and "Memory Continuity" in description


def test_help_lists_sixteen_commands(mc):
    for args in ("", "help", "--help", "-h"):
        body = mc(args)
        lines = body.split("\n")
        assert lines[:2] == ["MC Commands (Memory Continuity)", RULE]
        assert len(lines) == 18 and all(line.startswith("/mc ") for line in lines[2:])
    assert "/mc subagents" in body and "/mc recall <topic>" in body


def test_unknown_subcommand(mc):
    assert mc("status") == "Unknown subcommand: status\n\n" + mc("help")


def test_state_shows_whole_sections(mc):
    mc.write_state(text=state_text(objective="line one\nline two", decisions="- a\n- b\n- c\n- d"))
    assert mc("state") == "\n".join([
        "State: main",
        "Updated: 5m ago",
        RULE,
        "Objective:", "  line one", "  line two", "",
        "Current Step:", "  Testing", "",
        "Key Decisions:", "  - a", "  - b", "  - c", "  ... +1 more lines", "",
        "Next Action:", "  Deploy", "",
        "Blockers:", "  None",
    ])


def test_state_of_other_agent_resolved_from_config(mc):
    # ops lives at a configured path the original plugin's `workspaces/<name>` guess would never
    # find.
    mc.write_state("ops", state_text(objective="Watch the fleet", updated="2026-03-29T12:00:00Z"))
    body = mc("state ops")
    assert body.startswith("State: ops\nUpdated: 2d ago\n")
    assert "Objective:\n  Watch the fleet\n" in body


def test_state_invalid_timestamp_prints_unknown(mc):
    # Flaw of the original plugin, fixed: it printed `NaNd ago`.
    mc.write_state(text=state_text(updated="garbage"))
    assert mc("state").split("\n")[1] == "Updated: unknown"
    mc.write_state(text=state_text().replace("> Last updated: 2026-03-31T11:55:00.000Z\n", ""))
    assert mc("state").split("\n")[1] == "Updated: unknown"


def test_state_missing_file_and_unknown_agents(mc, tmp_path):
    assert mc("state") == 'No state file for "main".'
    assert mc("state ghost") == 'Agent "ghost" not found.'
    # A guessed directory is not an agent; a traversal attempt touches nothing.
    (mc.state / "workspaces" / "guess" / "memory").mkdir(parents=True)
    assert mc("state guess") == 'Agent "guess" not found.'
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert mc("clear ../../x") == 'Agent "../../x" not found.'
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_state_all(mc):
    mc.write_state(text=state_text(objective="x" * 60))
    mc.write_state("ops", state_text(objective="Watch the fleet", updated="2026-03-31T09:30:00Z"))
    assert mc("state --all") == "\n".join([
        "Memory States (2 agents)",
        RULE,
        f"{'main':<20} {'5m ago':<10} {'x' * 50}\u2026",
        f"{'ops':<20} {'2h 30m ago':<10} Watch the fleet",
    ])


def test_state_all_lists_agents_with_memory_only(mc):
    assert mc("state --all") == "No agents with memory found."
    mc.mem("ops").mkdir(parents=True)
    assert mc("state --all").split("\n")[2] == f"{'ops':<20} (no state)"


def test_subagents_overview_includes_child_files(mc):
    mc.write_state(text=state_text(objective="Parent goal\nmore", unsurfaced="child says hi"))
    child = mc.mem() / "subagents" / "abc-123" / "CURRENT_STATE.md"
    child.parent.mkdir(parents=True)
    child.write_text(state_text(objective="Child task", updated="2026-03-31T11:00:00.000Z"))
    (mc.mem() / "subagents" / "empty-dir").mkdir()
    mc.mem("ops").mkdir(parents=True)
    assert mc("subagents") == "\n".join([
        "Subagent State Overview",
        "\u2550" * 23,
        "",
        "[main] Updated: 2026-03-31T11:55:00.000Z",
        "  Objective: Parent goal",
        "  Unsurfaced: child says hi",
        "  Subagents (1):",
        "    [abc-123] Updated: 2026-03-31T11:00:00.000Z",
        "      Objective: Child task",
        "",
        "[ops] No state file",
    ])


def test_compact_keeps_headings_and_archives_original(mc):
    body = "\n".join(f"step {i}" for i in range(6))
    original = state_text(step=body, decisions="- a\n- b\n- c\n- d\n- e")
    path = mc.write_state(text=original)
    reply = mc("compact")
    text = path.read_text()
    before = len(original.split("\n"))
    after = len(text.split("\n"))
    assert reply.split("\n")[0] == f'\u2713 Compacted "main" state: {before} \u2192 {after} lines'
    assert "step 2" in text and "step 3" not in text
    assert "- e" in text
    assert "## Unsurfaced Results" in text
    assert "2026-03-31T11:55:00.000Z" not in text  # timestamp refreshed
    archives = list((mc.mem() / "session_archive").glob("*.md"))
    assert [a.read_text() for a in archives] == [original]
    assert reply.split("\n")[1] == f"  Previous state archived as {archives[0].stem}."


def test_compact_without_state(mc):
    assert mc("compact") == 'No state for "main".'


def test_compact_short_state_changes_nothing(mc):
    original = state_text()
    path = mc.write_state(text=original)
    n = len(original.split("\n"))
    assert mc("compact") == f'\u2713 Compacted "main" state: {n} \u2192 {n} lines'
    assert path.read_text() == original
    assert not (mc.mem() / "session_archive").exists()


def test_broken_config_is_an_unfenced_mc_error(mc):
    (mc.state / "openclaw.json").write_text("{not json")
    text = mc.raw("state")
    assert text.startswith("MC error: ") and "openclaw.json" in text and "```" not in text
