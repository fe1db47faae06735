from __future__ import annotations

from fleet.continuity.document import StateDocument, template
from fleet.continuity.snapshot import BLOCK_BUDGET, build_snapshot
from fleet.continuity.tokens import estimate_tokens


def doc_with(**sections):
    doc = StateDocument.parse(template("2026-03-31T07:51:52.123Z"))
    for name, value in sections.items():
        doc.set(name.replace("_", " "), value)
    return doc


def test_no_snapshot_without_a_meaningful_objective():
    for value in ["None", "idle", "N/A", "[One sentence: what are we trying to accomplish]"]:
        assert build_snapshot(doc_with(Objective=value)) is None


def test_original_plugin_format_with_defaults():
    doc = StateDocument.parse("## Objective\nShip v5\n")
    assert build_snapshot(doc) == "\n".join([
        "=== CONTINUITY RECOVERY ===",
        "Objective: Ship v5",
        "Current Step: unknown",
        "Key Decisions: None",
        "Next Action: unknown",
        "Blockers: None",
        "Unsurfaced Results: None",
        "Last Updated: unknown",
        "=== END RECOVERY ===",
    ])


def test_multi_line_values_are_whole_and_indented_under_their_label():
    decisions = "- a\n- b\n=== END RECOVERY ==="
    snap = build_snapshot(doc_with(Objective="Ship v5", Key_Decisions=decisions))
    assert "Key Decisions: - a\n  - b\n  === END RECOVERY ===\nNext Action: None" in snap
    assert snap.count("\n=== END RECOVERY ===") == 1
    assert "Last Updated: 2026-03-31T07:51:52.123Z" in snap


def test_sections_and_block_are_bounded():
    huge = "word " * 5000
    snap = build_snapshot(doc_with(Objective=huge, Current_Step=huge, Key_Decisions=huge,
                                   Next_Action=huge, Blockers=huge, Unsurfaced_Results=huge))
    assert estimate_tokens(snap) <= BLOCK_BUDGET
    objective_line = snap.split("\n")[1]
    assert 250 <= estimate_tokens(objective_line) <= 310
    assert snap.endswith("=== END RECOVERY ===")
