"""Figures of a benchmark report (its JSON): the scaling curve and the rivals side by side.

`invoke bench --plot` draws them into docs/img/ after a run; `python -m lab.bench.plot
REPORT.json [REPORT.json ...] [OUT_DIR]` redraws them from saved reports (the benchmarks of
several runs, e.g. `--only scale` and `--only rivals`, merged; the first one's machine).
matplotlib is part of the optional `bench` extra (lab.bench.tools): when the running Python
lacks it, the bench venv's draws.
The data extraction is pure (`scaling_series`, `rival_bars`) and unit-tested.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCALING_PNG, RIVALS_PNG = "bench-scaling.png", "bench-rivals.png"


def scaling_series(report: dict) -> dict | None:
    """{"hosts": [...], "wall_s": [...], "min_s", "max_s", "floor_s": [...], "control_cpu_ms":
    [...]} from the `scale` benchmark, or None when the report has none."""
    scale = (report.get("benchmarks") or {}).get("scale") or {}
    data = (scale.get("details") or {}).get("scale")
    if not data:
        return None
    sizes = sorted(int(n) for n in data["medians"])
    rows = data["rows"]
    med = data["medians"]
    return {"hosts": sizes,
            "wall_s": [med[str(n)]["wall_s"] for n in sizes],
            "min_s": [min(r["wall_s"] for r in rows[str(n)]) for n in sizes],
            "max_s": [max(r["wall_s"] for r in rows[str(n)]) for n in sizes],
            "floor_s": [med[str(n)]["floor_s"] for n in sizes],
            "floor_left_s": [med[str(n)].get("floor_left_s") for n in sizes],
            "control_cpu_ms": [1000 * med[str(n)]["control_cpu_s"] for n in sizes],
            "host_cores": data.get("host_cores")}


def rival_bars(report: dict) -> list[tuple[str, float, float, float]] | None:
    """[(contender, median, min, max)] from the `rivals` benchmark, fastest first."""
    rivals = (report.get("benchmarks") or {}).get("rivals") or {}
    summaries = rivals.get("summaries") or {}
    bars = [(name, s["median"], s["min"], s["max"]) for name, s in summaries.items()
            if s.get("n")]
    return sorted(bars, key=lambda b: b[1]) or None


def caption(report: dict, benchmark: str | None = None) -> str:
    """Commit, time and machine of the run that measured `benchmark` (of the report if none)."""
    bench = (report.get("benchmarks") or {}).get(benchmark or "") or {}
    m = bench.get("machine") or report.get("machine") or {}
    dirty = " (dirty tree)" if m.get("dirty_tree") else ""
    return (f"commit {m.get('commit')}{dirty}, {m.get('time')}; {m.get('nproc')} CPUs, "
            f"{m.get('memory_gib')} GiB, Linux {m.get('kernel')}, Python {m.get('python')}")


def draw(report: dict, out_dir: Path) -> list[Path]:
    """Write the figures this report has data for; returns their paths."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    series = scaling_series(report)
    if series:
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
        hosts = series["hosts"]
        low = [w - lo for w, lo in zip(series["wall_s"], series["min_s"])]
        high = [hi - w for w, hi in zip(series["wall_s"], series["max_s"])]
        ax.errorbar(hosts, series["wall_s"], yerr=[low, high], marker="o", capsize=3,
                    label="fleet deploy, wall time (median, min-max)")
        ax.plot(hosts, series["floor_s"], linestyle="--", marker="s",
                label=f"floor: max(hosts' CPU / {series['host_cores']} core, T(1))")
        if all(v is not None for v in series["floor_left_s"]):
            ax.plot(hosts, series["floor_left_s"], linestyle=":", marker="^",
                    label="floor on the CPU other work left the hosts")
        for n, w, f in zip(hosts, series["wall_s"], series["floor_s"]):
            ax.annotate(f"{w / f:.2f}x", (n, w), textcoords="offset points", xytext=(4, 6),
                        fontsize=8)
        ax.set_xlabel("hosts")
        ax.set_ylabel("seconds")
        ax.set_xticks(hosts)
        ax.set_title("Full deploy to N hosts vs the floor", fontsize=11)
        ax.legend(fontsize=8, loc="upper left")
        ax.grid(alpha=0.3)
        written.append(_save(plt, fig, caption(report, "scale"), out_dir / SCALING_PNG))
    bars = rival_bars(report)
    if bars:
        fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
        names = [b[0] for b in bars]
        med = [b[1] for b in bars]
        err = [[b[1] - b[2] for b in bars], [b[3] - b[1] for b in bars]]
        ax.barh(names, med, xerr=err, capsize=3,
                color=["tab:green" if n == "fleet" else "tab:gray" for n in names])
        for i, value in enumerate(med):
            ax.annotate(f"{value:.2f} s", (value, i), textcoords="offset points", xytext=(6, -3),
                        fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("seconds, full deploy (median, min-max)")
        ax.set_title("Same deploy, same hosts, interleaved", fontsize=11)
        ax.grid(axis="x", alpha=0.3)
        written.append(_save(plt, fig, caption(report, "rivals"), out_dir / RIVALS_PNG))
    return written


def _save(plt, fig, text: str, path: Path) -> Path:
    """The figure with the commit and machine in small print at the bottom."""
    fig.text(0.01, 0.01, text, fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path)
    plt.close(fig)
    return path


def plot(report_json: Path, out_dir: Path, log=print) -> list[Path]:
    """Draw here if matplotlib is importable, else with the bench venv's Python."""
    try:
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        from lab.bench import tools  # noqa: PLC0415

        root = Path(__file__).resolve().parents[2]
        env = dict(os.environ, PYTHONPATH=str(root))
        proc = subprocess.run([str(tools.python(log=log)), "-m", "lab.bench.plot",
                               str(report_json), str(out_dir)], capture_output=True, text=True,
                              timeout=300, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"plotting failed: {proc.stderr.strip()[-600:]}") from None
        return [Path(line) for line in proc.stdout.split()]
    return draw(json.loads(Path(report_json).read_text()), out_dir)


def merged(reports: list[dict]) -> dict:
    """One report holding every benchmark of `reports` (a later run's wins); the first
    report's machine and options."""
    if not reports:
        raise ValueError("no report to plot")
    out = dict(reports[0], benchmarks={})
    for rep in reports:
        for name, bench in (rep.get("benchmarks") or {}).items():
            out["benchmarks"][name] = dict(bench, machine=rep.get("machine") or {})
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: python -m lab.bench.plot REPORT.json [REPORT.json ...] [OUT_DIR]")
    out = Path(args.pop()) if len(args) > 1 and not args[-1].endswith(".json") else None
    reports = [json.loads(Path(a).read_text()) for a in args]
    for written in draw(merged(reports), out or Path("docs") / "img"):
        print(written)
