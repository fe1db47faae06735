"""What people and machines see: live per-host step lines, a final table, or JSON.

Live lines go to stderr (rich Live on a terminal; otherwise one timestamped line per change of a
host's step, never the same line twice) so that `--json` output on stdout stays clean for
machines. The final table has one row per host: host, from -> to, result, duration, note, then a
summary line with the run's total time; status tables highlight drift between hosts. Everything a
host or the inventory says is shown through fleet.terminal.text (escaped, never markup);
`--json` keeps it exact.

`--json` prints one document on stdout for every outcome, errors included (schema: JSON_SCHEMA
below, documented in docs/operations.md); the exit code is the same as without `--json`:
0 every host succeeded, 1 some host did not, 2 nothing was done (bad flag, inventory, selection,
refused confirmation).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from fleet.continuity.openclawrange import OUTSIDE, PROVEN, UNPROVEN, WORDS
from fleet.deploy.runner import HostResult
from fleet.installer.protocol import HostStatus
from fleet.terminal.text import cell, json_text, visible

RESULT_STYLE = {"installed": "green", "unchanged": "cyan", "rolled_back": "yellow",
                "restarted": "green", "planned": "blue", "ok": "green", "failed": "bold red",
                "unreachable": "bold red", "auth_failed": "bold red", "host_key": "bold red",
                "refused": "red", "skipped": "dim", "interrupted": "bold yellow",
                "locked": "yellow", "unlocked": "green", "free": "green", "running": "cyan",
                "stopped": "yellow", "started": "green", "removed": "yellow", "absent": "dim"}
JSON_SCHEMA = 1  # bump when a field changes meaning or goes away (adding fields is compatible)


def _release(rel: dict | None) -> str:
    if not rel:
        return "-"
    return str(rel.get("release") or rel.get("version") or "?")


class LiveReport:
    """Thread-safe per-host step display; use as a context manager around the run.

    An update only records the host's step: on a terminal, Rich's refresh thread draws the
    display REFRESH_PER_S times a second, so a run's thousands of updates do not each redraw
    every host (drawing on every update cost 10 ms of CPU per host at 64 hosts and grew with
    the fleet). A fleet taller than the terminal shows the hosts in progress (longest running
    first) and the failed ones, and one line counting the rest by step or result."""

    REFRESH_PER_S = 4

    def __init__(self, hosts: list[str], title: str, quiet: bool = False,
                 console: Console | None = None):
        self.hosts = hosts
        self.title = title
        self.state = {h: ("waiting", "", None) for h in hosts}
        self.lock = threading.Lock()
        self.console = console or Console(stderr=True)
        if console is None and not self.console.is_terminal:
            self.console = Console(stderr=True, width=200)
        self.quiet = quiet
        self.live = None

    def render(self) -> Text:
        """What the display shows now: every host, or as many as the terminal's height holds.
        Plain lines, not a Table: the display is drawn a few times a second for the whole run,
        and a Table of 50 rows costs ~9 ms to draw."""
        with self.lock:
            state = dict(self.state)
        now = time.monotonic()
        rows = max(3, self.console.size.height - 3)  # the title, the cursor's line, a margin
        shown = self.hosts if len(self.hosts) <= rows else _worth_showing(self.hosts, state,
                                                                          rows - 1)
        names = {h: visible(h) for h in shown}
        steps = {h: visible(state[h][0]) for h in shown}
        name_w = max(map(len, names.values()), default=0)
        step_w = max(map(len, steps.values()), default=0)
        out = Text(visible(self.title), style="", justify="left")
        out.stylize("table.title")
        for host in shown:
            step, note, t0 = state[host]
            out.append("\n")
            out.append(names[host].ljust(name_w), style="bold")
            out.append(" " + steps[host].ljust(step_w), style=RESULT_STYLE.get(step, "white"))
            if t0:
                out.append(f" {now - t0:5.1f}s")
            if note:
                out.append(" " + visible(note[:80]))
        if len(shown) < len(self.hosts):
            picked = set(shown)
            rest = Counter(_kind(state[h][0]) for h in self.hosts if h not in picked)
            counts = ", ".join(f"{n} {kind}" for kind, n in rest.most_common())
            out.append(f"\n+{len(self.hosts) - len(shown)} more: {counts}", style="dim")
        return out

    def __enter__(self) -> LiveReport:
        if not self.quiet and self.console.is_terminal:
            self.live = Live(console=self.console, refresh_per_second=self.REFRESH_PER_S,
                             transient=True, get_renderable=self.render)
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def update(self, host: str, step: str, note: str = "") -> None:
        with self.lock:
            before, before_note, t0 = self.state.get(host, ("", "", None))
            self.state[host] = (step, note, t0 or time.monotonic())
            if self.live is None and not self.quiet and (step, note) != (before, before_note):
                stamp = time.strftime("%H:%M:%S")
                line = Text(f"{stamp} ", style="dim")
                line.append(visible(host), style="bold")
                line.append(visible(f" {step} {note}".rstrip()))
                self.console.print(line, highlight=False, soft_wrap=True)


_FAILED = {result for result, style in RESULT_STYLE.items() if "red" in style}
_IN_PROGRESS = "in progress"


def _kind(step: str) -> str:
    """A host's step for the count of hosts not shown: a result or "waiting" as itself, any
    step of a host still being worked on as "in progress"."""
    return step if step in RESULT_STYLE or step == "waiting" else _IN_PROGRESS


def _worth_showing(hosts: list[str], state: dict, rows: int) -> list[str]:
    """At most `rows` hosts: those in progress, longest running first, and the failed ones;
    the failed keep at least half the rows while hosts are still in progress."""
    busy = sorted((h for h in hosts if _kind(state[h][0]) == _IN_PROGRESS),
                  key=lambda h: state[h][2] or 0.0)
    failed = [h for h in hosts if state[h][0] in _FAILED]
    failed = failed[:max(rows // 2, rows - len(busy))]
    return busy[:rows - len(failed)] + failed


def stdout_console() -> Console:
    """A terminal keeps its width; logs and pipes get wide lines instead of wrapped cells."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def _title(title: str) -> Text:
    """A table's title as Rich styles a `str` title, without reading it as markup (it names the
    artifact's version, which an `--artifact` file says)."""
    return Text(visible(title), style="table.title")


def results_table(title: str, results: list[HostResult]) -> Table:
    table = Table(title=_title(title))
    table.add_column("host", no_wrap=True)
    table.add_column("from -> to", overflow="fold")
    table.add_column("result", no_wrap=True)
    table.add_column("duration", no_wrap=True, justify="right")
    table.add_column("note", overflow="fold")
    for res in results:
        style = RESULT_STYLE.get(res.result, "white")
        table.add_row(cell(res.host),
                      cell(f"{_release(res.from_release)} -> {_release(res.to_release)}"),
                      cell(res.result, style), f"{res.duration_s:.1f}s", cell(res.note))
    return table


def json_document(action: str, results: list[HostResult], ok: bool, duration_s: float,
                  extra: dict | None = None, error: str | None = None,
                  exit_code: int | None = None) -> dict:
    """The one `--json` document of a run (see docs/operations.md, "--json")."""
    doc = {"schema": JSON_SCHEMA, "action": action, "ok": ok,
           "exit_code": (0 if ok else 1) if exit_code is None else exit_code,
           "error": error, "duration_s": round(duration_s, 3),
           "summary": dict(sorted(Counter(r.result for r in results).items())),
           "hosts": [r.as_dict() for r in results]}
    doc.update(extra or {})
    return doc


def print_json(doc: dict) -> None:
    """The document with every text exact (JSON escaping only, fleet.terminal.text)."""
    sys.stdout.write(json_text(doc, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def summary_line(results: list[HostResult], duration_s: float, ok: bool | None = None) -> Text:
    """`OK: 3 installed in 4.2s` / `FAILED: 1 failed, 2 installed in 9.0s` (results are the
    hosts' words: escaped, never markup)."""
    ok = all(r.ok for r in results) if ok is None else ok
    counts = Counter(r.result for r in results)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no hosts"
    return Text.assemble(("OK" if ok else "FAILED", "green" if ok else "bold red"),
                         f": {visible(summary)} in {duration_s:.1f}s")


def print_results(title: str, results: list[HostResult], duration_s: float = 0.0) -> None:
    """The table of a run and its summary line, on stdout (`--json` prints the document)."""
    ok = all(r.ok for r in results)
    console = stdout_console()
    console.print(results_table(title, results))
    console.print(summary_line(results, duration_s, ok), highlight=False)


def _status(res: HostResult) -> HostStatus:
    """A status run's typed answer (read from `data` for a HostResult built without one)."""
    if res.status is not None:
        return res.status
    return HostStatus.from_dict(res.data or {}, res.host) if res.ok else HostStatus()


WIDE = 150  # below this many columns the status table leaves out components and last change


def status_table(results: list[HostResult], width: int = 200) -> Table:
    """One row per host; a release, version or readiness that differs from the majority is red.

    Host names and releases are never cut or folded; on a narrow terminal the table keeps host,
    release, gateway, ready, free disk (and lock, when one is held) and leaves the long columns
    (components, last change) to a wider terminal and to `--json`."""
    rows = [(r, _status(r)) for r in results]
    common = Counter(_release(st.current) for r, st in rows if r.ok)
    baseline = common.most_common(1)[0][0] if common else None
    wide = width >= WIDE
    show_lock = wide or any(st.lock for _, st in rows)
    show_openclaw = any(st.openclaw_support for _, st in rows)
    columns = ["host", "release", *(["components"] if wide else []), "gateway",
               *(["openclaw"] if show_openclaw else []), "ready", "free disk",
               *(["lock"] if show_lock else []), *(["last change"] if wide else [])]
    table = Table(title="fleet status")
    for column in columns:
        table.add_column(column, no_wrap=column in ("host", "release", "free disk"),
                         overflow="fold", min_width=5 if column == "ready" else None)
    for res, st in rows:
        cells: dict = {"host": cell(res.host)}
        if not res.ok:
            cells["release"] = cell(res.result, "bold red")
            cells["ready"] = cell(res.note)
            table.add_row(*(cells.get(c, "") for c in columns))
            continue
        current = st.current
        release = _release(current)
        drift = release != baseline
        gw, lock, audit = st.gateway, st.lock, st.last_audit
        uptime = gw.get("uptime_s")
        components = ", ".join(f"{k} {v}" for k, v in sorted(
            ((current or {}).get("components") or {}).items()))
        gateway = (f"pid {visible(gw['pid'])}, up {uptime:.0f}s" if gw.get("pid")
                   and uptime is not None else "-")
        if gw.get("openclaw"):  # an OpenClaw host: its version, and what its gateway loaded
            # each line is the host's words, escaped one by one: only fleet breaks lines here
            gateway = visible(f"openclaw {gw['openclaw']} pid {gw.get('gateway_pid') or '?'}")
            gateway += "\nloaded: " + visible(", ".join(
                f"{k} {v.get('version')} {v.get('status')}"
                for k, v in sorted((gw.get("plugins") or {}).items()) if isinstance(v, dict)))
            if gw.get("rpc", "direct") != "direct":  # why fleet boots the CLI for each RPC
                gateway += "\nrpc: " + visible(gw["rpc"])
        gateway += supervisor_note(st.supervisor)
        cells.update({
            "release": cell(release + (" (drift)" if drift else ""),
                            "bold red" if drift else "green"),
            "components": cell(components),
            "gateway": Text(gateway),
            "ready": cell("yes" if st.ready else f"no: {st.problem}",
                          "green" if st.ready else "bold red"),
            "openclaw": openclaw_cell(st.openclaw_support),
            "free disk": human_bytes(st.disk_free_bytes),
            "lock": "-" if not lock else cell(f"{lock.owner} pid {lock.pid}"
                                              + (f" (stale: {lock.stale})" if lock.stale else "")),
            "last change": cell(f"{audit.get('time', '')} {audit.get('action', '')} "
                                f"{audit.get('result', '')} by {audit.get('who', '?')}")
            if audit else "-"})
        table.add_row(*(cells[c] for c in columns))
    return table


def supervisor_note(sup: dict | None) -> str:
    """A line under the gateway when its supervisor restarted it or is not running ("" when all
    is well, or the manager has no supervisor of its own); the host's words escaped."""
    if not sup:
        return ""
    if not sup.get("running"):
        return "\nnot supervised"
    restarts = sup.get("restarts") or 0
    if not restarts:
        return ""
    last = sup.get("last_exit") if isinstance(sup.get("last_exit"), dict) else {}
    return "\n" + visible(f"restarted {restarts}x, last: {last.get('why', '?')}")


SUPPORT_STYLE = {PROVEN: "green", UNPROVEN: "yellow", OUTSIDE: "bold red"}


def openclaw_cell(support: dict | None) -> Text:
    """An OpenClaw host's OpenClaw against its active release's proof, in plain words (the
    message itself is in `--json` and in `invoke doctor`)."""
    if not support:
        return Text("-")
    state = str(support.get("state"))
    return cell(f"{support.get('version')}: {WORDS.get(state, state)}",
                SUPPORT_STYLE.get(state, "white"))


def status_summary(results: list[HostResult], duration_s: float) -> Text:
    """`3 hosts: 3 ready, 0 not ready, 0 unreachable; 1 release (5.0.0-ab12...) in 0.4s`
    (release names are the hosts' words: escaped, never markup)."""
    ready = sum(1 for r in results if r.ok and _status(r).ready)
    down = sum(1 for r in results if not r.ok)
    releases = sorted({_release(_status(r).current) for r in results if r.ok})
    ok = ready == len(results)
    unproven = sum(1 for r in results if r.ok and (_status(r).openclaw_support or {}).get(
        "state", PROVEN) != PROVEN)
    drift = (f"; {unproven} on an OpenClaw their release was not proven on (invoke doctor "
             "says what to do)" if unproven else "")
    return Text.assemble(
        ("OK" if ok else "ATTENTION", "green" if ok else "bold red"),
        f": {len(results)} host(s): {ready} ready, {len(results) - ready - down} not ready, "
        f"{down} unreachable or failing; {len(releases)} release(s): "
        f"{visible(', '.join(releases)) or '-'}{drift}; in {duration_s:.1f}s")


def human_bytes(value) -> str:
    if not isinstance(value, int) or isinstance(value, bool):
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
