"""The continuity doctor: one test per check, severities, exit codes, agents and children."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fleet.continuity import doctor
from fleet.continuity.document import template

GOOD = template("2026-03-31T11:55:00.000Z").replace(
    "## Objective\nNone", "## Objective\nShip the release")


def write(path: Path, text: str, age_s: float = 0.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if age_s:
        t = time.time() - age_s
        os.utime(path, (t, t))
    return path


def transcript(state: Path, agent: str, age_s: float = 0.0) -> None:
    write(state / "agents" / agent / "sessions" / "s1.jsonl", "{}\n", age_s)


def by_check(findings) -> dict:
    return {f.check: f for f in findings}


def test_healthy_file_is_ok(tmp_path):
    path = write(tmp_path / "CURRENT_STATE.md", GOOD)
    found = doctor.check_state(path, transcript_mtime=time.time() - 60)
    assert doctor.worst([f.severity for f in found]) == "ok"
    assert set(by_check(found)) == {"exists", "stale", "sections"}


def test_missing_file_is_critical_when_the_agent_ran_else_info(tmp_path):
    found = doctor.check_state(tmp_path / "nope.md", ran=True)
    assert [(f.check, f.severity) for f in found] == [("exists", "critical")]
    found = doctor.check_state(tmp_path / "nope.md", ran=False)
    assert [(f.check, f.severity) for f in found] == [("exists", "info")]


def test_stale_against_the_newest_transcript(tmp_path):
    path = write(tmp_path / "CURRENT_STATE.md", GOOD, age_s=3600)
    stale = by_check(doctor.check_state(path, transcript_mtime=time.time()))["stale"]
    assert stale.severity == "warning" and "before the newest session transcript" in stale.message
    fresh = by_check(doctor.check_state(path, transcript_mtime=time.time() - 3500))["stale"]
    assert fresh.severity == "ok"  # within the grace: written at the end of that session


def test_old_but_not_stale_is_info(tmp_path):
    path = write(tmp_path / "CURRENT_STATE.md", GOOD, age_s=3 * 86400)
    assert by_check(doctor.check_state(path))["stale"].severity == "info"


def test_missing_sections_are_named(tmp_path):
    text = GOOD.replace("## Blockers\nNone\n\n", "").replace("## Next Action", "## Next step")
    path = write(tmp_path / "CURRENT_STATE.md", text)
    sections = by_check(doctor.check_state(path))["sections"]
    assert sections.severity == "warning"
    assert sections.message == "missing sections: Next Action, Blockers"


def test_leftover_placeholders(tmp_path):
    text = GOOD.replace("## Current Step\nNone", "## Current Step\n[what you are doing now]")
    path = write(tmp_path / "CURRENT_STATE.md", text)
    found = by_check(doctor.check_state(path))["placeholders"]
    assert found.severity == "warning" and found.message.endswith("Current Step")


NOTE = ('[2026-03-31T11:00:00.000Z] Subagent "ops" completed.\n'
        '  Session: agent:ops:subagent:c1\n  Result: found X')


def test_unsurfaced_subagent_results_wait_for_review(tmp_path):
    text = GOOD.replace("## Unsurfaced Results\nNone", "## Unsurfaced Results\n" + NOTE
                        + "\n" + NOTE.replace("11:00", "11:30"))
    path = write(tmp_path / "CURRENT_STATE.md", text)
    found = by_check(doctor.check_state(path))["unsurfaced"]
    assert found.severity == "warning"
    assert found.message == ("Unsurfaced Results waits for review: 2 subagent result(s) not yet "
                             "surfaced to the user")


def test_the_last_answer_in_unsurfaced_results_is_only_info(tmp_path):
    text = GOOD.replace("## Unsurfaced Results\nNone", "## Unsurfaced Results\nWorking on it.")
    path = write(tmp_path / "CURRENT_STATE.md", text)
    found = by_check(doctor.check_state(path))["unsurfaced"]
    assert found.severity == "info" and "Working on it." in found.message


def test_task_switch_against_the_newest_archive(tmp_path):
    ws = tmp_path / "ws"
    path = write(ws / "memory" / "CURRENT_STATE.md", GOOD)
    arch = ws / "memory" / "session_archive"
    write(arch / "2026-03-01_10-00.md", GOOD.replace("Ship the release", "Older task"))
    write(arch / "2026-03-02_10-00.md", GOOD.replace("Ship the release", "Fix the Pi"))
    found = by_check(doctor.check_state(path, archive_root=ws))["task_switch"]
    assert found.severity == "info" and "Fix the Pi" in found.message
    write(arch / "2026-03-03_10-00.md", GOOD)
    assert "task_switch" not in by_check(doctor.check_state(path, archive_root=ws))


@pytest.mark.parametrize("severity,code", [("ok", 0), ("info", 0), ("warning", 1),
                                           ("critical", 2)])
def test_exit_codes(severity, code):
    assert doctor.exit_code(severity) == code


def make_state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    ops_ws = tmp_path / "ops-ws"
    write(state / "openclaw.json", json.dumps({"agents": {"list": [
        {"id": "main", "default": True}, {"id": "ops", "workspace": str(ops_ws)}]}}))
    return state


def test_diagnose_covers_every_agent_and_every_child(tmp_path):
    state = make_state(tmp_path)
    ws = state / "workspace"
    write(ws / "memory" / "CURRENT_STATE.md", GOOD)
    write(ws / "memory" / "subagents" / "c1" / "CURRENT_STATE.md",
          GOOD.replace("## Unsurfaced Results\nNone", "## Unsurfaced Results\n" + NOTE))
    transcript(state, "ops")  # ops ran but has no state file
    report = doctor.diagnose(state)
    labels = [(t.label, t.severity) for t in report.targets]
    assert labels == [("main", "ok"), ("main/c1", "warning"), ("ops", "critical")]
    assert report.severity == "critical" and report.exit_code == 2
    data = report.as_dict()
    assert data["exit"] == 2 and data["targets"][1]["child"] == "c1"
    only = doctor.diagnose(state, agent="main")
    assert [t.label for t in only.targets] == ["main", "main/c1"] and only.exit_code == 1
    with pytest.raises(LookupError):
        doctor.diagnose(state, agent="ghost")


def test_render_text_lists_problems_and_the_overall_status(tmp_path):
    state = make_state(tmp_path)
    transcript(state, "main")
    lines = doctor.render_text(doctor.diagnose(state, agent="main"))
    assert lines[1].startswith("  [CRITICAL]  ")
    assert lines[-1] == "Overall status: CRITICAL"
