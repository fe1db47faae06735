"""The live display's CPU per host on a terminal, at 64 and 1,000 hosts.

`invoke deploy` on a terminal shows each host's step live (fleet.deploy.report.LiveReport): a
deploy sends it about a dozen updates per host (connect, lease, upload, each installer step,
the result). The deploy benchmarks run without a terminal, so they never paid for it; an
operator does. This replays a deploy's updates at a fixed pace (a host starts every PACE_S,
its updates spread over SPAN_S, so ~40 hosts are in progress at once; one host in 16 fails) to
a LiveReport on a terminal of 100 x 50 that writes to memory, in a fresh process per run (this
checkout, and with `--baseline DIR` that one too, alternated), and measures the process's CPU,
the display's refresh thread included. At one pace, a display whose cost does not grow with the
fleet costs the same per host at both sizes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

SIZES = (64, 1000)
PACE_S = 0.05
SPAN_S = 2.0
STEPS = ("connect", "lease", "upload", "install: lock", "install: verify", "install: unpack",
         "install: switch", "install: restart", "install: ready", "install: selftest",
         "install: audit")
TERMINAL = (100, 50)  # columns, rows


def replay(count: int) -> dict:
    """One replay to `count` hosts in this process (fleet imported from sys.path)."""
    import io  # noqa: PLC0415

    from rich.console import Console  # noqa: PLC0415

    from fleet.deploy.report import LiveReport  # noqa: PLC0415

    hosts = [f"host-{i:04d}" for i in range(count)]
    events = []
    for i, host in enumerate(hosts):
        start = i * PACE_S
        for k, step in enumerate(STEPS):
            events.append((start + k * SPAN_S / len(STEPS), host, step))
        events.append((start + SPAN_S, host, "failed" if i % 16 == 15 else "installed"))
    events.sort()
    report = LiveReport(hosts, f"deploy to {count} hosts")
    report.console = Console(file=io.StringIO(), force_terminal=True, width=TERMINAL[0],
                             height=TERMINAL[1])  # set after: the code before takes no console
    cpu0, t0 = time.process_time(), time.monotonic()
    with report:
        for at, host, step in events:
            wait = t0 + at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            report.update(host, step, "unreachable" if step == "failed" else "")
    return {"cpu_s": time.process_time() - cpu0, "wall_s": time.monotonic() - t0,
            "paced_s": events[-1][0], "updates": len(events)}


def _run(root: Path, count: int) -> dict:
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(root), str(count)],
                         capture_output=True, text=True, timeout=1800, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench(revs: dict[str, Path], reps: int, sizes=SIZES, log=print):
    """Each checkout's replays at each size, alternated; the result as a Section."""
    from lab.bench.report import Section  # noqa: PLC0415  (not in a replay's process)
    from lab.bench.stats import alternation  # noqa: PLC0415

    sec = Section("liveview", f"the live display's CPU per host on a terminal "
                              f"({', '.join(revs)}), {', '.join(map(str, sizes))} hosts")
    sec.details["revisions"] = {k: str(v) for k, v in revs.items()}
    for rep, rev in alternation(list(revs), reps):
        for n in sizes:
            row = _run(revs[rev], n)
            ms = 1000 * row["cpu_s"] / n
            sec.add(f"{rev} {n}", ms / 1000)
            sec.details.setdefault("rows", []).append(dict(row, rev=rev, hosts=n, rep=rep))
            log(f"  liveview rep {rep + 1} {rev}: {n} hosts, {ms:.2f} ms/host of CPU, "
                f"{row['wall_s']:.1f} s for {row['paced_s']:.1f} s of updates")
    for rev in revs:
        per = {n: sec.summary(f"{rev} {n}")["median"] * 1000 for n in sizes}
        sec.figures[f"{rev}: CPU per host"] = ", ".join(
            f"{per[n]:.2f} ms at {n}" for n in sizes)
        if rev == "this":
            big, small = sizes[-1], sizes[0]
            sec.goal(f"CPU per host, {big} / {small} hosts", per[big] / per[small], 1.25,
                     "ratio")
    if "base" in revs:
        for n in sizes:
            r = sec.ratio(f"this {n}", f"base {n}")
            sec.figures[f"{n} hosts, this / base"] = (
                f"{r['median']:.3f} (pairs {r['min']:.3f}-{r['max']:.3f})")
    sec.notes.append(f"a host every {PACE_S} s, {len(STEPS) + 1} updates over {SPAN_S} s each; "
                     f"terminal {TERMINAL[0]} x {TERMINAL[1]}, written to memory")
    return sec


if __name__ == "__main__":  # python liveview.py <checkout> <hosts>: one replay, as JSON
    sys.path[0] = sys.argv[1]  # that checkout's fleet, not this directory's modules
    print(json.dumps(replay(int(sys.argv[2]))))
