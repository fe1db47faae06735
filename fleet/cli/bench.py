"""Tasks for fleet.bench (filled in by the bench work)."""

from __future__ import annotations

TASKS: list = []
