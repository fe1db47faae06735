"""The benchmarks' pure parts: statistics, alternation, goals, report JSON, selection, variants."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from lab.bench import stats
from lab.bench.report import Report, Section
from lab.bench.restartgap import Sample, analyse
from lab.bench.run import BENCHMARKS, parse_selection


def test_percentile_interpolates_and_checks_bounds():
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([5], 99) == 5
    assert stats.percentile(list(range(101)), 99) == 99
    with pytest.raises(ValueError):
        stats.percentile([], 50)
    with pytest.raises(ValueError):
        stats.percentile([1], 101)


def test_summary_median_range_and_p99_only_with_enough_samples():
    s = stats.summary([3.0, 1.0, 2.0])
    assert (s["n"], s["median"], s["min"], s["max"]) == (3, 2.0, 1.0, 3.0)
    assert "p99" not in s
    assert "p99" in stats.summary([float(i) for i in range(20)])
    assert stats.summary([])["median"] is None


def test_ratio_of_medians_with_pairwise_range():
    r = stats.ratio([2.0, 4.0, 3.0], [1.0, 2.0, 2.0])
    assert r["median"] == pytest.approx(3.0 / 2.0)
    assert r["min"] == pytest.approx(1.5) and r["max"] == pytest.approx(2.0)
    assert stats.ratio([], [1.0])["median"] is None


def test_alternation_runs_each_contender_once_per_rep_and_rotates_the_first():
    order = stats.alternation(["a", "b", "c"], 3)
    assert len(order) == 9
    for rep in range(3):
        assert sorted(n for r, n in order if r == rep) == ["a", "b", "c"]
    firsts = [order[i * 3][1] for i in range(3)]
    assert firsts == ["a", "b", "c"]
    with pytest.raises(ValueError):
        stats.alternation(["a"], 0)


def test_formatting():
    assert stats.fmt_seconds(0.0123) == "12.3 ms"
    assert stats.fmt_seconds(2.5) == "2.50 s"
    assert stats.fmt_seconds(None) == "-"
    assert "n=2" in stats.fmt_summary(stats.summary([1.0, 2.0]))
    assert stats.fmt_ratio({"median": 0.5, "min": 0.4, "max": 0.6}) == "0.50 (0.40 - 0.60)"


def test_goals_and_report_json(tmp_path: Path):
    sec = Section("x", "X bench")
    sec.add("fleet", 1.0)
    sec.add("fleet", 3.0)
    sec.add("other", 4.0)
    met = sec.goal("fleet/other", sec.ratio("fleet", "other")["median"], 0.33, "ratio")
    missed = sec.goal("time", 2.0, 1.0, "s")
    unknown = sec.goal("absent", None, 1.0)
    assert (met.met, missed.met, unknown.met) == (False, False, None)
    assert "MISSED" in missed.line() and "NOT MEASURED" in unknown.line()
    rep = Report(machine={"nproc": 2}, options={"reps": 2}, sections=[sec])
    out = tmp_path / "sub" / "r.json"
    rep.write_json(out)
    data = json.loads(out.read_text())
    assert data["benchmarks"]["x"]["summaries"]["fleet"]["median"] == 2.0
    assert data["benchmarks"]["x"]["samples"]["other"] == [4.0]
    assert [g["met"] for g in data["goals"]] == [False, False, None]
    assert "X bench" in sec.text()


def test_parse_selection():
    assert parse_selection("") == list(BENCHMARKS)
    assert parse_selection("all") == list(BENCHMARKS)
    assert parse_selection("hooks, scaling") == ["scaling", "hooks"]
    assert "openclaw" not in parse_selection("all")  # needs the OpenClaw toolchain: opt-in
    assert parse_selection("openclaw,hooks") == ["hooks", "openclaw"]
    with pytest.raises(ValueError, match="nope"):
        parse_selection("nope")


def test_restart_gap_analysis():
    samples = [Sample(0.00, 0.01, True, 1), Sample(0.02, 0.03, False, None, "x"),
               Sample(0.04, 0.05, False, None, "x"), Sample(0.06, 0.30, True, 2)]
    a = analyse(samples)
    assert a["failed"] == 2
    assert a["window_s"] == pytest.approx(0.03)
    assert a["longest_request_s"] == pytest.approx(0.24)
    assert a["longest_without_success_s"] == pytest.approx(0.29)
    assert a["pids"] == [1, 2]
    assert analyse([Sample(0, 1, True, 1)])["window_s"] == 0.0


def test_artifact_variant_has_a_new_sha_and_a_complete_manifest(tmp_path: Path):
    from fleet.deploy.api import load_artifact
    from lab.bench.artifacts import NONCE_NAME, plugin_files, variant

    base_path = tmp_path / "fleet-1.0.0.pyz"
    manifest = {"version": "1.0.0", "components": {"memory-continuity": "1.0.0"},
                "files": {}}
    with open(base_path, "wb") as fh:
        fh.write(b"#!/usr/bin/env python3\n")
        with zipfile.ZipFile(fh, "w") as zf:
            zf.writestr("__main__.py", "print('hi')\n")
            zf.writestr("fleet/plugins/mc/openclaw.plugin.json", '{"id": "mc"}')
            zf.writestr("fleet/plugins/mc/plugin.py", "x = 1\n")
            zf.writestr("fleet_manifest.json", json.dumps(manifest))
    base = load_artifact(base_path)
    one = variant(base, "a", tmp_path / "out")
    again = variant(base, "a", tmp_path / "out2")
    other = variant(base, "b", tmp_path / "out")
    assert one.sha256 != base.sha256 and one.sha256 != other.sha256
    assert one.sha256 == again.sha256  # deterministic
    assert one.path.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(one.path) as zf:
        embedded = json.loads(zf.read("fleet_manifest.json"))
        assert NONCE_NAME in zf.namelist() and NONCE_NAME in embedded["files"]
    files = plugin_files(one, tmp_path / "plugins")
    assert sorted(p.name for p in files["mc"]) == ["openclaw.plugin.json", "plugin.py"]
