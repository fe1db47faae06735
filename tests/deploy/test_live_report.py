"""The live per-host display on a terminal: what it shows, and what an update costs.

A run of a thousand hosts sends the display ~12 updates per host; each used to redraw every
host, so the display's CPU per host grew with the fleet. Updates now only record the step and
the display is drawn at the refresh rate, never taller than the terminal."""

from __future__ import annotations

import io
import time

from rich.console import Console

from fleet.deploy.report import LiveReport


def _terminal(height: int = 20, width: int = 100) -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=width, height=height)


def _lines(report: LiveReport) -> list[str]:
    out = Console(file=io.StringIO(), width=100, color_system=None)
    out.print(report.render())
    return out.file.getvalue().splitlines()


def test_a_fleet_that_fits_the_terminal_shows_every_host_in_inventory_order():
    hosts = [f"h{i}" for i in range(5)]
    report = LiveReport(hosts, "deploy 1.2.3", console=_terminal(height=20))
    report.update("h3", "install: unpack")
    report.update("h1", "failed", "unreachable")
    lines = _lines(report)
    assert lines[0] == "deploy 1.2.3"
    assert [line.split()[0] for line in lines[1:]] == hosts
    assert "failed" in lines[2] and "unreachable" in lines[2]
    assert "install: unpack" in lines[4] and "waiting" in lines[1]


def test_a_fleet_taller_than_the_terminal_shows_work_in_progress_failures_and_a_count():
    hosts = [f"host-{i:03d}" for i in range(300)]
    report = LiveReport(hosts, "deploy", console=_terminal(height=20))
    for i, host in enumerate(hosts):
        if i < 200:
            report.update(host, "installed")
        elif i < 250:
            report.update(host, "install: ready")
    report.update("host-007", "unreachable", "connection refused")
    lines = _lines(report)
    assert len(lines) <= 20 - 2  # the title, the hosts, the count; room for the cursor
    shown = [line.split()[0] for line in lines[1:-1]]
    assert "host-007" in shown  # a failure is never crowded out by hosts in progress
    assert shown[0] == "host-200"  # then the longest running first
    assert all(host.startswith("host-2") for host in shown if host != "host-007")
    assert lines[-1].startswith(f"+{300 - len(shown)} more: ")
    counts = dict(reversed(part.split(" ", 1)) for part in lines[-1].split(": ", 1)[1]
                  .split(", "))
    assert counts == {"installed": "199", "waiting": "50",
                      "in progress": str(50 - (len(shown) - 1))}


def test_many_failures_leave_half_the_rows_to_hosts_in_progress():
    hosts = [f"h{i:03d}" for i in range(100)]
    report = LiveReport(hosts, "deploy", console=_terminal(height=14))
    for host in hosts[:60]:
        report.update(host, "failed", "boom")
    for host in hosts[60:]:
        report.update(host, "upload")
    shown = [line.split()[1] for line in _lines(report)[1:-1]]
    assert shown.count("failed") == shown.count("upload") == 5


def test_host_names_and_notes_reach_the_terminal_escaped():
    report = LiveReport(["\x1b[2Jevil", "ok"], "deploy [bold]x", console=_terminal())
    report.update("\x1b[2Jevil", "failed", "\x1b]0;title\x07 [red]markup")
    text = report.render()
    assert "\x1b" not in text.plain and "\x07" not in text.plain
    assert "[red]markup" in text.plain and "deploy [bold]x" in text.plain


class _Counting(LiveReport):
    renders = 0

    def render(self):
        type(self).renders += 1
        return super().render()


def test_updates_on_a_terminal_do_not_redraw_the_display():
    hosts = [f"h{i}" for i in range(1000)]
    with _Counting(hosts, "deploy", console=_terminal()) as report:
        t0 = time.monotonic()
        for _ in range(5):
            for host in hosts:
                report.update(host, "install: unpack")
        elapsed = time.monotonic() - t0
    # drawn when it starts and stops and at most at the refresh rate in between, not 5,000 times
    assert _Counting.renders <= 3 + elapsed * LiveReport.REFRESH_PER_S * 2
    assert report.state["h999"][0] == "install: unpack"
