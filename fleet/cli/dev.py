"""Developer tasks: the test suite and the linter."""

from __future__ import annotations

import sys

from invoke import task


@task(
    help={
        "k": "only tests matching this pytest -k expression",
        "docker": "only the Docker integration tests",
        "unit": "skip the Docker and real-OpenClaw tests",
        "openclaw": "only the tests against real OpenClaw gateways",
        "args": "extra pytest arguments",
    }
)
def test(c, k="", docker=False, unit=False, openclaw=False, args=""):
    """Run the test suite (the README's test command)."""
    cmd = [sys.executable, "-m", "pytest"]
    if docker:
        cmd += ["-m", "docker"]
    elif openclaw:
        cmd += ["-m", "openclaw"]
    elif unit:
        cmd += ["-m", "'not docker and not openclaw'"]
    if k:
        cmd += ["-k", repr(k)]
    if args:
        cmd.append(args)
    c.run(" ".join(cmd), pty=False)


@task
def lint(c, fix=False):
    """ruff over the whole tree."""
    c.run(f"{sys.executable} -m ruff check {'--fix ' if fix else ''}fleet tests tasks.py")


TASKS = [test, lint]
