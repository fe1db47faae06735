"""Developer tasks: the test suite and the linter."""

from __future__ import annotations

import sys

from fleet.cli.flags import task


def pytest_command(k: str = "", docker: bool = False, unit: bool = False,
                   args: str = "", openclaw: bool = False) -> list[str]:
    """The pytest argument list (a list, never one shell string: `-k "a and not b"` stays one
    argument and `-m "not docker"` is not split into three)."""
    import shlex  # noqa: PLC0415

    cmd = [sys.executable, "-m", "pytest"]
    if docker:
        cmd += ["-m", "docker"]
    elif openclaw:
        cmd += ["-m", "openclaw"]
    elif unit:
        cmd += ["-m", "not docker and not openclaw"]
    if k:
        cmd += ["-k", k]
    if args:
        cmd += shlex.split(args)
    return cmd


def _run(cmd: list[str]) -> None:
    """Run an argument list in the foreground; exit with its code (no shell in between)."""
    import subprocess  # noqa: PLC0415

    from invoke import Exit  # noqa: PLC0415

    code = subprocess.call(cmd)
    if code:
        raise Exit(code=code)


@task(
    help={
        "k": "only tests matching this pytest -k expression (spaces allowed: -k 'a and not b')",
        "docker": "only the Docker integration tests",
        "unit": "skip the Docker and real-OpenClaw tests",
        "openclaw": "only the tests against real OpenClaw gateways",
        "args": "extra pytest arguments (split like a shell would)",
    }
)
def test(c, k="", docker=False, unit=False, openclaw=False, args=""):
    """Run the test suite (the README's test command)."""
    import importlib.util  # noqa: PLC0415

    from invoke import Exit  # noqa: PLC0415

    if importlib.util.find_spec("pytest") is None:
        raise Exit("error: pytest is not installed here; the test tools are an extra: "
                   "pip install -e '.[dev]'", 2)
    _run(pytest_command(k, docker, unit, args, openclaw))


@task
def lint(c, fix=False):
    """ruff over the whole tree."""
    import importlib.util  # noqa: PLC0415

    from invoke import Exit  # noqa: PLC0415

    if importlib.util.find_spec("ruff") is None:
        raise Exit("error: ruff is not installed here: pip install -e '.[dev]'", 2)
    _run([sys.executable, "-m", "ruff", "check", *(["--fix"] if fix else []),
          "fleet", "tests", "tasks.py"])


TASKS = [test, lint]
