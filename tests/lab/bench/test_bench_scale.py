"""Pure parts of the round-2 benchmarks: the floor, per-host figures, the 1,000-host projection,
the plot's data, the rivals' inventory, and the bench extra (no Docker, no timing)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from fleet.deploy.inventory import Host
from lab.bench import plot, scale, tools
from lab.bench.pyinfradeploy import inventory_text
from lab.bench.report import Report, Section
from lab.bench.run import parse_selection

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_cores_split_between_the_deploy_and_the_hosts():
    assert scale.split_cores(2) == ([0], [1])
    assert scale.split_cores(4) == ([0], [1, 2, 3])
    assert scale.split_cores(1) == ([0], [0])
    with pytest.raises(ValueError):
        scale.split_cores(0)


def test_floor_is_the_hosts_cpu_on_their_cores_or_the_critical_path():
    assert scale.floor_s(hosts_cpu_s=19.2, host_cores=1, critical_path_s=0.5) == 19.2
    assert scale.floor_s(hosts_cpu_s=19.2, host_cores=2, critical_path_s=0.5) == 9.6
    assert scale.floor_s(hosts_cpu_s=0.3, host_cores=1, critical_path_s=0.5) == 0.5
    with pytest.raises(ValueError):
        scale.floor_s(1.0, 0, 1.0)


def test_per_host_figures_and_the_projection():
    rows = {1: {"control_cpu_s": 0.03, "rss_peak_mb": 45.0, "rss_base_mb": 44.0},
            64: {"control_cpu_s": 0.96, "rss_peak_mb": 108.0, "rss_base_mb": 44.0}}
    figs = scale.per_host(rows)
    assert figs["control_cpu_ms_per_host"] == pytest.approx(15.0)
    assert figs["control_cpu_ms_per_extra_host"] == pytest.approx(930 / 63)
    assert figs["rss_growth_mb_per_host"] == pytest.approx(1.0)
    assert figs["rss_peak_mb_per_extra_host"] == pytest.approx(1.0)
    proj = scale.projection(dict(figs, rss_base_mb=44.0), 1000, host_cpu_s=0.3)
    assert proj["control_cpu_s"] == pytest.approx(15.0)
    assert proj["rss_mb"] == pytest.approx(1044.0)
    assert proj["fds"] == 1020 and proj["hosts_cpu_s"] == pytest.approx(300.0)


def test_the_new_benchmarks_can_be_selected():
    assert parse_selection("scale,rivals") == ["rivals", "scale"]
    assert {"scale", "rivals"} <= set(parse_selection(""))


def _report() -> dict:
    rep = Report(machine={"commit": "abc123", "nproc": 2, "time": "2026-12-03T01:00:00Z"})
    sec = Section("scale", "2. bigger fleet")
    rows = {n: [{"wall_s": w * k} for k in (0.9, 1.0, 1.2)]
            for n, w in ((1, 0.5), (8, 2.5), (64, 20.0))}
    med = {n: {"wall_s": w, "floor_s": f, "control_cpu_s": c}
           for n, w, f, c in ((1, 0.5, 0.5, 0.02), (8, 2.5, 2.3, 0.1), (64, 20.0, 18.0, 0.9))}
    sec.details["scale"] = {"rows": {str(n): r for n, r in rows.items()},
                            "medians": {str(n): m for n, m in med.items()}, "host_cores": 1}
    rivals = Section("rivals", "1. rivals")
    for name, values in (("pyinfra 3", [6.0, 5.0, 7.0]), ("fleet", [1.0, 1.2, 0.9])):
        for v in values:
            rivals.add(name, v)
    rep.sections += [sec, rivals]
    return rep.as_dict()


def test_plot_data_comes_from_the_report_json():
    series = plot.scaling_series(_report())
    assert series["hosts"] == [1, 8, 64]
    assert series["wall_s"] == [0.5, 2.5, 20.0]
    assert series["floor_s"] == [0.5, 2.3, 18.0]
    assert series["min_s"][2] == pytest.approx(18.0) and series["max_s"][2] == pytest.approx(24.0)
    assert series["control_cpu_ms"] == pytest.approx([20.0, 100.0, 900.0])
    assert plot.rival_bars(_report()) == [("fleet", 1.0, 0.9, 1.2), ("pyinfra 3", 6.0, 5.0, 7.0)]
    assert plot.scaling_series({"benchmarks": {}}) is None
    assert plot.rival_bars({"benchmarks": {}}) is None
    assert "abc123" in plot.caption(_report())


def test_pyinfra_inventory_keeps_strict_host_keys(tmp_path: Path):
    hosts = [Host(name="pi", host="127.0.0.1", port=2222, user="administrator")]
    text = inventory_text(hosts, tmp_path / "key", tmp_path / "known_hosts")
    scope: dict = {}
    exec(compile(text, "inventory.py", "exec"), scope)  # what pyinfra does with the file
    name, data = scope["hosts"][0]
    assert name == "pi"
    assert data["ssh_port"] == 2222 and data["ssh_user"] == "administrator"
    assert data["ssh_strict_host_key_checking"] == "yes"
    assert data["ssh_known_hosts_file"] == str(tmp_path / "known_hosts")


def test_bench_extra_in_pyproject_is_what_the_bench_venv_installs():
    root = Path(__file__).resolve().parents[3]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert tuple(project["optional-dependencies"]["bench"]) == tools.BENCH_EXTRA
    names = {d.split(">")[0].split("<")[0].split("=")[0].strip() for d in project["dependencies"]}
    assert not names & {"ansible-core", "pyinfra", "matplotlib"}


def test_reports_of_several_runs_merge_for_the_plots():
    first = {"machine": {"commit": "a"}, "benchmarks": {"scale": {"x": 1}}}
    second = {"machine": {"commit": "b"}, "benchmarks": {"rivals": {"y": 2}}}
    both = plot.merged([first, second])
    assert both["machine"] == {"commit": "a"}
    assert set(both["benchmarks"]) == {"scale", "rivals"}
    assert "commit b" in plot.caption(both, "rivals")  # each figure names its own run
    assert "commit a" in plot.caption(both, "scale")
    with pytest.raises(ValueError):
        plot.merged([])


def test_share_left_by_other_work_and_the_loaded_floor():
    quiet = {"wall_s": 2.0, "meter_wall_s": 2.0, "hosts_cpu_s": 1.0, "control_cpu_s": 0.1,
             "docker_cpu_s": 0.0, "machine_busy_s": 1.1}
    busy = dict(quiet, machine_busy_s=3.1)  # others took 2 CPU-s of 2 cores x 2 s
    assert scale.share_left(quiet, cores=2, host_cores=1) == 1.0
    assert scale.share_left(busy, cores=2, host_cores=1) == pytest.approx(0.5)
    assert scale.share_left(dict(quiet, machine_busy_s=99), 2, 1) == 0.05
    rows = {1: [dict(quiet, wall_s=0.5)], 8: [busy]}
    floors = scale.loaded_floor(rows, cores=2, host_cores=1)
    assert floors[1] == 1.0  # hosts' 1 CPU-s on a whole core beats the 0.5 s critical path
    assert floors[8] == pytest.approx(2.0)  # the same CPU on half a core


def test_ctlcost_is_opt_in_and_its_base_must_be_a_fleet_checkout(tmp_path):
    from lab.bench.ctlcost import per_host, revisions

    assert "ctlcost" not in parse_selection("all")  # 64 hosts and two revisions: when named
    assert parse_selection("ctlcost") == ["ctlcost"]
    assert list(revisions(tmp_path)) == ["this"]
    with pytest.raises(ValueError, match="--baseline .*not a fleet checkout"):
        revisions(tmp_path, str(tmp_path))
    (tmp_path / "lab" / "bench").mkdir(parents=True)
    (tmp_path / "lab" / "bench" / "scale.py").write_text("")
    assert revisions(tmp_path, str(tmp_path))["base"] == tmp_path.resolve()
    row = {"control_cpu_s": 0.64, "rss_base_mb": 50.0, "rss_peak_mb": 82.0, "wall_s": 9.0}
    assert per_host(row, 64) == {"cpu_ms": 10.0, "rss_mb": 0.5, "rss_peak_mb": 82.0,
                                 "wall_s": 9.0}


def _row(wall, hosts_cpu, control_cpu, peak, threads=10, fds=10):
    return {"wall_s": wall, "hosts_cpu_s": hosts_cpu, "control_cpu_s": control_cpu,
            "rss_base_mb": 50.0, "rss_peak_mb": peak, "threads_peak": threads,
            "fds_peak": fds, "threads_base": 2, "fds_base": 5, "steps": {"install": 1.0},
            "machine_busy_s": None, "docker_cpu_s": 0.0}


def test_thousand_figures_hold_a_deploy_to_its_floor_and_report_per_host_costs():
    from lab.bench import thousand

    sec = Section("thousand", "t")
    rows = {1: [_row(0.5, 0.2, 0.02, 51)],
            64: [_row(16.0, 15.0, 0.64, 70)],
            1000: [_row(300.0, 240.0, 12.0, 150, threads=1200, fds=1030)]}
    thousand._figures(sec, rows, [1, 64, 1000], host_cores=1)
    goals = {g.name: g for g in sec.goals}
    # the floor of 1,000 hosts is their CPU on the one host core: 300 s against 240 s
    assert goals["T(1000) / floor"].value == pytest.approx(1.25) and goals["T(1000) / floor"].met
    assert goals["control CPU per host at 1000"].value == pytest.approx(12.0)
    assert goals["peak RSS per host at 1000"].value == pytest.approx(0.1)
    assert sec.figures["control CPU per extra host, 64 -> 1000"] == pytest.approx(
        1000 * (12.0 - 0.64) / 936, abs=0.01)
    assert "peak threads 1200, fds 1030" in sec.figures["1000 hosts"]


def test_thousand_compares_the_largest_fleet_at_the_smaller_ones_pace():
    """1,000 hosts deployed 64 at a time against 64 hosts: the ratio of their control CPU per
    host is what the fleet's size alone adds."""
    from lab.bench import thousand

    sec = Section("thousand", "t")
    small = [_row(16.0, 15.0, 0.64, 70), _row(17.0, 15.0, 0.70, 70)]
    paced = [_row(250.0, 240.0, 11.0, 150), _row(260.0, 240.0, 12.0, 150),
             _row(255.0, 240.0, 30.0, 150)]
    thousand.same_pace(sec, small, paced, 64, 1000)
    # medians: 12.0 ms per host at 1,000 against (0.64 + 0.70) / 2 / 64 = 10.47 ms at 64
    assert sec.figures["control CPU per host, 1000 / 64 hosts, 64 in flight each"] == \
        pytest.approx(12.0 / (1000 * 0.67 / 64), abs=0.01)
    assert "control CPU 12.0 ms/host" in sec.figures["1000 hosts, 64 in flight"]


def test_the_canary_takes_the_median_of_the_rounds_in_a_window(tmp_path):
    from lab.bench.canary import Canary, workload

    assert workload() > 0
    canary = Canary([0], tmp_path / "canary.txt")
    canary.path.write_text("100.0 5.0\n101.0 7.0\n102.0 9.0\n103.0 50.0\n104.5 1")
    assert canary.median_ms(100.5, 103.5) == pytest.approx(9.0)  # 7, 9, 50
    assert canary.median_ms(200, 300) is None

    with Canary([0], tmp_path / "live.txt") as live:  # a real one writes a round at its start
        deadline = time.monotonic() + 60
        while live.median_ms(0, 1e12) is None and time.monotonic() < deadline:
            time.sleep(0.1)
    assert live.median_ms(0, 1e12) > 0


def test_thousand_is_opt_in():
    assert "thousand" not in parse_selection("")
    assert parse_selection("thousand") == ["thousand"]


def test_thousand_against_a_baseline_gives_the_ratio_of_control_cpu_per_host():
    from lab.bench import thousand

    sec = Section("thousand", "t")
    this = {64: [_row(16.0, 15.0, 0.48, 70)], 1000: [_row(300.0, 240.0, 8.0, 150)]}
    base = {64: [_row(16.0, 15.0, 0.64, 80)], 1000: [_row(300.0, 240.0, 10.0, 190)]}
    thousand.against_base(sec, this, base, [64, 1000])
    assert sec.figures["64 hosts, base"].startswith("control CPU 10.0 ms/host, RSS 0.47 MB/host; "
                                                    "this / base 0.75")
    assert "this / base 0.80" in sec.figures["1000 hosts, base"]


def test_thousand_per_host_figures_name_the_collections_made_when_the_probe_counted_them():
    from lab.bench import thousand

    row = dict(_row(16.0, 15.0, 0.64, 70), user_s=0.5, sys_s=0.1, packets_received=1984,
               packets_sent=896, collections=[70, 7, 2], collections_cpu_s=[0.01, 0.01, 0.2])
    text = thousand.per_host([row], 64)
    assert "garbage collections by generation 70/7/2" in text
    assert "(of it full ones 3.12 ms)" in text
    old = {k: v for k, v in row.items() if not k.startswith("collections")}
    assert "garbage" not in thousand.per_host([old], 64)  # a baseline without the count


def test_collected_counts_each_generation_a_block_collected():
    import gc

    from lab.bench.gcwatch import Collected

    with Collected() as seen:
        gc.collect(0)
        gc.collect(2)
    assert seen.count[0] >= 1 and seen.count[2] >= 1
    assert all(t >= 0 for t in seen.cpu_s)


def test_a_baseline_revision_deploys_an_artifact_built_from_its_own_tree(tmp_path):
    from fleet.deploy import api
    from lab.bench.ctlcost import revision_variants

    root = Path(__file__).resolve().parents[3]
    base = api.build_artifact(root, tmp_path / "dist")
    variants = revision_variants({"this": root, "base": root}, base, tmp_path, "t")
    assert variants["this"].base is base
    built = variants["base"].base
    assert built is not base and built.path.parent == tmp_path / "dist-base"
    assert variants["base"].next().path.parent == tmp_path / "variants-t-base"


def test_liveview_is_opt_in_and_reports_the_displays_cpu_per_host():
    from lab.bench import liveview

    assert "liveview" not in parse_selection("all")
    assert parse_selection("liveview") == ["liveview"]
    root = Path(__file__).resolve().parents[3]
    sec = liveview.bench({"this": root}, reps=1, sizes=(2, 4), log=lambda *_: None)
    assert sec.figures["this: CPU per host"].endswith(" ms at 4")
    assert sec.summary("this 4")["median"] > 0
    assert [g.name for g in sec.goals] == ["CPU per host, 4 / 2 hosts"]
