"""One task run as the user sees it end: the table or the `--json` document, and the exit code.

Every task that takes `--json` prints exactly one document of one shape (report.json_document,
schema in docs/operations.md) for every way it ends, usage errors included: `guard()` turns a
bad flag, inventory or selection into exit 2 (with its error document under `--json`), and
`finish()` prints the results and exits 1 unless every host succeeded. An error's message may
quote the inventory or ssh_config: the terminal gets it escaped (fleet.terminal.text),
the `--json` document exact.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from invoke import Exit

from fleet.cli.flags import USAGE_ERROR
from fleet.deploy import report
from fleet.deploy.inventory import InventoryError
from fleet.terminal.text import visible


class Run:
    """One task run: its start time, and `--json` for every way it ends (errors included)."""

    def __init__(self, action: str, as_json: bool):
        self.action = action
        self.as_json = as_json
        self.t0 = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    @contextlib.contextmanager
    def guard(self) -> Iterator[Run]:
        """Usage errors become `Exit(..., 2)`; with --json also the error document on stdout.
        The message Invoke prints is escaped (it may quote an inventory), the document's exact."""
        try:
            yield self
        except Exit as exc:
            if exc.message:
                if self.as_json:
                    report.print_json(report.json_document(
                        self.action, [], False, self.elapsed, error=str(exc.message).strip(),
                        exit_code=exc.code))
                exc.message = visible(exc.message, multiline=True)
            raise
        except (InventoryError, ValueError) as exc:
            message = f"error: {exc}"
            if self.as_json:
                report.print_json(report.json_document(self.action, [], False, self.elapsed,
                                                       error=message, exit_code=USAGE_ERROR))
            raise Exit(visible(message, multiline=True), USAGE_ERROR) from None

    def finish(self, title: str, results, extra: dict | None = None) -> None:
        report.print_results(title, results, self.as_json, extra, self.elapsed)
        if not all(r.ok for r in results):
            raise Exit(code=1)

    def document(self, ok: bool, extra: dict | None = None, exit_code: int | None = None,
                 results=()) -> None:
        """The `--json` document of a task without per-host results (or with its own exit)."""
        report.print_json(report.json_document(self.action, list(results), ok, self.elapsed,
                                               extra, exit_code=exit_code))
