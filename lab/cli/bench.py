"""`invoke bench`: fleet against the hand-made deploy loop and ansible-core, side by side.

Thin: parse flags, call lab.bench.run, print, optionally write JSON. Current results are in
docs/benchmarks.md, the dated history of every run and where the time went in docs/bench/log.md.
"""

from __future__ import annotations

from invoke import Exit

from fleet.cli.flags import number, task

BENCH_HELP = ("comma-separated benchmarks (default all): scaling, manual, ansible, noop, "
              "restartgap, hooks, harness, rtt, rivals, scale, hookscale, failfast, hung, "
              "busyhook, hostcost; openclaw, ocgateway, ctlcost (control CPU/RSS per host, "
              "against the --baseline checkout), thousand (also against --baseline) and "
              "transport (the SSH transport against OpenSSH and asyncssh; --count 64 adds 64 "
              "hosts to 16), hostpace (control CPU per host against the hosts' pace) and liveview "
              "(the live display's CPU per host on a terminal, against --baseline) only when "
              "named")


@task(help={"only": BENCH_HELP,
            "count": "harness hosts for the deploy benchmarks (default 8, the most for 2 cores)",
            "reps": "repetitions per contender (default 3)",
            "json": "write every sample, summary, ratio and goal to this JSON file",
            "plot": "draw the scaling curve and the rivals into docs/img/ (bench extra)",
            "baseline": "hostcost, ctlcost, thousand: another checkout (the code before a change) "
                        "measured alternately with this one, for the before/after ratio"})
def bench(c, only="", count="8", reps="3", json="", plot=False, baseline=""):
    """Run the benchmarks (Docker harness for the deploy ones); print medians, ranges, ratios."""
    from lab.bench.run import parse_selection, run  # noqa: PLC0415

    try:
        selected = parse_selection(only)
    except ValueError as exc:
        raise Exit(f"error: {exc}", code=2) from None
    report = run(selected, hosts=number(count, "--count", maximum=1000,
                                        why="the largest benchmark fleet"),
                 reps=number(reps, "--reps", maximum=100), baseline=baseline)
    if json or plot:
        from lab.bench.fixture import BENCH_DIR  # noqa: PLC0415

        json = json or str(BENCH_DIR / "last.json")
        report.write_json(json)
        print(f"bench: wrote {json}")
    if plot:
        from pathlib import Path  # noqa: PLC0415

        from lab.bench.plot import plot as draw  # noqa: PLC0415

        for path in draw(Path(json), Path("docs") / "img"):
            print(f"bench: drew {path}")
    if any(s.error for s in report.sections):
        raise Exit(code=1)


TASKS = [bench]
