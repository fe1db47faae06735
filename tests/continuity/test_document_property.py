from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.continuity.document import SECTIONS, StateDocument, template

_lines = st.lists(
    st.one_of(
        st.sampled_from(["## Objective", "## Unsurfaced Results", "##\tRisk ", "> Last updated: x",
                         "# Current State", "", "\r", "- None", "###", "##"]),
        st.text(max_size=30),
    ),
    max_size=20,
)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_round_trips_byte_for_byte(text):
    assert StateDocument.parse(text).render() == text


@settings(max_examples=300, deadline=None)
@given(_lines, st.sampled_from(["\n", "\r\n"]))
def test_document_like_text_round_trips(lines, nl):
    text = nl.join(lines)
    doc = StateDocument.parse(text)
    assert doc.render() == text
    for name in SECTIONS:
        doc.get(name)  # never raises


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_set_with_any_text_keeps_the_six_sections(value):
    doc = StateDocument.parse(template("T"))
    doc.set("Unsurfaced Results", value)
    doc.set("Objective", value)
    again = StateDocument.parse(doc.render())
    assert again.section_names() == list(SECTIONS)
    assert again.last_updated == "T"
