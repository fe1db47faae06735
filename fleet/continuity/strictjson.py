"""JSON as OpenClaw and every other strict parser reads it: finite numbers, bounded nesting.

Python's `json` accepts and writes `NaN`, `Infinity` and `1e309` (-> inf), which OpenClaw's own
parser rejects and which later breaks arithmetic far from the cause; and it recurses once per
nesting level, so a document nested 100,000 deep raises `RecursionError` instead of a clear error.
Every config, manifest and control message is read and written through here.
"""

from __future__ import annotations

import json
import math
from typing import Any, Optional

MAX_DEPTH = 64  # the deepest legitimate document (openclaw.json, a control request) is ~10


class JSONError(ValueError):
    """Not strict JSON; the message says what is wrong and where (line/column when known)."""


def _surrogate_at(text: str) -> Optional[int]:
    """Where `text` holds its first surrogate code point (U+D800-U+DFFF, which no UTF-8 or
    strict parser takes), None when it holds none. UTF-8's encoder finds it: a regex class of
    the surrogates cost every host process ~2 ms of CPU to compile at start."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONError(f"number {text[:40]} is out of range (not a finite double)")
    return value


def _no_constant(name: str) -> Any:
    raise JSONError(f"{name} is not valid JSON (only finite numbers are allowed)")


def depth(value: Any) -> int:
    """Nesting depth of a parsed value (a scalar is 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            return level
        stack.extend((child, level + 1) for child in children)
    return deepest


def check(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """`value` if it is writable as strict JSON in UTF-8: finite numbers, nesting <= `max_depth`,
    no lone surrogate in any string or key (JSON's `\\udc80` escape parses to one, and it cannot be
    encoded: every later write of a record holding it would fail)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            at = _surrogate_at(item)
            if at is not None:
                raise JSONError(
                    f"text {item[:40]!r} holds a lone surrogate (\\u{ord(item[at]):04x}) at "
                    f"character {at}; send valid Unicode"
                )
            continue
        if isinstance(item, dict):
            stack.extend((key, level) for key in item if isinstance(key, str))
        if isinstance(item, float) and not math.isfinite(item):
            raise JSONError(f"{item!r} is not a finite number; JSON has no NaN or Infinity")
        if isinstance(item, (dict, list)):
            if level + 1 > max_depth:
                raise JSONError(f"nested more than {max_depth} levels deep")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return value


def loads(text: Any, max_depth: int = MAX_DEPTH) -> Any:
    """Parse strict JSON; JSONError (a ValueError) for NaN/Infinity/overflow or deep nesting."""
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise JSONError(f"nested more than {max_depth} levels deep") from None
    except JSONError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONError(f"line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    if depth(value) > max_depth:
        raise JSONError(f"nested more than {max_depth} levels deep")
    return check(value, max_depth)


def dumps(value: Any, **kwargs: Any) -> str:
    """`json.dumps` that refuses NaN/Infinity and over-deep values instead of writing them."""
    check(value)
    kwargs.setdefault("allow_nan", False)
    return json.dumps(value, **kwargs)
