"""The plugin's one clock, so tests can pin time without touching the system clock."""

from __future__ import annotations

from datetime import datetime, timezone


def now() -> datetime:
    """Current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)
