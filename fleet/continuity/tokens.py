"""Token estimate and truncation, exactly as the original plugin counts them.

Budgets everywhere in the continuity core are expressed in these estimated tokens, so the numbers a
user sees in the original plugin's docs (300, 500, 1,200) mean the same thing here.
"""

from __future__ import annotations

import math
import re

# CJK as the original plugin counts it, (first, last) code points: Unified Ideographs,
# Extension A, Compatibility Ideographs, CJK punctuation, half/full-width forms. Kana and Hangul
# are deliberately *not* CJK here.
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0xF900, 0xFAFF), (0x3000, 0x303F),
               (0xFF00, 0xFFEF))
# The same set as a regex class, compiled on first use (re's own cache), not at import: a class
# of ~28,000 code points takes about 2 ms of CPU to compile, which every gateway start paid.
_CJK_CLASS = "[" + "".join(f"{chr(first)}-{chr(last)}" for first, last in _CJK_RANGES) + "]"

ELLIPSIS = "..."


def _is_cjk(ch: str) -> bool:
    code = ord(ch)  # below U+3000 (all ASCII) is below every range: answered at once
    return code >= 0x3000 and any(first <= code <= last for first, last in _CJK_RANGES)


def estimate_tokens(text: str) -> int:
    """ceil(cjk * 1.5) + ceil(other / 4), counted per code point; empty text is 0."""
    if not text:
        return 0
    other = len(re.sub(_CJK_CLASS, "", text))
    cjk = len(text) - other
    return math.ceil(cjk * 1.5) + math.ceil(other / 4)


def truncate_tokens(text: str, budget: int) -> str:
    """Longest prefix within `budget` tokens plus `...`; text already within budget is unchanged.

    As in the original plugin, the ellipsis is appended after the prefix (it may add one token).
    The scan stops as soon as the budget is exceeded, so a megabyte of input costs only a few
    budgets.
    """
    if estimate_tokens(text) <= budget:
        return text
    if budget <= 0:
        return ELLIPSIS
    cjk = other = 0
    cut = 0
    for i, ch in enumerate(text):
        if _is_cjk(ch):
            cjk += 1
        else:
            other += 1
        if math.ceil(cjk * 1.5) + math.ceil(other / 4) > budget:
            cut = i
            break
    return text[:cut] + ELLIPSIS
