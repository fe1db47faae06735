"""The `fleet` console script: the same tasks as `invoke`, usable outside the repository.

Three things differ from Invoke's own program, for operators: a parser error (`--bogus`, `-H`
without a value) is a usage error like any other (exit 2; with `--json` one JSON document on
stdout, docs/operations.md); the task list shows only what works where it runs: `verify`
and `release` need a project checkout (a pyproject.toml with a [tool.fleet] table at or above
the current directory), so outside one they are not offered, and naming them says why; and in
a task that takes a positional argument (`fleet exec -H web 'uptime'`) the core flags stay
flags: Invoke's parser fills a missing positional before it looks at core flags, so
`fleet exec --help` ran `--help` on the hosts instead of printing the task's help.
"""

from __future__ import annotations

import re
from pathlib import Path

from invoke import Argument, Exit, ParseError, Parser, ParserContext, Program
from invoke.parser.context import flag_key, to_flag

from fleet import __version__
from fleet.cli import CHECKOUT_ONLY, build_namespace
from fleet.cli.flags import USAGE_ERROR
from fleet.deploy import report
from fleet.terminal.text import visible

_NEEDS_VALUE = re.compile(r"Flag <Argument: (\w+)(?: \((\w)\))?> needed value and was not given")
_UNKNOWN = re.compile(r"No idea what '([^']*)' is!")
_POSITIONAL = re.compile(r"'([^']*)' did not receive required positional arguments: (.*)")


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
    positional = _POSITIONAL.search(text)
    if positional:
        task, names = positional.group(1), positional.group(2).replace("'", "")
        return f"error: `fleet {task}` needs its {names} (quoted); see `fleet {task} -h`"
    unknown = _UNKNOWN.search(text)
    if unknown and unknown.group(1) in CHECKOUT_ONLY and not checkout:
        return (f"error: `{unknown.group(1)}` works in a project checkout (a pyproject.toml "
                f"with a [tool.fleet] table) and there is none at or above {Path.cwd()}; run it "
                "from the checkout")
    if unknown:
        return (f"error: unknown task or flag {unknown.group(1)!r}; `fleet --list` shows the "
                "tasks, `fleet <task> -h` a task's flags")
    return f"error: {text}"


class PositionalContext(ParserContext):
    """A task's parser context that also knows the core flags (see the module doc), so they are
    read as flags before a token can fill the task's positional argument; `--help` is one even
    when the positional was not given. They are not the task's: its help leaves them out and
    `FleetProgram.parse_tasks` hands their values to the core context."""

    def __init__(self, task: ParserContext, core: ParserContext):
        self.mirrored: dict[str, str] = {}  # this context's argument name -> the core one's
        extra = []
        for arg in core.args.values():
            names = [n for n in arg.names if to_flag(n) not in task.flags and n not in task.args
                     and to_flag(n) not in task.inverse_flags]
            if not names:
                continue
            kind = bool if arg.name == "help" else arg.kind  # never eats the next token
            copy = Argument(names=names, kind=kind, default=False if kind is bool else None,
                            optional=arg.optional and kind is not bool,
                            incrementable=arg.incrementable)
            self.mirrored[copy.name] = arg.name
            extra.append(copy)
        super().__init__(task.name, task.aliases, [*task.args.values(), *extra])

    @property
    def missing_positional_args(self) -> list:
        help_ = next((n for n, core in self.mirrored.items() if core == "help"), None)
        if help_ is not None and self.args[help_].value:
            return []  # `fleet exec --help`: help, not "the command is missing"
        return super().missing_positional_args

    def help_tuples(self) -> list:
        own = [a for a in self.flags.values() if a.name not in self.mirrored]
        return [self.help_for(to_flag(a.name)) for a in sorted(own, key=flag_key)]

    def take_core(self, core_args) -> None:
        """Move the core flags given in this task to `core_args`; `--help` names the task."""
        for name, core in self.mirrored.items():
            arg = self.args.pop(name)
            if arg.got_value:
                core_args[core].value = self.name if core == "help" else arg.value


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

    def _make_parser(self) -> Parser:
        contexts = self.collection.to_contexts(
            ignore_unknown_help=self.config.tasks.ignore_unknown_help)
        return Parser(initial=self.initial_context, contexts=[
            PositionalContext(ctx, self.initial_context) if ctx.positional_args else ctx
            for ctx in contexts])

    def parse_tasks(self):
        try:
            super().parse_tasks()
        except ParseError as exc:
            self._usage(exc, self.argv)
        for ctx in self.tasks:
            if isinstance(ctx, PositionalContext):
                ctx.take_core(self.args)

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
