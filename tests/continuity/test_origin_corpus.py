"""The turn recogniser (fleet.continuity.origin) over every turn real OpenClaw gateways produced.

tests/corpus/openclaw/<release>/<kind>.json holds what the probe plugin recorded when the compat
matrix (`invoke openclaw.compat`) ran the continuity scenario on a gateway of that release: the
hook ctx, the prompt, the run's last user message, earlier messages as later transcripts carry
them, and a child's system prompt's `## Your Role`, each with the answer the scenario knows to be
right. A release that wraps its turns in something new fails here, naming the release, the kind
and the hook, instead of polluting a state file on a user's host.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.continuity import origin

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "corpus" / "openclaw"
ROWS = REPO / "docs" / "compat"
KINDS = ("user", "completion", "subagent-task")
FILES = sorted(CORPUS.glob("*/*.json"))


def _recognised(sample: dict) -> origin.Origin:
    hook, ctx = sample["hook"], sample.get("ctx") or {}
    if hook == "before_prompt_build":
        return origin.of_run(ctx, text=sample["prompt"])
    if hook == "agent_end":
        return origin.of_run(ctx, message=sample["message"])
    assert hook == "history", f"a sample of an unknown hook {hook!r}"
    return origin.of_message(sample["message"])


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_turn_a_release_produced_is_recognised(path):
    corpus = json.loads(path.read_text(encoding="utf-8"))
    assert corpus["release"] == path.parent.name and corpus["kind"] == path.stem
    role_tasks = {origin.role_task(s["systemPrompt"]) for s in corpus["samples"]
                  if s["hook"] == "llm_input"}
    for sample in corpus["samples"]:
        expect = sample["expect"]
        where = f"{path.parent.name} {path.stem} {sample['hook']}"
        if sample["hook"] == "llm_input":  # where the prompt gives the task, it is read
            role = origin.role_task(sample["systemPrompt"])
            assert role == expect["task"] or (
                role == "" and expect["task"] not in sample["systemPrompt"]), where
            continue
        found = _recognised(sample)
        if expect["origin"] == "user":
            assert (found.kind, found.words) == (origin.USER, expect["words"]), where
        elif expect["origin"] == "completion":
            assert found.kind == origin.COMPLETION, f"{where}: taken for {found}"
        else:
            assert found.kind == origin.SUBAGENT_TASK, f"{where}: taken for {found}"
            # the task in the envelope, or (2026.5.x) only in the child's system prompt
            assert found.words == expect["task"] or (
                found.words == "" and expect["task"] in role_tasks), f"{where}: {found}"


def test_every_release_the_matrix_proved_left_its_whole_corpus():
    rows = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in ROWS.glob("*.json")}
    assert rows, "no compat rows: run `invoke openclaw.compat`"
    green = sorted(release for release, row in rows.items() if row["ok"])
    assert green, "no release is all green in docs/compat"
    for release in green:  # a failed row's gateway may not have reached every kind of turn
        have = sorted(p.stem for p in (CORPUS / release).glob("*.json"))
        assert have == sorted(KINDS), f"{release}: corpus files {have}"
