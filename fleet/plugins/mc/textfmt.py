"""Text helpers shared by every `/mc` command: the fence, the rule line, relative times, truncation.

Why: the original `/mc` outputs are monospace tables people read at a glance; keeping the
primitives in one place keeps every command's format identical to the original's.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Optional

RULE = "\u2500" * 29
FENCE = "```"
ELLIPSIS = "\u2026"

# compiled on first use (re's own cache): a `/mc` reply's times, not the plugin's load
_ISO_RE = (r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
           r"\s*(Z|[+-]\d{2}:?\d{2})?$")


def utcnow() -> datetime:
    """The clock (aware UTC); tests replace it."""
    return datetime.now(timezone.utc)


def fence(text: str) -> str:
    """A reply body in a monospace block, as the original `/mc` sends it."""
    return f"{FENCE}\n{text}\n{FENCE}"


def parse_iso(value: Optional[str]) -> Optional[datetime]:
    """An aware datetime from an ISO-8601 timestamp (`Z` or offset; naive = local), else None."""
    m = re.match(_ISO_RE, (value or "").strip())
    if not m:
        return None
    year, month, day, hour, minute, second = (int(g) if g else 0 for g in m.groups()[:6])
    micros = int((m.group(7) or "0")[:6].ljust(6, "0"))
    try:
        dt = datetime(year, month, day, hour, minute, second, micros)
    except ValueError:
        return None
    zone = m.group(8)
    if not zone:
        return dt.astimezone()
    if zone == "Z":
        return dt.replace(tzinfo=timezone.utc)
    sign = 1 if zone[0] == "+" else -1
    digits = zone[1:].replace(":", "")
    offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return dt.replace(tzinfo=timezone(sign * offset))


def rel_time(value: Optional[str], now: Optional[datetime] = None) -> str:
    """`just now`, `<m>m ago`, `<h>h <m>m ago`, `<d>d ago`; `unknown` for a missing or invalid
    timestamp (the original printed `NaNd ago`)."""
    when = parse_iso(value)
    if when is None:
        return "unknown"
    diff = (now or utcnow()) - when
    mins = int(diff.total_seconds() // 60)
    if mins < 1:
        return "just now"
    if mins < 60:
        return f"{mins}m ago"
    hours = mins // 60
    if hours < 24:
        return f"{hours}h {mins % 60}m ago"
    return f"{hours // 24}d ago"


def truncate(text: Optional[str], limit: int = 120) -> str:
    """First line, cut to `limit` characters plus `…`; `(empty)` for nothing."""
    if not text:
        return "(empty)"
    line = text.split("\n", 1)[0].rstrip("\r")
    return line[:limit] + ELLIPSIS if len(line) > limit else line
