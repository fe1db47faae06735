"""Pure parts of the hosts' pace benchmark (lab.bench.hostpace): opt-in, and its figures."""

from __future__ import annotations

from lab.bench import hostpace
from lab.bench.report import Section
from lab.bench.run import parse_selection


def test_hostpace_is_opt_in_and_selectable():
    assert "hostpace" not in parse_selection("")
    assert parse_selection("hostpace") == ["hostpace"]


def test_figures_give_each_case_per_host_and_against_free():
    sec = Section("hostpace", "t")
    rows = {"free": [{"control_cpu_s": 0.512, "wall_s": 12.0},
                     {"control_cpu_s": 0.50, "wall_s": 11.7}],
            "slowed": [{"control_cpu_s": 0.608, "wall_s": 23.3}],
            "held": [{"control_cpu_s": 0.48, "wall_s": 31.9}]}
    hostpace.figures(sec, rows, 64)
    assert sec.figures["free: control CPU per host"] == "7.91 ms (wall 11.7-12.0 s)"
    assert sec.figures["slowed: control CPU per host"] == "9.50 ms (wall 23.3-23.3 s)"
    assert sec.figures["slowed / free"] == "1.20"
    assert sec.figures["held / free"] == "0.95"
