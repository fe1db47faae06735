from __future__ import annotations

import re

import pytest

from fleet.continuity.document import (
    SECTIONS,
    StateDocument,
    is_meaningful,
    iso_now,
    neutralize,
    template,
)


def test_template_is_the_original_plugin_layout():
    text = template("2026-03-31T07:51:52.123Z")
    assert text.splitlines()[:5] == [
        "# Current State", "> Last updated: 2026-03-31T07:51:52.123Z", "", "## Objective", "None"
    ]
    assert text.endswith("## Unsurfaced Results\nNone\n")
    doc = StateDocument.parse(text)
    assert doc.section_names() == list(SECTIONS)
    assert doc.get("Key Decisions") == "- None"
    assert doc.last_updated == "2026-03-31T07:51:52.123Z"


def test_iso_now_matches_js_to_iso_string():
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", iso_now())


# Fixed flaw of the original plugin: it read only the first line; sections are read whole.
@pytest.mark.parametrize(
    "text,section,whole",
    [
        ("## Objective\nline one\nline two", "Objective", "line one\nline two"),
        ("## Key Decisions\n- a\n- b", "Key Decisions", "- a\n- b"),
        ("## Next Action\n\nafter blank", "Next Action", "after blank"),
    ],
)
def test_sections_are_read_whole(text, section, whole):
    assert StateDocument.parse(text).get(section) == whole


def test_missing_section_is_empty_and_headings_match_any_case():
    doc = StateDocument.parse("# Current State\n##   objective  \r\nship it\r\n")
    assert doc.get("Objective") == "ship it"
    assert doc.get("Blockers") == ""
    assert not doc.has("Blockers")


@pytest.mark.parametrize("value", ["", "None", "  none ", "N/A", "na", "IDLE",
                                   "[One sentence: what are we trying to accomplish]",
                                   "[Exactly what should happen next]"])
def test_placeholders_are_not_meaningful(value):
    assert not is_meaningful(value)


@pytest.mark.parametrize("value", ["None.", "- None", "TBD", "Ship v5"])
def test_original_plugin_counts_these_as_meaningful(value):
    assert is_meaningful(value)


def test_unknown_sections_outside_text_and_crlf_round_trip():
    text = ("preface\r\n# Current State\r\n> Last updated: x\r\n\r\n## Risk\r\nhigh\r\n"
            "## Objective\r\nA\r\n\r\n### sub\r\nkept\r\n---\r\n## Template notes\r\n- b")
    doc = StateDocument.parse(text)
    assert doc.render() == text
    assert doc.get("Risk") == "high"
    assert doc.get("Objective") == "A\n\n### sub\nkept\n---"


def test_set_keeps_everything_else_and_the_line_endings():
    text = template("T").replace("\n", "\r\n")
    doc = StateDocument.parse(text)
    doc.set("Current Step", "step 1\nstep 2")
    out = doc.render()
    assert "## Current Step\r\nstep 1\r\nstep 2\r\n\r\n## Key Decisions" in out
    assert "\n" not in out.replace("\r\n", "")
    assert out.replace("step 1\r\nstep 2", "None") == text


def test_set_adds_missing_section_in_canonical_order():
    doc = StateDocument.parse("# Current State\n\n## Objective\nA\n\n## Blockers\nNone\n")
    doc.set("Next Action", "do it")
    assert doc.section_names() == ["Objective", "Next Action", "Blockers"]
    doc.set("Unsurfaced Results", "r")
    assert doc.render().endswith("## Blockers\nNone\n\n## Unsurfaced Results\nr\n")


def test_touch_replaces_or_adds_the_header_line():
    doc = StateDocument.parse(template("OLD"))
    doc.touch("NEW")
    assert doc.last_updated == "NEW"
    assert doc.render().count("> Last updated:") == 1
    bare = StateDocument.parse("# Current State\n## Objective\nA\n")
    bare.touch("T")
    assert bare.render().startswith("# Current State\n> Last updated: T\n## Objective")


def test_a_last_updated_line_inside_a_section_is_not_the_timestamp():
    doc = StateDocument.parse("# Current State\n\n## Objective\n> Last updated: fake\n")
    assert doc.last_updated is None


def test_neutralize_defuses_headings_and_timestamps_and_is_idempotent():
    hostile = "ok\n## Objective\n  # x\r> Last updated: 1999\u2028### y"
    safe = neutralize(hostile)
    for line in safe.split("\n"):
        assert not line.lstrip().startswith("#")
        assert not line.lower().startswith("> last updated")
    assert neutralize(safe) == safe
    doc = StateDocument.parse(template("T"))
    doc.set("Unsurfaced Results", hostile)
    again = StateDocument.parse(doc.render())
    assert again.section_names() == list(SECTIONS)
    assert again.last_updated == "T"
