"""Durations and moments as operators type them after a flag: `30s`, `5m`, `2h`, `1d`, `500ms`;
`--since` also takes a moment (`2026-12-05T10:00`, `2026-12-05 10:00:00+01:00`).

One reader for every flag that takes one (`--bake`, `--expires`, `logs --since`), so the units
mean the same everywhere; each flag keeps its own bounds and its own error.
"""

from __future__ import annotations

import re
import time
from datetime import datetime

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def seconds(spec: str) -> float | None:
    """Seconds of `30`, `30s`, `5m`, `1h`, `1d` or `500ms`; None when `spec` is not one."""
    match = _DURATION.match(str(spec or ""))
    if not match:
        return None
    return float(match.group(1)) * UNIT_S[match.group(2)]


def moment(spec: str) -> float | None:
    """Epoch seconds of an ISO 8601 date and time (`T` or a space between them; `Z` or an
    offset, else this machine's local time); None when `spec` is not one."""
    text = str(spec or "").strip()
    if not re.match(r"^\d{4}-\d{2}-\d{2}", text):
        return None
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        return time.mktime(when.timetuple()) + when.microsecond / 1e6
    return when.timestamp()
