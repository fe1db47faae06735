"""Invoke entry point of the checkout: the product's tasks (fleet.cli, also served by the `fleet`
console script) plus the lab's (lab.cli: tests, lint, harness, benchmarks, real OpenClaw)."""

from lab.cli import ns  # noqa: F401  (invoke looks for `ns`)
