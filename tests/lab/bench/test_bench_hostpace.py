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
    same = {"user_s": 0.384, "sys_s": 0.128, "packets_received": 2752, "packets_sent": 896}
    rows = {"free": [{"control_cpu_s": 0.512, "wall_s": 12.0, **same},
                     {"control_cpu_s": 0.50, "wall_s": 11.7, **same}],
            "slowed": [{"control_cpu_s": 0.608, "wall_s": 23.3, **same}],
            "held": [{"control_cpu_s": 0.48, "wall_s": 31.9, **same}]}
    hostpace.figures(sec, rows, 64)
    per_host = ("user 6.00 ms, sys 2.00 ms (with the sampler's); SSH packets received 43.0, "
                "sent 14.0")
    assert sec.figures["free: control CPU per host"] == f"7.91 ms (wall 11.7-12.0 s); {per_host}"
    assert sec.figures["slowed: control CPU per host"] == (
        f"9.50 ms (wall 23.3-23.3 s); {per_host}")
    assert sec.figures["slowed / free"] == "1.20"
    assert sec.figures["held / free"] == "0.95"
