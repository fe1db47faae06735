"""Developer tasks: the test suite and the linter."""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys

from invoke import Exit

from fleet.cli.flags import number, task


def default_workers() -> int:
    """Test processes: one more than the cores, since most tests wait on a subprocess."""
    return (os.cpu_count() or 1) + 1


def pytest_command(k: str = "", docker: bool = False, unit: bool = False,
                   args: str = "", openclaw: bool = False, workers: int = 1) -> list[str]:
    """The pytest argument list (a list, never one shell string: `-k "a and not b"` stays one
    argument and `-m "not docker"` is not split into three).

    With `workers` > 1 the tests run in that many processes (pytest-xdist); the tests that
    start real OpenClaw gateways share one of them and the other Docker tests another
    (`--dist loadgroup`, tests/conftest.py), so at most one pair of OpenClaw gateways runs at a
    time, as in a serial run.
    """
    cmd = [sys.executable, "-m", "pytest"]
    if workers > 1:
        cmd += ["-n", str(workers), "--dist", "loadgroup"]
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
        "workers": "test processes (default: cores + 1; 1 runs them in this one)",
    }
)
def test(c, k="", docker=False, unit=False, openclaw=False, args="", workers=""):
    """Run the test suite (the README's test command)."""
    for module, extra in (("pytest", "the test tools"), ("xdist", "pytest-xdist")):
        if importlib.util.find_spec(module) is None:
            raise Exit(f"error: {extra} not installed here; the test tools are an extra: "
                       "pip install -e '.[dev]'", 2)
    count = (number(workers, "--workers", maximum=64, why="one test process each")
             if workers else default_workers())
    _run(pytest_command(k, docker, unit, args, openclaw, count))


VULTURE_PATHS = ["fleet", "lab", "tests", "tasks.py", "vulture_whitelist.py"]


@task
def lint(c, fix=False):
    """Run ruff over the whole tree, then vulture (no unused code in `fleet/` or `lab/`).

    Tests count as users; names only a framework calls are listed, with the reason, in
    vulture_whitelist.py.
    """
    for tool in ("ruff", "vulture"):
        if importlib.util.find_spec(tool) is None:
            raise Exit(f"error: {tool} is not installed here: pip install -e '.[dev]'", 2)
    _run([sys.executable, "-m", "ruff", "check", *(["--fix"] if fix else []),
          *VULTURE_PATHS])
    found = subprocess.run([sys.executable, "-m", "vulture", *VULTURE_PATHS],
                           capture_output=True, text=True)
    dead = [line for line in found.stdout.splitlines() if not line.startswith("tests/")]
    if found.returncode not in (0, 3) or dead:  # 3: vulture found something (maybe in tests/)
        print("\n".join(dead) or found.stderr.strip())
        raise Exit("error: unused code in fleet/ or lab/: remove it, or (for a name only a "
                   "framework calls) add it to vulture_whitelist.py with the reason", 1)


TASKS = [test, lint]
