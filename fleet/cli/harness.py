"""Tasks for the Docker harness: `invoke harness.up|down|status` (filled in by the harness work)."""

from __future__ import annotations

from invoke import Collection

ns = Collection("harness")
