"""Invoke entry point: every task lives in fleet.cli (also served by the `fleet` console script)."""

from fleet.cli import ns  # noqa: F401  (invoke looks for `ns`)
