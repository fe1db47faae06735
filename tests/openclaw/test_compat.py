"""The compat matrix's bookkeeping (lab.openclaw.compat, lab.openclaw.corpus): which releases it
runs, which rows count, what it proves, the page and the sentences it writes. No OpenClaw here:
the scenario itself runs on real gateways (`invoke openclaw.compat`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lab.openclaw import compat, corpus, scenario, toolchain

RANGE = compat.Declared("2026.4.24", "2026.9.6")
SOURCES = "sha256:" + "a" * 64
GREEN = {name: {"ok": True, "detail": ""} for name in scenario.CHECKS}


def row(release: str, sources: str = SOURCES, failed: tuple = (), **seconds) -> dict:
    checks = {name: {"ok": name not in failed, "detail": "boom" if name in failed else ""}
              for name in scenario.CHECKS}
    return {"release": release, "date": "2026-12-04", "commit": "abc1234", "sources": sources,
            "ok": not failed, "checks": checks, "seconds": seconds}


@pytest.fixture
def rows(tmp_path, monkeypatch):
    """An empty rows folder the module reads and writes instead of docs/compat/."""
    folder = tmp_path / "rows"
    folder.mkdir()
    monkeypatch.setattr(compat, "ROWS", folder)
    monkeypatch.setattr(compat, "commit", lambda root=None: "abc1234")

    def put(data: dict) -> None:
        (folder / f"{data['release']}.json").write_text(json.dumps(data))
    return put


def test_the_stable_releases_of_the_range_come_from_the_registry(tmp_path):
    npm = tmp_path / "npm"
    npm.write_text("#!/bin/sh\necho '" + json.dumps([
        "2026.4.23", "2026.4.24", "2026.4.29-beta.1", "2026.5.3-1", "2026.5.3", "2026.6.35",
        "2026.9.6", "2026.9.7", "2026.10.1"]) + "'\n")
    npm.chmod(0o755)
    assert compat.stable_releases(RANGE, str(npm)) == ["2026.4.24", "2026.5.3", "2026.6.35",
                                                       "2026.9.6"]
    failing = tmp_path / "npm-down"
    failing.write_text("#!/bin/sh\necho 'npm ERR! code ENOTFOUND' >&2\nexit 1\n")
    failing.chmod(0o755)
    with pytest.raises(compat.CompatError, match="ENOTFOUND"):
        compat.stable_releases(RANGE, str(failing))


def test_a_selection_names_the_ci_set_or_releases_of_the_range():
    assert compat.select("ci", RANGE) == sorted(toolchain.OPENCLAW_VERSIONS,
                                                 key=compat.openclawrange.version_key)
    assert compat.select("2026.6.6, 2026.4.24,2026.6.6", RANGE) == ["2026.4.24", "2026.6.6"]
    for bad in ("2026.3.28", "2026.9.7", "2026.5.3-1", "latest"):
        with pytest.raises(compat.CompatError, match="not a stable OpenClaw release"):
            compat.select(bad, RANGE)


def test_a_row_counts_only_for_the_sources_and_checks_it_ran(rows):
    assert compat.is_current(row("2026.6.6"), SOURCES)
    assert not compat.is_current(row("2026.6.6"), "sha256:" + "b" * 64)  # the plugins changed
    older = row("2026.6.6")
    del older["checks"]["/mc settings"]  # a scenario that had a check fewer
    assert not compat.is_current(older, SOURCES) and not compat.row_ok(older)
    assert compat.row_ok(row("2026.6.6")) and not compat.row_ok(row("2026.6.6", failed=("seed",)))


def test_the_proof_lists_current_green_releases_and_is_complete_when_every_one_is(
        rows, tmp_path):
    proof_file = tmp_path / "proven.json"
    proof_file.write_text(json.dumps({"proven": [], "excluded": {"2026.5.3": "its reason"},
                                      "sources": "", "commit": "", "date": ""}))
    everything = ["2026.4.24", "2026.5.3", "2026.6.6", "2026.9.6"]
    rows(row("2026.4.24"))
    rows(row("2026.6.6", failed=("clean state",)))
    rows(row("2026.9.6", sources="sha256:" + "0" * 64))  # green, for older sources
    proof = compat.write_proof(everything, SOURCES, proof_file)
    assert proof["proven"] == ["2026.4.24"]  # 9.6 was proven for other sources
    assert proof["excluded"] == {"2026.5.3": "its reason"}  # kept as written by hand
    assert proof["sources"] == ""  # not complete: 6.6 failed, 9.6 is not current
    rows(row("2026.6.6"))
    rows(row("2026.9.6"))
    proof = compat.write_proof(everything, SOURCES, proof_file)
    assert (proof["sources"], proof["commit"], proof["date"]) == (SOURCES, "abc1234",
                                                                   "2026-12-04")
    assert json.loads(proof_file.read_text()) == proof


def test_the_page_has_a_row_per_release_with_its_failures_and_timings(rows):
    rows(row("2026.4.24", deploy=18.3, upgrade=10.0, rollback_python=12.0, rollback_entry=25.0))
    rows(row("2026.6.6", failed=("recovered once",)))
    rows(row("2026.7.35", sources="sha256:" + "0" * 64))
    proof = {"proven": ["2026.4.24"], "excluded": {"2026.5.3": "drops hooks"}, "sources": ""}
    page = compat.render(["2026.4.24", "2026.5.3", "2026.6.6", "2026.7.35", "2026.9.6"], proof,
                         RANGE, SOURCES)
    table = page.split("\n## ", 1)[0]  # the checks; the traits table follows
    lines = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()
             if line.startswith("| 2026.")}
    assert lines["2026.4.24"].count("✓") == len(scenario.CHECKS)
    assert "| 18.3 | 10.0 | 12.0 | 25.0 | 2.5 |" in lines["2026.4.24"]
    assert lines["2026.6.6"].count("✗") == 1
    assert "not run" in lines["2026.9.6"]
    assert "2026.5.3 (excluded)" in page and "drops hooks" in page
    assert "- 2026.6.6, recovered once: boom" in page
    assert "**Proven: 1 of 5 stable releases**" in page
    assert lines["2026.7.35 *(older sources)*"].count("✓") == len(scenario.CHECKS)
    assert "2026.4.24 *(older" not in page


def test_readme_and_the_openclaw_page_state_the_range_the_proof_and_manifests_hold():
    proof = json.loads(compat.PROOF.read_text(encoding="utf-8"))
    said = compat.statement(compat.declared(), proof)
    for page in compat.STATING:
        body = page.read_text(encoding="utf-8")
        begin, end = compat.STATEMENT_MARKS
        assert begin in body, f"{page.name} has no stated OpenClaw range"
        assert body.split(begin, 1)[1].split(end, 1)[0].startswith(said), \
            f"{page.name} states another range than the proof: run `invoke openclaw.compat`"


def test_the_statement_is_written_between_the_marks_only(tmp_path):
    page = tmp_path / "README.md"
    page.write_text("intro <!-- openclaw-range -->old<!-- /openclaw-range --> rest\n")
    other = tmp_path / "plain.md"
    other.write_text("nothing to replace\n")
    compat.sync_statement("Supported: X", [page, other])
    assert page.read_text() == ("intro <!-- openclaw-range -->Supported: X(docs/compat.md)."
                                "<!-- /openclaw-range --> rest\n")
    assert other.read_text() == "nothing to replace\n"


def _rec(hook: str, session: str, run: str, **event) -> dict:
    return {"hook": hook, "ctx": {"runId": run, "sessionKey": session, "trace": {"x": 1},
                                  "workspaceDir": "/tmp/x"}, "event": event}


def test_the_corpus_labels_each_turn_by_what_the_scenario_did(tmp_path):
    child = "agent:main:subagent:c1"
    user = {"role": "user", "content": [{"type": "text", "text": "[Fri 2026-12-04] Ship it"}]}
    announce = {"role": "user", "content": "A background task completed.",
                "provenance": {"kind": "inter_session"}}
    records = [
        _rec("register", "", ""),
        _rec("before_prompt_build", "agent:main:main", "r1", prompt="Ship it"),
        _rec("agent_end", "agent:main:main", "r1", messages=[user]),
        _rec("llm_input", child, "c", systemPrompt="# S\n\n## Your Role\n- task\n\n## Rules\n"),
        _rec("before_prompt_build", child, "c", prompt="[Subagent Context] ..."),
        _rec("before_prompt_build", "agent:main:main", "announce:v1:x", prompt="event"),
        _rec("agent_end", "agent:main:main", "r2", messages=[user, announce, user]),
    ]
    found = corpus.collect(records, {"r1": "Ship it", "r2": "Ship it"}, "the task")
    assert [s["hook"] for s in found["user"]] == ["before_prompt_build", "agent_end",
                                                  "agent_end", "history"]
    assert found["user"][0]["expect"] == {"origin": "user", "words": "Ship it"}
    assert found["user"][0]["ctx"] == {"runId": "r1", "sessionKey": "agent:main:main"}
    assert [(s["hook"], s["expect"]["origin"]) for s in found["completion"]] == [
        ("before_prompt_build", "completion"), ("history", "completion")]
    task = found["subagent-task"]
    assert [s["hook"] for s in task] == ["llm_input", "before_prompt_build"]
    assert task[0]["systemPrompt"] == "## Your Role\n- task\n"
    written = corpus.write("2026.6.6", found, tmp_path)
    assert sorted(p.name for p in written) == ["completion.json", "subagent-task.json",
                                                "user.json"]
    assert json.loads((tmp_path / "2026.6.6" / "user.json").read_text())["release"] == "2026.6.6"


def test_the_compat_task_says_what_it_runs_and_refuses_a_bad_selection():
    out = subprocess.run(["invoke", "openclaw.compat", "--versions", "2026.3.28"],
                         cwd=Path(compat.REPO), capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "not a stable OpenClaw release of the declared range" in out.stderr


def test_all_runs_every_release_but_those_excluded_by_name_unless_named(rows, tmp_path,
                                                                        monkeypatch):
    proof = tmp_path / "openclaw-proven.json"
    proof.write_text(json.dumps({"proven": [], "excluded": {"2026.4.29": "cannot pass offline"},
                                 "sources": "", "commit": "", "date": ""}))
    ran, said = [], []
    monkeypatch.setattr(compat, "PROOF", proof)
    monkeypatch.setattr(compat, "PAGE", tmp_path / "compat.md")
    monkeypatch.setattr(compat, "declared", lambda root=None: RANGE)
    monkeypatch.setattr(compat, "stable_releases",
                        lambda rng, npm="npm": ["2026.4.24", "2026.4.29", "2026.5.2"])
    monkeypatch.setattr(compat.compatproof, "sources_digest", lambda root: SOURCES)
    monkeypatch.setattr(compat.scenario, "build_releases", lambda where: None)
    monkeypatch.setattr(compat, "sync_statement", lambda text: None)

    def run_release(release, *args):
        ran.append(release)
        rows(row(release))  # as the real one writes docs/compat/<release>.json
        return row(release)

    monkeypatch.setattr(compat, "run_release", run_release)
    result = compat.run("all", say=said.append)
    assert sorted(ran) == ["2026.4.24", "2026.5.2"] and result["ran"] == ran
    assert "excluded by name in openclaw-proven.json, not run (name it to run it): " \
           "2026.4.29" in said
    assert not any("2026.4.29" in line for line in said if "green and current" in line)
    assert result["complete"]
    ran.clear()
    compat.run("2026.4.29", say=said.append)
    assert ran == ["2026.4.29"]


COMPLETION = ("[Fri 2026-12-04 19:20 UTC] <<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nOpenClaw runtime "
              "context (internal):\n[Internal task completion event]\nsource: subagent\n"
              "status: completed; ready for parent review\n<prompt-data>\nlag is 3 s\n"
              "</prompt-data>")


def test_a_completion_steered_into_the_spawning_run_is_told_from_an_announce_run():
    """2026.8.2 put a child's completion into the parent's still-active run, after the spawn's
    tool result (the child ended before the parent's next model request): no announce run of
    its own follows, and the scenario must not wait for one."""
    from lab.openclaw.drive import completion_steered_in, is_completion_turn

    def request(*messages):
        return {"body": {"messages": [{"role": r, "content": c} for r, c in messages]}}

    steered = request(("user", "check the lag [[spawn: ...]]"), ("assistant", None),
                      ("tool", '{"status": "accepted"}'), ("user", COMPLETION))
    announce = request(("user", "check the lag [[spawn: ...]]"), ("assistant", None),
                       ("tool", '{"status": "accepted"}'), ("assistant", "Asked a subagent."),
                       ("user", COMPLETION))
    assert is_completion_turn(steered) and is_completion_turn(announce)
    assert completion_steered_in(steered) and not completion_steered_in(announce)


def test_the_commit_is_dirty_for_changed_sources_not_for_the_proof_the_matrix_rewrites(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    for rel in (compat.compatproof.PROOF_FILE, "fleet/continuity/store.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qam", "x",
        "--allow-empty")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "y")
    (tmp_path / compat.compatproof.PROOF_FILE).write_text("rewritten by the matrix\n")
    assert not compat.commit(tmp_path).endswith("+dirty")
    (tmp_path / "fleet/continuity/store.py").write_text("changed\n")
    assert compat.commit(tmp_path).endswith("+dirty")
