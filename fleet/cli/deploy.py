"""Tasks for fleet.deploy (filled in by the deploy work)."""

from __future__ import annotations

TASKS: list = []
