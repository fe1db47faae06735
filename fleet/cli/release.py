"""Tasks for fleet.release (filled in by the release work)."""

from __future__ import annotations

TASKS: list = []
