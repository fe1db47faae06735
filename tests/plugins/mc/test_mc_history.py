"""/mc history, restore, clear: archives listed, and replaced states never lost."""

from __future__ import annotations

from datetime import datetime

from mc_helpers import state_text

from fleet.continuity import archive

RULE = "\u2500" * 29


def _archive(mc, objective, when, agent="main"):
    return archive.archive_state(mc.ws(agent), state_text(objective=objective), now=when)


def test_history_table(mc):
    _archive(mc, "first goal", datetime(2026, 3, 30, 9, 0))
    _archive(mc, "second goal is quite a long objective line", datetime(2026, 3, 31, 10, 5))
    _archive(mc, "third goal", datetime(2026, 3, 31, 10, 5))
    assert mc("history") == "\n".join([
        "Session Archive: main (3 entries)",
        RULE,
        f"{'#':>3} {'Timestamp':<20} Objective",
        "\u2500" * 60,
        f"{1:>3} {'2026-03-31 10-05-2':<20} third goal",
        f"{2:>3} {'2026-03-31 10-05':<20} second goal is quite a long objecti\u2026",
        f"{3:>3} {'2026-03-30 09-00':<20} first goal",
    ])


def test_history_caps_at_twenty_rows(mc):
    for minute in range(23):
        _archive(mc, f"goal {minute}", datetime(2026, 3, 31, 10, minute))
    lines = mc("history").split("\n")
    assert lines[0] == "Session Archive: main (20 entries)"  # the default cap of 20 applies
    # With maxArchiveCount raised, /mc clear keeps a 21st, and history shows 20 rows + footer.
    mc.config["plugins"]["entries"]["memory-continuity"]["config"]["maxArchiveCount"] = 50
    mc.write_config()
    mc.write_state()
    mc("clear")
    lines = mc("history").split("\n")
    assert lines[0] == "Session Archive: main (21 entries)"
    assert lines[-2:] == ["", "  ... and 1 more"]
    assert len([x for x in lines if x[:3].strip().isdigit()]) == 20


def test_history_empty(mc):
    assert mc("history") == 'No archive for "main".'
    (mc.mem() / "session_archive").mkdir(parents=True)
    assert mc("history") == 'No archived sessions for "main".'


def test_restore_replaces_state_and_keeps_previous(mc):
    current = mc.write_state(text=state_text(objective="current work"))
    _archive(mc, "older work", datetime(2026, 3, 30, 9, 0))
    _archive(mc, "old work", datetime(2026, 3, 31, 9, 0))
    reply = mc("restore 2")
    assert reply.split("\n")[:2] == [
        "\u2713 Restored archive #2 (2026-03-30_09-00)",
        "  Previous state backed up to CURRENT_STATE.md.bak",
    ]
    assert "Objective\nolder work" in current.read_text()
    bak = current.with_name("CURRENT_STATE.md.bak")
    assert "current work" in bak.read_text()
    # A second restore overwrites .bak, but the first replaced state is still in the archive.
    mc("restore 1")
    texts = [p.read_text() for p in archive.list_archives(mc.ws())]
    assert any("Objective\ncurrent work" in t for t in texts)
    assert any("Objective\nolder work" in t for t in texts)


def test_restore_into_other_agent(mc):
    _archive(mc, "ops old", datetime(2026, 3, 30, 9, 0), agent="ops")
    assert mc("restore 1 ops") == "\u2713 Restored archive #1 (2026-03-30_09-00)"
    assert "ops old" in (mc.mem("ops") / "CURRENT_STATE.md").read_text()


def test_restore_errors(mc):
    usage = "Usage: /mc restore <N> [agent]\nN = archive number from /mc history"
    for args in ("restore", "restore x", "restore 0", "restore -1"):
        assert mc(args) == usage
    assert mc("restore 1") == 'No archive for "main".'
    _archive(mc, "only one", datetime(2026, 3, 30, 9, 0))
    assert mc("restore 3") == "Only 1 archives available."
    assert mc("restore 1 ghost") == 'Agent "ghost" not found.'


def test_clear_archives_then_writes_template(mc):
    original = state_text(objective="keep me")
    path = mc.write_state(text=original)
    assert mc("clear") == '\u2713 State cleared for "main"\n  Previous state archived.'
    text = path.read_text()
    assert "## Objective\nNone\n" in text and text.startswith("# Current State\n> Last updated: ")
    assert [p.read_text() for p in archive.list_archives(mc.ws())] == [original]


def test_clear_twice_in_one_minute_loses_nothing(mc):
    # Flaw fixed: two archives in one minute overwrote each other.
    mc.write_state(text=state_text(objective="first"))
    mc("clear")
    mc.write_state(text=state_text(objective="second"))
    mc("clear")
    texts = [p.read_text() for p in archive.list_archives(mc.ws())]
    assert len(texts) == 2
    assert any("first" in t for t in texts) and any("second" in t for t in texts)


def test_clear_without_state(mc):
    assert mc("clear ops") == '\u2713 State cleared for "ops"'
    assert (mc.mem("ops") / "CURRENT_STATE.md").exists()
