"""Benchmark results: per benchmark its samples, summaries, ratios and goals; printed and JSON.

A `Report` collects `Section`s. Each section keeps raw samples per contender (seconds), derived
figures, and goals (`value <= target`), so the JSON holds everything needed to recompute a figure.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fleet.continuity.atomicfile import atomic_write
from lab.bench import stats


@dataclass
class Goal:
    name: str
    value: float | None
    target: float
    unit: str = ""

    @property
    def met(self) -> bool | None:
        return None if self.value is None else self.value <= self.target

    def as_dict(self) -> dict:
        return {"name": self.name, "value": self.value, "target": self.target,
                "unit": self.unit, "met": self.met}

    def line(self) -> str:
        verdict = {True: "MET", False: "MISSED", None: "NOT MEASURED"}[self.met]
        value = "-" if self.value is None else _fmt(self.value, self.unit)
        return f"goal {self.name}: {value} <= {_fmt(self.target, self.unit)}: {verdict}"


def _fmt(value: float, unit: str) -> str:
    if unit == "s":
        return stats.fmt_seconds(value)
    if unit == "ratio":
        return f"{value:.2f}"
    return f"{value:g}{(' ' + unit) if unit else ''}"


@dataclass
class Section:
    """One benchmark's figures."""

    name: str
    title: str
    samples: dict[str, list[float]] = field(default_factory=dict)
    figures: dict[str, object] = field(default_factory=dict)
    goals: list[Goal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    details: dict[str, object] = field(default_factory=dict)  # JSON only

    def add(self, contender: str, seconds: float) -> None:
        self.samples.setdefault(contender, []).append(float(seconds))

    def summary(self, contender: str) -> dict:
        return stats.summary(self.samples.get(contender, []))

    def ratio(self, a: str, b: str) -> dict:
        return stats.ratio(self.samples.get(a, []), self.samples.get(b, []))

    def goal(self, name: str, value: float | None, target: float, unit: str = "") -> Goal:
        g = Goal(name, value, target, unit)
        self.goals.append(g)
        return g

    def as_dict(self) -> dict:
        return {"name": self.name, "title": self.title,
                "summaries": {k: stats.summary(v) for k, v in self.samples.items()},
                "samples": self.samples, "figures": self.figures,
                "goals": [g.as_dict() for g in self.goals], "notes": self.notes,
                "error": self.error, "details": self.details}

    def text(self) -> str:
        lines = [f"== {self.title}"]
        for name, values in self.samples.items():
            lines.append(f"  {name:<28} {stats.fmt_summary(stats.summary(values))}")
        for key, value in self.figures.items():
            if isinstance(value, dict) and "median" in value and "n" not in value:
                value = stats.fmt_ratio(value)
            lines.append(f"  {key:<28} {value}")
        lines += [f"  {g.line()}" for g in self.goals]
        lines += [f"  note: {n}" for n in self.notes]
        if self.error:
            lines.append(f"  ERROR: {self.error}")
        return "\n".join(lines)


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_info(root: Path | None = None) -> dict:
    """What the figures were measured on: CPUs, memory, kernel, Python, Docker, commit."""
    mem_kb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    cwd = str(root) if root else None
    commit = _run(["git", "-C", cwd or ".", "rev-parse", "--short=12", "HEAD"])
    dirty = bool(_run(["git", "-C", cwd or ".", "status", "--porcelain", "--untracked-files=no"]))
    return {"nproc": os.cpu_count(), "memory_gib": round(mem_kb / 1048576, 1) if mem_kb else None,
            "kernel": platform.release(), "python": sys.version.split()[0],
            "docker": _run(["docker", "version", "--format", "{{.Server.Version}}"]) or None,
            "commit": commit or None, "dirty_tree": dirty,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


@dataclass
class Report:
    machine: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    sections: list[Section] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"machine": self.machine, "options": self.options,
                "benchmarks": {s.name: s.as_dict() for s in self.sections},
                "goals": [dict(g.as_dict(), benchmark=s.name)
                          for s in self.sections for g in s.goals]}

    def write_json(self, path: str | Path) -> None:
        atomic_write(path, json.dumps(self.as_dict(), indent=2, sort_keys=False) + "\n")

    def header(self) -> str:
        m = self.machine
        return (f"machine: {m.get('nproc')} CPUs, {m.get('memory_gib')} GiB, kernel "
                f"{m.get('kernel')}, Python {m.get('python')}, Docker {m.get('docker')}; "
                f"commit {m.get('commit')}{' (dirty tree)' if m.get('dirty_tree') else ''}")

    def goals_text(self) -> str:
        lines = ["== goals"]
        for s in self.sections:
            lines += [f"  [{s.name}] {g.line()}" for g in s.goals]
        return "\n".join(lines)
