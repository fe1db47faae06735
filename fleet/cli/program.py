"""The `fleet` console script: the same tasks as `invoke`, usable outside the repository.

Two things differ from Invoke's own program, for operators: a parser error (`--bogus`, `-H`
without a value) is a usage error like any other (exit 2; with `--json` one JSON document on
stdout, docs/operations.md), and the task list shows only what works where it runs: `verify`
and `release` need a project checkout (a pyproject.toml with a [tool.fleet] table at or above
the current directory), so outside one they are not offered, and naming them says why.
"""

from __future__ import annotations

import re
from pathlib import Path

from invoke import Argument, Exit, ParseError, Program

from fleet import __version__
from fleet.cli import CHECKOUT_ONLY, build_namespace
from fleet.cli.flags import USAGE_ERROR
from fleet.deploy import report
from fleet.terminal.text import visible

_NEEDS_VALUE = re.compile(r"Flag <Argument: (\w+)(?: \((\w)\))?> needed value and was not given")
_UNKNOWN = re.compile(r"No idea what '([^']*)' is!")


def in_checkout(start: Path | None = None) -> bool:
    """True when `verify` and `release` can work here (a [tool.fleet] project at or above)."""
    from fleet.release.component import find_root  # noqa: PLC0415
    from fleet.release.error import ReleaseError  # noqa: PLC0415

    try:
        find_root(start or Path.cwd())
    except (ReleaseError, OSError):
        return False
    return True


def usage_message(exc: ParseError, checkout: bool) -> str:
    """Invoke's parser message in the words of the tasks' own usage errors."""
    text = str(exc)
    missing = _NEEDS_VALUE.search(text)
    if missing:
        name, short = missing.group(1), missing.group(2)
        flag = f"--{name.replace('_', '-')}" + (f" (-{short})" if short else "")
        return f"error: {flag} needs a value; see `fleet <task> -h`"
    unknown = _UNKNOWN.search(text)
    if unknown and unknown.group(1) in CHECKOUT_ONLY and not checkout:
        return (f"error: `{unknown.group(1)}` works in a project checkout (a pyproject.toml "
                f"with a [tool.fleet] table) and there is none at or above {Path.cwd()}; run it "
                "from the checkout")
    if unknown:
        return (f"error: unknown task or flag {unknown.group(1)!r}; `fleet --list` shows the "
                "tasks, `fleet <task> -h` a task's flags")
    return f"error: {text}"


class FleetProgram(Program):
    """Invoke's Program with parser errors as usage errors (see the module doc)."""

    checkout = True

    def core_args(self) -> list:
        """Invoke's core flags, and `-v`/`--verbose` as Ansible users type it: Invoke's
        `--echo` for what fleet runs (each command sent to a host, on stderr)."""
        return [*super().core_args(), Argument(
            names=("verbose", "v"), kind=bool, default=False,
            help="Print each command sent to a host, and how it ended (as --echo).")]

    def update_config(self, merge: bool = True) -> None:
        super().update_config(merge=False)
        if self.args.verbose.value:
            self.config.load_overrides({"run": {"echo": True}}, merge=False)
        if merge:
            self.config.merge()

    def parse_core(self, argv):
        try:
            super().parse_core(argv)
        except ParseError as exc:
            self._usage(exc, argv or [])

    def parse_tasks(self):
        try:
            super().parse_tasks()
        except ParseError as exc:
            self._usage(exc, self.argv)

    def _usage(self, exc: ParseError, argv: list) -> None:
        message = usage_message(exc, self.checkout)
        if "--json" in argv:
            action = next((a for a in argv[1:] if not a.startswith("-")), "fleet")
            report.print_json(report.json_document(action, [], False, 0.0, error=message,
                                                   exit_code=USAGE_ERROR))
            raise Exit(code=USAGE_ERROR)
        raise Exit(visible(message, multiline=True), code=USAGE_ERROR)


def main() -> None:
    checkout = in_checkout()
    program = FleetProgram(namespace=build_namespace(checkout=checkout), version=__version__,
                           name="fleet", binary="fleet")
    program.checkout = checkout
    program.run()
