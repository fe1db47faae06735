from __future__ import annotations

import pytest

from fleet.continuity.tokens import estimate_tokens, truncate_tokens


@pytest.mark.parametrize(
    "text,tokens",
    [("", 0), ("abc", 1), ("abcde", 2), ("你好", 3), ("你好abc", 4), ("こんにちは", 2),
     ("안녕", 1), ("\U0001F600\U0001F600", 1)],
)
def test_original_plugin_vectors(text, tokens):
    assert estimate_tokens(text) == tokens


def test_within_budget_is_unchanged():
    assert truncate_tokens("abcd" * 5, 5) == "abcd" * 5


def test_truncation_keeps_the_longest_prefix_and_adds_ellipsis():
    out = truncate_tokens("a" * 100, 10)
    assert out == "a" * 40 + "..."
    cjk = truncate_tokens("你" * 10, 4)  # 2 chars = 3 tokens, 3 chars = 5
    assert cjk == "你你..."


def test_truncation_never_splits_an_emoji_and_handles_megabytes_quickly():
    text = "\U0001F600" * 10
    out = truncate_tokens(text, 1)
    assert out == "\U0001F600" * 4 + "..."
    big = "x" * 1_000_000
    assert truncate_tokens(big, 200) == "x" * 800 + "..."
