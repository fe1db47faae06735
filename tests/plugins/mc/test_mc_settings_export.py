"""/mc settings (read, validated write where the gateway reads it) and /mc export."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from mc_helpers import state_text

from fleet.continuity import archive, journal, schema
from fleet.plugins.mc import commands_settings

RULE = "\u2500" * 29


def _cfg(mc):
    return json.loads((mc.state / "openclaw.json").read_text())


def test_settings_shows_all_keys_with_values_and_stats(mc):
    mc.config["plugins"]["entries"]["memory-continuity"]["config"] = {"maxArchiveCount": 7}
    mc.write_config()
    mc.write_state()
    archive.archive_state(mc.ws(), "x", now=datetime(2026, 3, 30, 9, 0))
    archive.archive_state(mc.ws("ops"), "y", now=datetime(2026, 3, 30, 9, 0))
    lines = mc("settings").split("\n")
    props = commands_settings.load_schema()["properties"]
    assert lines[:2] == ["MC Settings", RULE]
    assert len(props) == 15  # 13 original settings + the bridge's python, bridgeTimeoutMs

    def shown(k, p):
        value = 7 if k == "maxArchiveCount" else p["default"]
        return value if isinstance(value, str) else json.dumps(value)

    assert lines[2:17] == [f"{k:<18} {shown(k, p):>6}   {p['description']}"
                           for k, p in props.items()]
    assert lines[17:] == ["", "Stats:", "  Agents with memory: 2", "  Total archives:     2"]


def test_settings_set_writes_plugins_entries_config(mc):
    # Flaw of the original plugin, fixed: it wrote to a top-level `entries` key the gateway never
    # reads.
    reply = mc("settings maxArchiveCount 5")
    assert reply.startswith("\u2713 maxArchiveCount = 5\n  Applied: the running gateway uses it")
    assert "Restart gateway" not in reply
    cfg = _cfg(mc)
    assert cfg["plugins"]["entries"]["memory-continuity"]["config"] == {"maxArchiveCount": 5}
    assert "entries" not in cfg
    assert cfg["gateway"] == {"mode": "local"} and cfg["agents"] == mc.config["agents"]
    # What the gateway validates is still valid, and /mc settings shows the new value.
    schema.validate(cfg["plugins"]["entries"]["memory-continuity"]["config"],
                    commands_settings.load_schema())
    assert f"{'maxArchiveCount':<18} {'5':>6}" in mc("settings")


@pytest.mark.parametrize("key,raw,value", [
    ("autoExtract", "false", False),
    ("tailProtectCount", "0", 0),
    ("archiveDecayDays", "2.5", 2.5),
    ("ignorePatterns", '["^\\\\[Subagent", "ping"]', ["^\\[Subagent", "ping"]),
    ("subagentSeed", "false", False),
    ("subagentRecovery", "true", True),
    ("relevanceInjection", "false", False),
    ("maxRelevanceItems", "4", 4),
])
def test_settings_accepts_every_schema_key(mc, key, raw, value):
    assert mc(f"settings {key} {raw}").startswith(f"\u2713 {key} = ")
    assert _cfg(mc)["plugins"]["entries"]["memory-continuity"]["config"][key] == value


def test_settings_creates_missing_entry(mc):
    mc.config = {"agents": mc.config["agents"]}
    mc.write_config()
    mc("settings sessionLogging false")
    assert _cfg(mc)["plugins"]["entries"]["memory-continuity"] == {
        "enabled": True, "config": {"sessionLogging": False}}


@pytest.mark.parametrize("args,words", [
    ("settings maxArchiveCount -1", ["maxArchiveCount", "minimum"]),
    ("settings autoExtract yes", ["Cannot parse value: yes"]),
    ("settings autoExtract 1", ["autoExtract", "boolean"]),
    ("settings ignorePatterns [1]", ["ignorePatterns", "string"]),
])
def test_settings_rejects_bad_values_without_writing(mc, args, words):
    before = (mc.state / "openclaw.json").read_text()
    reply = mc(args)
    assert reply.startswith("\u2717 ") and all(w in reply for w in words), reply
    assert (mc.state / "openclaw.json").read_text() == before


def test_settings_rejects_wrong_type_and_unknown_key(mc):
    before = (mc.state / "openclaw.json").read_text()
    assert mc("settings bogus 1").startswith("Unknown key: bogus\nValid: maxStateLines, ")
    assert mc("settings autoExtract").startswith("Usage: /mc settings <key> <value>")
    assert (mc.state / "openclaw.json").read_text() == before


def test_settings_notes_legacy_entries_block(mc):
    mc.config["entries"] = {"memory-continuity": {"config": {"autoExtract": False}}}
    mc.write_config()
    body = mc("settings")
    assert 'Note: a top-level "entries" block exists; the gateway ignores it.' in body
    assert f"{'autoExtract':<18} {'true':>6}" in body


def _journal(mc):
    mc.write_state(text=state_text(objective="Current #infra goal"))
    archive.archive_state(mc.ws(), state_text(objective="March plan"), now=datetime(2026, 3, 1, 9))
    archive.archive_state(mc.ws(), state_text(objective="#infra plan"),
                          now=datetime(2026, 3, 30, 9))
    for when, topic in ((datetime(2026, 3, 1, 9), "early work"),
                        (datetime(2026, 3, 30, 9), "late #infra work")):
        journal.record_run(mc.ws(), [{"role": "user", "content": topic}], {}, now=when)
    mc.write_state("ops", state_text(objective="ops goal"))


def _exported(reply):
    lines = reply.split("\n")
    assert lines[0] == "\u2713 Exported to:"
    from pathlib import Path
    path = Path(lines[1].strip())
    return path, path.read_text(), lines[2]


def test_export_all(mc):
    _journal(mc)
    path, text, summary_line = _exported(mc("export"))
    assert path.parent == mc.state / "exports"
    assert path.name.startswith("mc-export-") and path.suffix == ".md"
    assert text.startswith("# Memory Continuity Export\n> Exported: ")
    assert "# Agent: main" in text and "# Agent: ops" in text
    assert "## Archives (2)" in text and "## Session Logs (2)" in text
    assert "March plan" in text and "ops goal" in text
    size = len(text.encode()) / 1024
    assert summary_line == f"  2 agent(s), {size:.1f} KB"


def test_export_filters(mc):
    _journal(mc)
    _, text, line = _exported(mc("export main --from 2026-03-15 --to 2026-03-31"))
    assert line.startswith("  1 agent(s)")
    assert "# Agent: ops" not in text
    assert "> Filters: from 2026-03-15, to 2026-03-31" in text
    assert "## Archives (1)" in text and "March plan" not in text
    assert "## Session Logs (1)" in text and "early work" not in text
    _, text, _ = _exported(mc("export all --tag #INFRA"))
    assert "Current #infra goal" in text and "#infra plan" in text and "late #infra work" in text
    assert "March plan" not in text and "early work" not in text and "ops goal" not in text


def test_export_never_overwrites(mc):
    _journal(mc)
    first, _, _ = _exported(mc("export"))
    second, _, _ = _exported(mc("export"))
    assert first != second and first.exists() and second.exists()


def test_export_errors(mc):
    assert mc("export") == "No agents with memory found."
    assert mc("export ghost") == 'Agent "ghost" not found.'
    usage = "Usage: /mc export [agent|all] [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--tag #tag]"
    assert mc("export --from March") == f"--from March: not a date (use YYYY-MM-DD)\n{usage}"
    assert mc("export --tag") == f"--tag needs a value\n{usage}"
    assert not (mc.state / "exports").exists()


def test_settings_refuses_malformed_config_shape(mc):
    mc.config["plugins"] = {"entries": []}
    mc.write_config()
    before = (mc.state / "openclaw.json").read_text()
    text = mc.raw("settings autoExtract false")
    assert text.startswith("MC error: plugins.entries is a list, not an object")
    assert (mc.state / "openclaw.json").read_text() == before


def test_settings_set_writes_the_config_openclaw_reads(mc, tmp_path, monkeypatch):
    """OpenClaw reads $OPENCLAW_CONFIG_PATH when it is set: /mc settings edits that file."""
    elsewhere = tmp_path / "etc" / "openclaw.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(json.dumps(mc.config))
    before = (mc.state / "openclaw.json").read_text()
    monkeypatch.setenv("OPENCLAW_CONFIG_PATH", str(elsewhere))
    assert mc("settings maxArchiveCount 6").startswith("\u2713 maxArchiveCount = 6")
    edited = json.loads(elsewhere.read_text())
    assert edited["plugins"]["entries"]["memory-continuity"]["config"] == {"maxArchiveCount": 6}
    assert (mc.state / "openclaw.json").read_text() == before  # not the state dir's default
    assert "maxArchiveCount" in mc("settings") and " 6 " in mc("settings")


def test_settings_set_through_a_symlinked_config_keeps_the_link(mc, tmp_path):
    dotfiles = tmp_path / "dotfiles" / "openclaw.json"
    dotfiles.parent.mkdir()
    link = mc.state / "openclaw.json"
    dotfiles.write_text(link.read_text())
    link.unlink()
    link.symlink_to(dotfiles)
    assert mc("settings maxArchiveCount 4").startswith("\u2713 maxArchiveCount = 4")
    assert link.is_symlink() and link.resolve() == dotfiles
    assert json.loads(dotfiles.read_text())["plugins"]["entries"]["memory-continuity"][
        "config"] == {"maxArchiveCount": 4}
