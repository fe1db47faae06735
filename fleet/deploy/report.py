"""What people and machines see: live per-host step lines, a final table, or JSON.

Live lines go to stderr (rich Live on a terminal, one plain line per change otherwise) so that
`--json` output on stdout stays clean for machines. The final table has one row per host:
host, from -> to, result, duration, note; status tables highlight drift between hosts.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from fleet.deploy.runner import HostResult

RESULT_STYLE = {"installed": "green", "unchanged": "cyan", "rolled_back": "yellow",
                "restarted": "green", "planned": "blue", "ok": "green", "failed": "bold red",
                "refused": "red", "skipped": "dim", "interrupted": "bold yellow"}


def _release(rel: dict | None) -> str:
    if not rel:
        return "-"
    return str(rel.get("release") or rel.get("version") or "?")


class LiveReport:
    """Thread-safe per-host step display; use as a context manager around the run."""

    def __init__(self, hosts: list[str], title: str, quiet: bool = False):
        self.hosts = hosts
        self.title = title
        self.state = {h: ("waiting", "", None) for h in hosts}
        self.lock = threading.Lock()
        self.console = Console(stderr=True)
        if not self.console.is_terminal:
            self.console = Console(stderr=True, width=200)
        self.quiet = quiet
        self.live = None

    def _render(self) -> Table:
        table = Table(title=self.title, show_header=False, box=None, pad_edge=False)
        now = time.monotonic()
        for host in self.hosts:
            step, note, t0 = self.state[host]
            elapsed = f"{now - t0:5.1f}s" if t0 else ""
            table.add_row(Text(host, style="bold"),
                          Text(step, style=RESULT_STYLE.get(step, "white")), elapsed, note[:80])
        return table

    def __enter__(self) -> LiveReport:
        if not self.quiet and self.console.is_terminal:
            self.live = Live(self._render(), console=self.console, refresh_per_second=8,
                             transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def update(self, host: str, step: str, note: str = "") -> None:
        with self.lock:
            _, _, t0 = self.state.get(host, ("", "", None))
            self.state[host] = (step, note, t0 or time.monotonic())
            if self.live is not None:
                self.live.update(self._render())
            elif not self.quiet:
                self.console.print(f"[bold]{host}[/bold] {step} {note}".rstrip(),
                                   highlight=False)


def stdout_console() -> Console:
    """A terminal keeps its width; logs and pipes get wide lines instead of wrapped cells."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def results_table(title: str, results: list[HostResult]) -> Table:
    table = Table(title=title)
    for column in ("host", "from -> to", "result", "duration", "note"):
        table.add_column(column)
    for res in results:
        style = RESULT_STYLE.get(res.result, "white")
        table.add_row(res.host, f"{_release(res.from_release)} -> {_release(res.to_release)}",
                      Text(res.result, style=style), f"{res.duration_s:.1f}s", res.note)
    return table


def print_results(title: str, results: list[HostResult], as_json: bool,
                  extra: dict | None = None) -> None:
    ok = all(r.ok for r in results)
    if as_json:
        doc = {"ok": ok, "hosts": [r.as_dict() for r in results]}
        doc.update(extra or {})
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
        return
    console = stdout_console()
    console.print(results_table(title, results))
    counts = Counter(r.result for r in results)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    console.print(f"[{'green' if ok else 'bold red'}]{'OK' if ok else 'FAILED'}[/]: {summary}")


def status_table(results: list[HostResult]) -> Table:
    """One row per host; a release, version or readiness that differs from the majority is red."""
    rows = [(r, r.data or {}) for r in results]
    common = Counter(_release(d.get("current") or None) for r, d in rows if r.ok)
    baseline = common.most_common(1)[0][0] if common else None
    table = Table(title="fleet status")
    for column in ("host", "release", "components", "gateway pid", "uptime", "ready", "lock",
                   "last change"):
        table.add_column(column)
    for res, data in rows:
        if not res.ok:
            table.add_row(res.host, Text("unreachable", style="bold red"), "", "", "", "", "",
                          res.note)
            continue
        current = data.get("current")
        release = _release(current)
        drift = release != baseline
        gw = data.get("gateway") or {}
        comps = ", ".join(f"{k} {v}" for k, v in sorted(((current or {}).get("components")
                                                          or {}).items()))
        lock = data.get("lock")
        lock_text = "-" if not lock else (f"{lock.get('owner')} pid {lock.get('pid')}"
                                          + (f" (stale: {lock['stale']})" if lock.get("stale")
                                             else ""))
        audit = data.get("last_audit") or {}
        last = (f"{audit.get('time', '')} {audit.get('action', '')} {audit.get('result', '')} "
                f"by {audit.get('who', '?')}") if audit else "-"
        uptime = gw.get("uptime_s")
        pid = str(gw.get("pid", "-"))
        if gw.get("openclaw"):  # an OpenClaw host: its version, and what its gateway loaded
            pid = f"openclaw {gw['openclaw']} pid {gw.get('gateway_pid') or '?'}"
            comps += "\nloaded: " + ", ".join(
                f"{k} {v.get('version')} {v.get('status')}"
                for k, v in sorted((gw.get("plugins") or {}).items()) if isinstance(v, dict))
        table.add_row(
            res.host, Text(release + (" (drift)" if drift else ""),
                           style="bold red" if drift else "green"),
            comps, pid, f"{uptime:.0f}s" if uptime is not None else "-",
            Text("yes" if data.get("ready") else f"no: {data.get('problem')}",
                 style="green" if data.get("ready") else "bold red"),
            lock_text, last)
    return table
