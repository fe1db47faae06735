"""/mc sessions, tags, summary, search, recall over journals written by record_run."""

from __future__ import annotations

from datetime import datetime

from mc_helpers import state_text

from fleet.continuity import archive, journal

RULE = "\u2500" * 29


def _run(mc, topic, when, agent="main", reply="ok, done"):
    messages = [{"role": "user", "content": topic}, {"role": "assistant", "content": reply}]
    return journal.record_run(mc.ws(agent), messages, {}, now=when)


def test_sessions_list_and_day(mc):
    _run(mc, "build the #deploy pipeline", datetime(2026, 3, 30, 9, 0))
    _run(mc, "fix the flaky tests", datetime(2026, 3, 30, 10, 15))
    _run(mc, "write the release notes", datetime(2026, 3, 31, 8, 0))
    assert mc("sessions") == "\n".join([
        "Session Logs: main (2 days)",
        RULE,
        "2026-03-31     1 session(s)",
        "2026-03-30     2 session(s)",
        "",
        "Use /mc sessions <YYYY-MM-DD> to view a specific day.",
    ])
    day = mc("sessions 2026-03-30")
    assert day.startswith("# Session Log \u2014 2026-03-30\n\n### 09:00\n")
    assert "- **Topic:** fix the flaky tests" in day
    assert mc("sessions main 2026-03-30") == day


def test_sessions_long_day_shows_last_fifty_lines(mc):
    for minute in range(20):
        _run(mc, f"task number {minute:02d} here", datetime(2026, 3, 30, 9, minute))
    lines = mc("sessions 2026-03-30").split("\n")
    total = 2 + 20 * 5 - 1  # header + blank, 5 lines per entry, trailing blank stripped
    assert lines[0] == f"... ({total - 50} earlier lines omitted)"
    assert len(lines) == 51
    assert lines[-1] == "- **Est. tokens:** ~" + lines[-1].split("~")[1]


def test_sessions_errors(mc):
    assert mc("sessions") == 'No session logs for "main".'
    assert mc("sessions 2026-01-01") == "No session log for 2026-01-01."
    assert mc("sessions 2026-1-1") == "Invalid date: 2026-1-1 (use YYYY-MM-DD)"
    assert mc("sessions ghost") == 'Agent "ghost" not found.'


def test_sessions_of_other_agent(mc):
    _run(mc, "watch the ops dashboards", datetime(2026, 3, 30, 9, 0), agent="ops")
    assert mc("sessions ops").startswith("Session Logs: ops (1 days)")


def test_tags_sorted_without_header_tag(mc):
    _run(mc, "work on #infra and #ci", datetime(2026, 3, 29, 9))
    _run(mc, "more #infra work today", datetime(2026, 3, 30, 9))
    _run(mc, "still #infra tasks", datetime(2026, 3, 31, 9))
    # Flaw fixed: the `# Tag Index` title was listed as a bogus 0-day tag.
    assert mc("tags") == "\n".join([
        "Tags: main (2 tags)",
        RULE,
        f"{'#infra':<25}   3 days   latest: 2026-03-31",
        f"{'#ci':<25}   1 days   latest: 2026-03-29",
    ])
    assert mc("tags ops") == 'No tags for "ops".'


def test_summary_list_and_show(mc):
    _run(mc, "build the deploy pipeline", datetime(2026, 3, 29, 9))  # Sunday
    _run(mc, "monday work starts", datetime(2026, 3, 30, 9))  # daily 03-29 + weekly W13
    _run(mc, "tuesday work continues", datetime(2026, 3, 31, 9))  # daily 03-30
    assert mc("summary") == "\n".join([
        "Summaries: main",
        RULE,
        "Daily:",
        "  2026-03-30   1 session(s)",
        "  2026-03-29   1 session(s)",
        "Weekly:",
        "  2026-W13   1 session(s)",
        "",
        "Use /mc summary <YYYY-MM-DD> or /mc summary <YYYY-Www> to view details.",
    ])
    assert mc("summary weekly").split("\n")[2:4] == ["Weekly:", "  2026-W13   1 session(s)"]
    daily = mc("summary 2026-03-29")
    assert daily.startswith("# Daily Summary \u2014 2026-03-29\n\n**Sessions:** 1\n")
    assert daily.endswith("## Topics\n1. build the deploy pipeline")
    assert mc("summary 2026-W13").startswith("# Weekly Summary \u2014 2026-W13\n> 2026-03-23")
    assert mc("summary daily 2026-03-29 main") == daily
    assert mc("summary 2026-03-01") == "No daily summary for 2026-03-01."
    assert mc("summary ops") == 'No summaries for "ops".'


def test_search_groups_sources_and_filters_agent(mc):
    mc.write_state(text=state_text(objective="Deploy the gateway", next_action="deploy again"))
    archive.archive_state(mc.ws(), state_text(objective="old deploy plan"),
                          now=datetime(2026, 3, 30, 9, 0))
    _run(mc, "deploy the fleet now", datetime(2026, 3, 30, 9, 0))
    _run(mc, "ops deploy watch", datetime(2026, 3, 30, 9, 0), agent="ops")
    assert mc("search DEPLOY") == "\n".join([
        'Search: "DEPLOY" (4 hits)',
        RULE,
        "[State]",
        "  main/CURRENT_STATE",
        "    Deploy the gateway",
        "    deploy again",
        "",
        "[Archive]",
        "  main/2026-03-30_09-00",
        "    old deploy plan",
        "    Deploy",
        "",
        "[Session]",
        "  main/2026-03-30",
        "    - **Topic:** deploy the fleet now",
        "  ops/2026-03-30",
        "    - **Topic:** ops deploy watch",
    ])
    only_ops = mc("search deploy ops")
    assert only_ops.startswith('Search: "deploy" (1 hits)') and "main/" not in only_ops


def test_search_is_literal_and_reports_no_match(mc):
    mc.write_state(text=state_text(objective="axb and a+b"))
    assert mc("search a.b") == 'No matches for "a.b".'
    assert "a+b" in mc("search a+b")
    assert mc("search") == (
        "Usage: /mc search <keyword> [agent]\nSearches state (subagents' too), archives, "
        "unsurfaced results, session logs and summaries."
    )


def test_search_caps_entries_per_group(mc):
    for minute in range(7):
        archive.archive_state(mc.ws(), state_text(objective=f"needle {minute}"),
                              now=datetime(2026, 3, 30, 9, minute))
    body = mc("search needle")
    assert body.startswith('Search: "needle" (7 hits)')
    assert body.count("  main/2026-03-30_09-0") == 5
    assert body.endswith("  ... +2 more")


def test_recall_across_agents(mc):
    _run(mc, "deploy gateway to the raspberry pi", datetime(2026, 3, 30, 9, 0))
    _run(mc, "unrelated lunch order", datetime(2026, 3, 30, 10, 0))
    _run(mc, "gateway deploy failed on the oracle host", datetime(2026, 3, 30, 11, 0), "ops")
    archive.archive_state(mc.ws(), state_text(objective="Deploy the gateway everywhere"),
                          now=datetime(2026, 3, 29, 8, 0))
    body = mc("recall gateway deploy raspberry")
    lines = body.split("\n")
    assert lines[:2] == ['Recall: "gateway deploy raspberry" (3 matches, showing top 3)', RULE]
    assert lines[2:5] == [
        "[main] 2026-03-30 09:00  (score: 3)", "  deploy gateway to the raspberry pi", ""]
    assert "[ops] 2026-03-30 11:00  (score: 2)" in lines
    assert "[main] 2026-03-29 08-00  (score: 2)" in lines
    assert "lunch" not in body


def test_recall_single_word_and_errors(mc):
    _run(mc, "investigate the kubernetes upgrade", datetime(2026, 3, 30, 9, 0))
    # The original plugin required two shared words, so a one-word topic never matched.
    assert mc("recall kubernetes").startswith('Recall: "kubernetes" (1 matches, showing top 1)')
    assert mc("recall nothingmatches here") == 'No memories found for "nothingmatches here".'
    assert mc("recall").startswith("Usage: /mc recall <topic>")
