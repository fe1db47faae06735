"""The `fleet` console script: the same tasks as `invoke`, usable outside the repository."""

from __future__ import annotations

from invoke import Program

from fleet import __version__
from fleet.cli import ns


def main() -> None:
    Program(namespace=ns, version=__version__, name="fleet", binary="fleet").run()
