"""JSON as OpenClaw and every other strict parser reads it: finite numbers, bounded nesting.

Python's `json` accepts and writes `NaN`, `Infinity` and `1e309` (-> inf), which OpenClaw's own
parser rejects and which later breaks arithmetic far from the cause; and it recurses once per
nesting level, so a document nested 100,000 deep raises `RecursionError` instead of a clear error.
Every config, manifest and control message is read and written through here.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 64  # the deepest legitimate document (openclaw.json, a control request) is ~10
_SURROGATE = re.compile("[\ud800-\udfff]")


class JSONError(ValueError):
    """Not strict JSON; the message says what is wrong and where (line/column when known)."""


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
            found = _SURROGATE.search(item)
            if found:
                raise JSONError(
                    f"text {item[:40]!r} holds a lone surrogate (\\u{ord(found.group()):04x}) at "
                    f"character {found.start()}; send valid Unicode"
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
