"""Small statistics for benchmarks: summaries, percentiles, ratios, and the alternation order.

Pure functions (no I/O) so they are unit-tested without Docker.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(samples: Sequence[float], pct: float) -> float:
    """Linear-interpolated percentile (pct in 0..100) of a non-empty sequence."""
    if not samples:
        raise ValueError("percentile of no samples")
    if not 0 <= pct <= 100:
        raise ValueError(f"percentile {pct}: use 0..100")
    data = sorted(samples)
    if len(data) == 1:
        return float(data[0])
    pos = (len(data) - 1) * pct / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return float(data[lo])
    return float(data[lo] + (data[hi] - data[lo]) * (pos - lo))


def summary(samples: Sequence[float]) -> dict:
    """n, median, min, max (and p99 when there are enough samples to mean something)."""
    if not samples:
        return {"n": 0, "median": None, "min": None, "max": None}
    out = {"n": len(samples), "median": float(statistics.median(samples)),
           "min": float(min(samples)), "max": float(max(samples))}
    if len(samples) >= 20:
        out["p99"] = percentile(samples, 99)
    return out


def ratio(numerator: Sequence[float], denominator: Sequence[float]) -> dict:
    """Ratio of medians, with the range of per-repetition ratios when paired samples exist.

    Repetitions alternate contenders, so sample i of each was taken side by side: the pairwise
    ratios show how stable the comparison is under the machine's noise.
    """
    if not numerator or not denominator:
        return {"median": None, "min": None, "max": None}
    med = statistics.median(numerator) / statistics.median(denominator)
    pairs = [a / b for a, b in zip(numerator, denominator) if b]
    return {"median": float(med), "min": float(min(pairs)) if pairs else None,
            "max": float(max(pairs)) if pairs else None}


def alternation(names: Sequence[str], reps: int) -> list[tuple[int, str]]:
    """(repetition, contender) in run order: every repetition runs each contender once, and the
    starting contender rotates so none always runs first (warm caches, a quieter machine)."""
    if reps < 1:
        raise ValueError(f"reps {reps}: use 1 or more")
    order = []
    k = len(names)
    for rep in range(reps):
        shift = rep % k if k else 0
        for name in list(names[shift:]) + list(names[:shift]):
            order.append((rep, name))
    return order


def fmt_seconds(value: float | None) -> str:
    """Seconds for people: ms below one second, s with two decimals above."""
    if value is None:
        return "-"
    if value < 1.0:
        return f"{value * 1000:.1f} ms"
    return f"{value:.2f} s"


def fmt_summary(s: dict) -> str:
    """`median (min-max, n=N)` with units."""
    if not s.get("n"):
        return "no samples"
    text = (f"{fmt_seconds(s['median'])} ({fmt_seconds(s['min'])} - {fmt_seconds(s['max'])}, "
            f"n={s['n']})")
    if "p99" in s:
        text += f", p99 {fmt_seconds(s['p99'])}"
    return text


def fmt_ratio(r: dict) -> str:
    if r.get("median") is None:
        return "-"
    if r.get("min") is None:
        return f"{r['median']:.2f}"
    return f"{r['median']:.2f} ({r['min']:.2f} - {r['max']:.2f})"
