"""Run the selected benchmarks in one process and collect them into one Report.

Order: the ones without Docker first (hooks, restart gap), then the harness start (it starts and
removes its own 3 hosts), the RTT one (its own 3 hosts behind network links), then the deploy
benchmarks on one shared harness of `hosts` hosts.
A benchmark that fails is recorded with its error and the others still run.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

import fleet
from lab.bench import fixture
from lab.bench.report import Report, Section, machine_info

BENCHMARKS = ("scaling", "manual", "ansible", "noop", "restartgap", "hooks", "harness", "rtt",
              "rivals", "scale", "hookscale", "failfast", "hung", "busyhook", "rollout",
              "hostcost")
# Only when named (`--only openclaw`): they need the OpenClaw toolchain (`invoke openclaw.install`);
# ctlcost starts 64 hosts and measures two revisions (lab.bench.ctlcost); thousand starts a
# thousand light hosts in racks (lab.bench.thousand); transport measures the SSH transport against
# OpenSSH and asyncssh on 16 (and with --count 64, 64) light hosts (lab.bench.transport);
# hostpace the control CPU per host against the hosts' pace on 64 light hosts (lab.bench.hostpace);
# liveview the live display's CPU per host on a terminal, 64 and 1,000 hosts (lab.bench.liveview)
OPT_IN = ("openclaw", "ocgateway", "ctlcost", "thousand", "transport", "hostpace", "liveview")
DOCKER_DEPLOY = ("scaling", "noop", "manual", "ansible", "rivals", "failfast", "hung")


def parse_selection(only: str) -> list[str]:
    """`scaling,noop` -> those names (in run order); empty or `all` -> every benchmark but the
    opt-in ones."""
    if not only or only.strip() == "all":
        return list(BENCHMARKS)
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in BENCHMARKS + OPT_IN]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(BENCHMARKS + OPT_IN)}")
    return [b for b in BENCHMARKS + OPT_IN if b in wanted]


def _guard(report: Report, name: str, title: str, fn, log) -> None:
    t0 = time.perf_counter()
    try:
        section = fn()
    except Exception as exc:
        section = Section(name, title, error=f"{type(exc).__name__}: {exc}")
        log(traceback.format_exc())
    section.figures.setdefault("benchmark wall time", f"{time.perf_counter() - t0:.1f} s")
    report.sections.append(section)
    log(section.text())


def run(selected: list[str], hosts: int = 8, reps: int = 3, workdir: Path | None = None,
        log=print, baseline: str = "") -> Report:
    from fleet.deploy import api  # noqa: PLC0415

    root = Path(fleet.__file__).resolve().parent.parent
    workdir = (workdir or root / fixture.BENCH_DIR).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    report = Report(machine=machine_info(root),
                    options={"benchmarks": selected, "hosts": hosts, "reps": reps})
    log(report.header())
    base = api.build_artifact(root, workdir / "dist")
    log(f"artifact {base.path.name} {base.sha256[:12]} ({base.path.stat().st_size} bytes)")

    if "hostcost" in selected:
        from lab.bench import hostcost  # noqa: PLC0415

        _guard(report, "hostcost", "host cost of a deploy",
               lambda: hostcost.bench(workdir, reps, baseline, log=log), log)
    if "hooks" in selected:
        from lab.bench import hooks  # noqa: PLC0415

        _guard(report, "hooks", "6. continuity hooks",
               lambda: hooks.bench(workdir, reps=reps, log=log), log)
    if "hookscale" in selected:
        from lab.bench import hookscale  # noqa: PLC0415

        _guard(report, "hookscale", "§4 continuity at scale",
               lambda: hookscale.bench(workdir, reps=reps, log=log), log)
    if "busyhook" in selected:
        from lab.bench import busyhook  # noqa: PLC0415

        _guard(report, "busyhook", "health while a hook is busy",
               lambda: busyhook.bench(workdir, reps=reps, log=log), log)
    if "ocgateway" in selected:
        from lab.bench import ocgateway  # noqa: PLC0415

        _guard(report, "ocgateway", "§5 deploy vs OpenClaw's cold start, hook round trip",
               lambda: ocgateway.bench(base, workdir, reps, log=log), log)
    if "restartgap" in selected:
        from lab.bench import restartgap  # noqa: PLC0415

        _guard(report, "restartgap", "5. restart gap",
               lambda: restartgap.bench(base, workdir, max(reps, 5), log=log), log)
    if "harness" in selected:
        from lab.bench import harnessstart  # noqa: PLC0415

        _guard(report, "harness", "7. harness start",
               lambda: harnessstart.bench(workdir, reps, log=log), log)
    if "rtt" in selected:
        from lab.bench import rtt  # noqa: PLC0415

        _guard(report, "rtt", "8. deploy over RTT",
               lambda: rtt.bench(base, workdir, reps, log=log), log)
    if "openclaw" in selected:
        from lab.bench import openclawdeploys  # noqa: PLC0415

        _guard(report, "openclaw", "9. OpenClaw deploys",
               lambda: openclawdeploys.bench(base, root, workdir, reps, log=log), log)
    if "rollout" in selected:
        from lab.bench import rolloutabort  # noqa: PLC0415

        _guard(report, "rollout", "rollout abort vs a good deploy",
               lambda: rolloutabort.bench(base, workdir, reps, log=log), log)
    if "scale" in selected:
        from lab.bench import scale  # noqa: PLC0415

        _guard(report, "scale", "2. bigger fleet",
               lambda: scale.bench(base, workdir, reps, log=log), log)
    if "ctlcost" in selected:
        from lab.bench import ctlcost  # noqa: PLC0415

        _guard(report, "ctlcost", "control-side cost per host",
               lambda: ctlcost.bench(base, workdir, min(reps, 2), baseline=baseline,
                                     log=log), log)
    if "thousand" in selected:
        from lab.bench import thousand  # noqa: PLC0415

        _guard(report, "thousand", "a thousand hosts",
               lambda: thousand.bench(base, workdir, min(reps, 2), baseline=baseline,
                                      log=log), log)
    if "transport" in selected:
        from lab.bench import transport  # noqa: PLC0415

        _guard(report, "transport", "the SSH transport against its alternatives",
               lambda: transport.bench(base, workdir, reps, transport.sizes_for(hosts),
                                       log=log), log)
    if "hostpace" in selected:
        from lab.bench import hostpace  # noqa: PLC0415

        _guard(report, "hostpace", "control CPU per host against the hosts' pace",
               lambda: hostpace.bench(base, workdir, reps, log=log), log)
    if "liveview" in selected:
        from lab.bench import ctlcost, liveview  # noqa: PLC0415

        _guard(report, "liveview", "the live display's CPU per host",
               lambda: liveview.bench(ctlcost.revisions(root, baseline), reps, log=log), log)
    deploy_benches = [b for b in DOCKER_DEPLOY if b in selected]
    if deploy_benches:
        _deploys(report, deploy_benches, base, hosts, reps, workdir, log)
    log(report.goals_text())
    return report


def _deploys(report: Report, names: list[str], base, hosts: int, reps: int, workdir: Path,
             log) -> None:
    from lab.bench import deploys, failures, rivals  # noqa: PLC0415

    log(f"starting a harness of {hosts} hosts")
    try:
        fl = fixture.start(hosts, workdir / "harness", log=log)
    except Exception as exc:
        for name in names:
            report.sections.append(Section(name, name, error=f"harness: {exc}"))
        log(f"harness failed: {exc}")
        return
    try:
        log(f"harness ready: {fl.timing}")
        variants = deploys.Variants(base, workdir / "variants")
        # a first deploy everywhere, so every contender starts from hosts that run a gateway
        fixture.deploy(fl.hosts, variants.next())
        table = {
            "scaling": ("1. fleet scaling", lambda: deploys.scaling(fl, variants, reps, log)),
            "noop": ("4. no-op redeploy", lambda: deploys.noop(fl, variants, reps, log)),
            "manual": ("2. manual loop",
                       lambda: deploys.manual(fl, variants, reps, workdir, log)),
            "ansible": ("3. ansible-core",
                        lambda: deploys.ansible(fl, variants, reps, workdir, log)),
            "failfast": ("§3a failed release", lambda: failures.failfast(fl, variants, reps, log)),
            "hung": ("§3b paused host", lambda: failures.hung(fl, variants, reps, log)),
            "rivals": ("1. rivals", lambda: rivals.bench(fl, variants, reps, workdir, log)),
        }
        for name in names:
            _guard(report, name, table[name][0], table[name][1], log)
    finally:
        fl.close()
