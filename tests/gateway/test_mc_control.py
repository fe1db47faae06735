"""`/mc` through the gateway's `command` control op, with the real plugins loaded."""

from __future__ import annotations

import json

from gateway_helpers import ok

PARENT_GOAL = "Ship the quarterly report with verified numbers"


def test_an_unknown_subcommand_is_an_error_that_carries_the_help(real_gateway):
    resp = real_gateway.handle({"op": "command", "command": "/mc stauts"})
    assert resp["ok"] is False
    assert "Unknown subcommand: stauts" in resp["error"]
    help_text = ok(real_gateway, "command", command="/mc help")["text"]
    assert help_text.strip("`\n") in resp["error"]


def test_a_setting_says_it_applies_now_and_the_next_run_uses_it(real_gateway, state):
    gw = real_gateway
    key = ok(gw, "session.start")["sessionKey"]
    ok(gw, "session.turn", sessionKey=key, prompt=PARENT_GOAL, steps=["Plan: gather, check."])
    reply = ok(gw, "command", command="/mc settings autoExtract false")["text"]
    assert "Restart" not in reply and "no restart needed" in reply
    config = json.loads((state / "openclaw.json").read_text())
    assert config["plugins"]["entries"]["memory-continuity"]["config"]["autoExtract"] is False
    ok(gw, "session.turn", sessionKey=key, prompt="Rewrite the onboarding guide from scratch",
       steps=["Sure."])
    saved = (state / "workspace" / "memory" / "CURRENT_STATE.md").read_text()
    assert PARENT_GOAL in saved and "onboarding guide" not in saved


def test_search_finds_archived_recovery_notes_and_subagent_state(real_gateway, state):
    gw = real_gateway
    parent = ok(gw, "session.start")["sessionKey"]
    ok(gw, "session.turn", sessionKey=parent, prompt=PARENT_GOAL, steps=["Plan: gather, check."])
    filler = " ".join(["the ledger totals reconcile"] * 25)
    for i in range(4):  # enough long notes that the oldest move to unsurfaced_archive.md
        child = ok(gw, "subagent.spawn", parentSessionKey=parent, task=f"check region {i}",
                   steps=[f"REGION-{i}-RESULT {filler}"])
        ok(gw, "subagent.end", childSessionKey=child["childSessionKey"], outcome="ok")
    archived = (state / "workspace" / "memory" / "unsurfaced_archive.md").read_text()
    assert "REGION-0-RESULT" in archived
    state_text = (state / "workspace" / "memory" / "CURRENT_STATE.md").read_text()
    assert "REGION-0-RESULT" not in state_text
    found = ok(gw, "command", command="/mc search REGION-0-RESULT")["text"]
    assert "[Unsurfaced]" in found and "main/unsurfaced_archive" in found

    running = ok(gw, "subagent.spawn", parentSessionKey=parent, task="count the invoices",
                 steps=["Counting: INVOICE-TALLY-77 so far."])
    child_id = running["childSessionKey"].rsplit(":", 1)[1]
    found = ok(gw, "command", command="/mc search INVOICE-TALLY-77")["text"]
    assert f"main/subagents/{child_id}/CURRENT_STATE" in found


def test_a_subagents_journal_has_one_place_and_old_files_move_there(real_gateway, state):
    gw = real_gateway
    parent = ok(gw, "session.start")["sessionKey"]
    ok(gw, "session.turn", sessionKey=parent, prompt=PARENT_GOAL, steps=["Plan: gather, check."])
    child = ok(gw, "subagent.spawn", parentSessionKey=parent, task="collect the receipts")
    child_id = child["childSessionKey"].split(":")[-1]
    child_dir = state / "workspace" / "memory" / "subagents" / child_id
    old = child_dir / "memory"  # where older releases put the journal
    (old / "sessions").mkdir(parents=True)
    (old / "sessions" / "2026-01-05.md").write_text("# Session Log 2026-01-05\n\nOLD-LOG\n")
    (old / "session_archive").mkdir()
    (old / "session_archive" / "2026-01-05_10-00.md").write_text("OLD-ARCHIVE\n")
    (old / "summaries" / "daily").mkdir(parents=True)
    (old / "summaries" / "daily" / "2026-01-05.md").write_text("OLD-DAILY\n")

    ok(gw, "session.turn", sessionKey=child["childSessionKey"], prompt="collect the receipts",
       steps=["Collected 12 receipts."])
    assert not old.exists()
    assert (child_dir / "sessions" / "2026-01-05.md").read_text().endswith("OLD-LOG\n")
    moved = list((child_dir / "session_archive").rglob("2026-01-05_10-00.md"))  # or cold/ by now
    assert [p.read_text() for p in moved] == ["OLD-ARCHIVE\n"]
    assert (child_dir / "summaries" / "daily" / "2026-01-05.md").read_text() == "OLD-DAILY\n"
    logs = sorted((child_dir / "sessions").glob("*.md"))
    assert len(logs) == 2  # the old day and today's run, side by side
    today = [p for p in logs if p.name != "2026-01-05.md"][0]
    assert "collect the receipts" in today.read_text()
    parent_logs = state / "workspace" / "memory" / "sessions"
    assert all("receipts" not in p.read_text() for p in parent_logs.glob("*.md"))
