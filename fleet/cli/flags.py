"""Flags as Fabric users expect them, for every task: `-h` is help, `-H` is `--hosts`.

Invoke gives each flag an automatic short form from its first free letter, so a task with a
`hosts` argument took `-h`, and `invoke deploy -h` asked for a host list instead of printing help.
`task` here is Invoke's decorator with a Task class that never hands out `-h` and maps `-H` to
`--hosts` (Fabric's spelling). Numbers are taken as text and parsed by `number()`, so a bad value
(`--parallel abc`) is a one-line error with exit 2, not a traceback from Invoke's parser.
Invoke's own `-e`/`--echo` (and `fleet -v`) makes every task print each command it sends to a
host (fleet.deploy.connection.echo_commands).
"""

from __future__ import annotations

from typing import Any

from invoke import Exit, Task
from invoke import task as invoke_task

from fleet.deploy import connection

USAGE_ERROR = 2  # exit code of a bad flag, inventory or host selection (nothing was changed)


class FleetTask(Task):
    """An Invoke task whose short flags leave `-h` to help and give `-H` to `--hosts`."""

    def arg_opts(self, name: str, default: Any, taken_names: set) -> dict:
        # `-` is never a short flag: Invoke takes the first free character of the name, which
        # for `skip-hooks` (s, k, i, p, h, o all taken) was the dash, shown as `--`
        opts = super().arg_opts(name, default, taken_names | {"h", "H", "-"})
        if name == "hosts":
            opts["names"] = ["hosts", "H"]
        return opts

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        ctx = args[0] if args else None
        echo = getattr(getattr(getattr(ctx, "config", None), "run", None), "echo", False)
        connection.echo_commands(bool(echo))
        return super().__call__(*args, **kwargs)


def task(*args: Any, **kwargs: Any):
    """`@task` / `@task(help=...)` with FleetTask (same signature as invoke.task)."""
    kwargs.setdefault("klass", FleetTask)
    return invoke_task(*args, **kwargs)


def number(value: Any, flag: str, minimum: int = 1, maximum: int | None = None,
           why: str = "") -> int:
    """A whole-number flag value within [minimum, maximum], or a clear usage error naming the
    flag and the bound it broke (`why`: what sets the maximum, said with it)."""
    try:
        result = int(str(value).strip())
    except ValueError:
        raise Exit(f"error: {flag} {value!r}: expected a whole number (e.g. {flag} 4)",
                   USAGE_ERROR) from None
    if result < minimum:
        raise Exit(f"error: {flag} {result}: use {minimum} or more", USAGE_ERROR)
    if maximum is not None and result > maximum:
        raise Exit(f"error: {flag} {result}: at most {maximum}{f' ({why})' if why else ''}; "
                   f"use {flag} {maximum} or less", USAGE_ERROR)
    return result
