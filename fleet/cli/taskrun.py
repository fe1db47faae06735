"""One task run as the user sees it end: the table or the `--json` document, and the exit code.

Every task that takes `--json` prints exactly one document of one shape (report.json_document,
schema in docs/operations.md) for every way it ends, usage errors included: `guard()` turns a
bad flag, inventory or selection into exit 2 (with its error document under `--json`), and
`finish()` prints the results and exits 1 unless every host succeeded. An error's message may
quote the inventory or ssh_config: the terminal gets it escaped (fleet.terminal.text),
the `--json` document exact. A deploy or rollback may have run hooks (`hooks`,
fleet.deploy.runhooks): a `pre-*` hook that fails is a refusal (exit 2, the document says which
hook and why), the finished document goes to the `post-*` hooks before it is printed, and
both documents list the hooks that ran.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from invoke import Exit

from fleet.cli.flags import USAGE_ERROR
from fleet.deploy import report
from fleet.deploy.inventory import InventoryError
from fleet.deploy.runhooks import HookRefused, RunHooks
from fleet.terminal.text import visible


class Run:
    """One task run: its start time, and `--json` for every way it ends (errors included)."""

    def __init__(self, action: str, as_json: bool):
        self.action = action
        self.as_json = as_json
        self.t0 = time.monotonic()
        self.hooks: RunHooks | None = None  # set once the run is about to change hosts

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
        except HookRefused as exc:
            message = f"error: {exc}"
            if self.as_json:
                report.print_json(report.json_document(self.action, [], False, self.elapsed,
                                                       {"hooks": exc.results}, error=message,
                                                       exit_code=USAGE_ERROR))
            raise Exit(visible(message, multiline=True), USAGE_ERROR) from None
        except (InventoryError, ValueError) as exc:
            message = f"error: {exc}"
            if self.as_json:
                report.print_json(report.json_document(self.action, [], False, self.elapsed,
                                                       error=message, exit_code=USAGE_ERROR))
            raise Exit(visible(message, multiline=True), USAGE_ERROR) from None

    def finish(self, title: str, results, extra: dict | None = None) -> None:
        ok = all(r.ok for r in results)
        doc = report.json_document(title.split()[0], results, ok, self.elapsed, extra)
        self.after(doc)
        if self.as_json:
            report.print_json(doc)
        else:
            report.print_results(title, results, self.elapsed)
        if not ok:
            raise Exit(code=1)

    def after(self, doc: dict, took_back: bool = False) -> None:
        """The run's hooks after it (`took_back`: it took a rollout back), given the finished
        document, which then lists every hook that ran."""
        if self.hooks is not None:
            self.hooks.after(doc, took_back)
            doc["hooks"] = self.hooks.results()

    def document(self, ok: bool, extra: dict | None = None, exit_code: int | None = None,
                 results=()) -> None:
        """The `--json` document of a task without per-host results (or with its own exit)."""
        report.print_json(report.json_document(self.action, list(results), ok, self.elapsed,
                                               extra, exit_code=exit_code))
