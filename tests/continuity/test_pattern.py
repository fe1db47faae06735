"""The safe pattern language agrees with Python's `re` wherever both accept a pattern, and stays
linear where `re` backtracks exponentially."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fleet.continuity.pattern import PatternError, compile_pattern

ATOMS = ["a", "b", ".", "[ab]", "[^a]", "\\d", "\\w", "\\s", "x", "\\b"]


@st.composite
def patterns(draw, depth=0):
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.integers(0, 4)) == 0:
            inner = draw(patterns(depth + 1))
            alt = draw(patterns(depth + 1)) if draw(st.booleans()) else None
            atom = f"({inner}|{alt})" if alt else f"(?:{inner})"
        else:
            atom = draw(st.sampled_from(ATOMS))
        if atom != "\\b":
            atom += draw(st.sampled_from(["", "", "*", "+", "?", "{1,2}", "*?"]))
        parts.append(atom)
    anchor_start = draw(st.sampled_from(["", "^"]))
    anchor_end = draw(st.sampled_from(["", "$"]))
    return anchor_start + "".join(parts) + anchor_end


@settings(max_examples=300, deadline=None)
@given(patterns(), st.text(alphabet="abxAB1 \n!", max_size=12))
def test_agrees_with_re(pattern, text):
    assume(len(pattern) <= 100)
    assert compile_pattern(pattern).search(text) == bool(re.search(pattern, text, re.I))


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|aa)+$", "(a*)*b", ".*.*.*.*.*.*.*.*!"])
def test_catastrophic_patterns_run_in_linear_steps(pattern):
    assert compile_pattern(pattern).search("a" * 1500 + "!") == bool(
        re.search(pattern, "aaa!", re.I))


@pytest.mark.parametrize("pattern,why", [
    ("(a)\\1", "backreference"), ("(?<=a)b", "lookaround"), ("(?P<n>a)", "named groups"),
    ("a{5,1000}", "above 100"), ("a**", "quantifier"), ("(", "missing ')'"), ("x" * 101, "100"),
])
def test_refusals_say_why(pattern, why):
    with pytest.raises(PatternError, match=re.escape(why)):
        compile_pattern(pattern)
