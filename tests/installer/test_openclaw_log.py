"""The OpenClaw gateway's log as fleet reads it during an activation: the lines each release
writes for a plugin that fails to load (copied from real gateways), the file log's JSON records,
and reading only what was written since the activation began."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fleet.installer import openclawlog

REL = "/s/fleet/releases/5.0.2-50d6715b6a57/fleet/plugins"
DIRS = [f"{REL}/memory_continuity", f"{REL}/mc"]
ERROR = "Error: broken release: the entry throws at load"
IDS = ["memory-continuity", "mc"]


@pytest.mark.parametrize("line", [
    # 2026.4.24 - 2026.8.2: the loader's line (gateway console)
    f"2026-12-04T11:43:36.276+00:00 [plugins] memory-continuity failed to load from "
    f"{REL}/memory_continuity/index.js: {ERROR}",
    # 2026.9.6: the loader names the phase
    f"2026-12-04T11:50:31.536+00:00 [plugins] memory-continuity failed during load from "
    f"{REL}/memory_continuity/index.js: {ERROR}",
    # every release: the plugin's register() threw
    f"[plugins] memory-continuity failed during register from {REL}/memory_continuity/index.js: "
    f"{ERROR}",
    # the gateway's diagnostic line (2026.4.24 - 2026.8.2, and 2026.9.6's wording)
    f"2026-12-04T11:43:37.235+00:00 [gateway] [plugins] failed to load plugin: {ERROR} "
    f"(plugin=memory-continuity, source={REL}/memory_continuity/index.js)",
    f"2026-12-04T11:50:31.889+00:00 [gateway] [plugins] plugin failed during load: {ERROR} "
    f"(plugin=memory-continuity, source={REL}/memory_continuity/index.js)",
    # OpenClaw's file log: one JSON record per line, the text in `message`
    json.dumps({"0": '{"subsystem":"plugins"}',
                "1": f"[plugins] memory-continuity failed to load from "
                     f"{REL}/memory_continuity/index.js: {ERROR}",
                "_meta": {"logLevelName": "ERROR"}, "time": "2026-12-04T11:39:55.051+00:00",
                "message": f"[plugins] memory-continuity failed to load from "
                           f"{REL}/memory_continuity/index.js: {ERROR}"}),
    # a colourful console
    f"\x1b[31m[plugins] memory-continuity failed to load from {REL}/memory_continuity/index.js: "
    f"{ERROR}\x1b[0m",
])
def test_each_releases_load_error_line_names_the_plugin_and_its_error(line):
    assert openclawlog.load_failures([line], IDS, DIRS) == {"memory-continuity": ERROR}


def test_lines_about_other_plugins_other_copies_or_other_things_do_not_count():
    lines = [
        f"[plugins] voice-call failed to load from /x/voice/index.js: {ERROR}",
        # the same id loaded from another release's dir (not the one being activated)
        f"[plugins] memory-continuity failed to load from /s/fleet/releases/5.0.1-aaa/fleet/"
        f"plugins/memory_continuity/index.js: {ERROR}",
        "[plugins] 1 plugin(s) failed to initialize (load: memory-continuity). Run 'openclaw "
        "plugins inspect <id> --runtime --json' for runtime diagnostics",
        "[channels] failed to load bundled channel telegram: offline",
        "[bridge] memory-continuity.ready: Error: worker failed to start",
        "not json {",
    ]
    assert openclawlog.load_failures(lines, IDS, DIRS) == {}
    # without dirs to compare with, the plugin id decides
    assert openclawlog.load_failures(lines[1:2], IDS) == {"memory-continuity": ERROR}


def test_a_linked_release_dir_and_a_home_relative_source_still_count(tmp_path):
    real = tmp_path / "real" / "memory_continuity"
    real.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real")
    line = f"[plugins] memory-continuity failed to load from {real}/index.js: {ERROR}"
    assert openclawlog.load_failures([line], IDS, [str(link / "memory_continuity")]) == {
        "memory-continuity": ERROR}  # OpenClaw logs the real path of a linked dir
    home = f"[plugins] memory-continuity failed to load from ~/.openclaw/x/index.js: {ERROR}"
    assert openclawlog.load_failures([home], IDS, DIRS) == {"memory-continuity": ERROR}


def test_the_file_logs_are_the_configured_one_and_the_dated_default(tmp_path):
    day = 1_790_000_000.0  # 2026-09-21 local time, give or take the zone
    dated = f"openclaw-{time.strftime('%Y-%m-%d', time.localtime(day))}.log"
    found = openclawlog.file_logs({"logging": {"file": "~/logs/oc.log"}}, home=str(tmp_path),
                                  now=day)
    assert found[0] == tmp_path / "logs" / "oc.log"
    assert found[1].name == dated and found[1].parent == openclawlog.default_log_dir()
    assert [p.name for p in openclawlog.file_logs({}, now=day)] == [dated]


def test_the_default_log_dir_is_tmp_openclaw_unless_another_user_owns_it(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    monkeypatch.setattr(openclawlog, "DEFAULT_DIR", mine)
    assert openclawlog.default_log_dir() == mine
    monkeypatch.setattr(openclawlog, "DEFAULT_DIR", tmp_path / "missing")
    assert openclawlog.default_log_dir() == tmp_path / "missing"  # OpenClaw will create it
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setattr(openclawlog, "DEFAULT_DIR", not_a_dir)
    assert openclawlog.default_log_dir().name == f"openclaw-{os.getuid()}"


# -- reading what was written since the activation began ----------------------------------
def _append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def test_only_lines_written_after_the_watch_began_are_read(tmp_path):
    console, dated = tmp_path / "console.log", tmp_path / "later.log"
    _append(console, "old line: before the activation\n")
    watch = openclawlog.LogWatch(lambda: [console, dated])
    assert watch.look() == []
    _append(console, "one\ntwo, unfinished")
    assert watch.look() == ["one"]
    _append(console, " now finished\n")
    _append(dated, "a file that appeared meanwhile is new from its first line\n")
    assert watch.look() == ["two, unfinished now finished",
                            "a file that appeared meanwhile is new from its first line"]
    assert watch.look() == []


def test_a_rotated_or_truncated_file_is_read_from_its_beginning(tmp_path):
    log = tmp_path / "openclaw.log"
    _append(log, "x" * 100 + "\n")
    watch = openclawlog.LogWatch(lambda: [log])
    log.rename(tmp_path / "openclaw.1.log")
    _append(log, "fresh file\n")
    assert watch.look() == ["fresh file"]
    log.write_text("short\n")
    assert watch.look() == ["short"]


def test_each_look_reads_a_bounded_amount(tmp_path, monkeypatch):
    monkeypatch.setattr(openclawlog, "MAX_READ", 64)
    log = tmp_path / "openclaw.log"
    log.write_text("")
    watch = openclawlog.LogWatch(lambda: [log])
    _append(log, "".join(f"line {i:03d} {'.' * 20}\n" for i in range(10)))  # 300 bytes
    seen = []
    for _ in range(10):
        got = watch.look()
        assert len("\n".join(got)) <= 64
        seen += got
    assert seen == [f"line {i:03d} {'.' * 20}" for i in range(10)]
