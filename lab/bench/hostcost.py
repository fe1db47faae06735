"""What a deploy costs the host: CPU (user + sys) and peak RSS of every host-side process fleet
starts, per deploy and per no-op redeploy, split by step.

A Raspberry Pi pays for every Python start and every re-read of the artifact, so this counts
the host's side only, on one local host (no Docker: `connection: local`, the same commands an
ssh host gets). How it is measured, and why that is honest:

- every host command the control side runs (lease take, upload + install, install, lease
  release) is started under a small wrapper that forks it, waits for it with `wait4` and logs
  the rusage the kernel kept for it: user + sys CPU and peak RSS of that command's process and
  every process it waited for (the shell, `cat`, the installer, the manager's restart command).
  The wrapper's own cost is not counted (it is the measuring instrument, not fleet).
- the gateway (and the fleet manager's supervisor) run detached: the driver is their child
  subreaper (prctl PR_SET_CHILD_SUBREAPER), so when the next deploy stops them they become its
  zombies and `wait4` gives the kernel's exact rusage of their whole life (start, readiness,
  self-test, idle, stop) with every process they waited for (the supervisor reaps the
  gateway). A deploy is charged the gateway it started, stopped by the next deploy (the last
  one by the driver at the end). A no-op leaves the running gateway alone.
- the installer's steps (verify, unpack, switch, restart, ready, ...) are split by the
  installer itself where it reports `cpu_s` (os.times() around each step, its own process and
  the children it waited for); the rest of its process is its Python start and imports, and
  the rest of the upload command is the shell receiving the bytes.

`--baseline DIR` measures another checkout (the code before a change) alternately with this one, in
the same run on the same machine, and reports the ratio. Each checkout is driven by this file
run as a script with that checkout first on PYTHONPATH, so each builds and deploys its own
installer and lease code.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRAP = r"""
import json, os, sys
log, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
with open(log, "a") as fh:
    fh.write(json.dumps({"cmd": argv[-1], "cpu_s": ru.ru_utime + ru.ru_stime,
                         "rss_kb": ru.ru_maxrss}) + "\n")
os._exit(os.waitstatus_to_exitcode(status))
"""

STEPS = ("lease take", "upload receive (sh)", "python start + imports", "verify", "compat",
         "unpack", "switch", "restart", "ready", "selftest", "audit", "prune", "lock",
         "installer other", "lease release", "gateway + supervisor (detached)")


def _kind(cmd: str) -> str:
    """Which host command this is, from its text."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = cmd.split()
    if "-c" in words and "run.lease" in cmd:
        i = words.index("-c")
        return f"lease {words[i + 3]}" if len(words) > i + 3 else "lease"
    if "cat >" in cmd:
        return "upload+install"
    if "FLEET-UNCHANGED" in cmd or "--sha256" in cmd:  # the marker: code before the take said it
        return "install"
    return "other"


PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    """Adopt the orphaned (detached) gateways and supervisors of the deploys run from here."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "hostcost: prctl(PR_SET_CHILD_SUBREAPER) failed; "
                      "the benchmark needs Linux")


def _reap(pid: int, timeout: float = 30.0) -> tuple[float, int] | None:
    """(CPU seconds, peak RSS kB) of a stopped detached process, its waited-for children
    included; None if another process reaped it (the supervisor reaps its gateway)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got, _, ru = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if got == pid:
            return ru.ru_utime + ru.ru_stime, ru.ru_maxrss
        if time.monotonic() > deadline:
            raise TimeoutError(f"hostcost: pid {pid} still runs {timeout:.0f} s after its stop")
        time.sleep(0.01)


class _Wrapped:
    """fleet.deploy.connection's `subprocess`, with every `sh -c CMD` started under WRAP."""

    def __init__(self, log: Path):
        self.log = log

    def __getattr__(self, name: str):
        return getattr(subprocess, name)

    def Popen(self, args, **kw):  # noqa: N802  (the name it replaces)
        if list(args[:2]) == ["sh", "-c"]:
            args = [sys.executable, "-I", "-S", "-c", WRAP, str(self.log), *args]
        return subprocess.Popen(args, **kw)


def _one(deploy, log: Path, state: Path, started: list) -> dict:
    """Run `deploy()` and return its host cost per command kind; the gateway and supervisor
    it started are added to `started` (pid, supervisor?, this cost), to be charged to it
    when they are reaped (`_charge`)."""
    from fleet.deploy.sandbox import find_gateways

    before = {g.pid for g in find_gateways(state.parent)}
    log.write_text("")
    result = deploy()
    if not result.ok:
        raise RuntimeError(f"hostcost: deploy failed: {result.result}: {result.note}")
    cost: dict[str, object] = {"result": result.result, "commands": [], "detached": []}
    for line in log.read_text().splitlines():
        rec = json.loads(line)
        cost["commands"].append({"kind": _kind(rec["cmd"]), "cpu_s": rec["cpu_s"],
                                 "rss_kb": rec["rss_kb"]})
    started += [(g.pid, g.supervisor, cost) for g in find_gateways(state.parent)
                if g.pid not in before]
    cost["installer_cpu_s"] = result.data.get("cpu_s") or {}
    return cost


def _charge(started: list, live: set) -> None:
    """Reap every process of `started` that is no longer running (not in `live`) and charge
    its rusage to the deploy that started it."""
    for item in list(started):
        pid, supervisor, cost = item
        if pid in live:
            continue
        started.remove(item)
        got = _reap(pid)
        if got is not None:
            cost["detached"].append({"cpu_s": got[0], "rss_kb": got[1],
                                     "supervisor": supervisor})


def drive(out: Path, reps: int, workdir: Path) -> None:
    """Run in a checkout's own Python path: build, first deploy, then `reps` times a full
    deploy of a new variant and a no-op redeploy of it; write the costs to `out`."""
    import fleet
    from fleet.deploy import api, connection
    from fleet.deploy.inventory import Host
    from fleet.deploy.runner import RunOptions
    from fleet.deploy.sandbox import find_gateways
    from lab.bench.artifacts import variant

    root = Path(fleet.__file__).resolve().parent.parent
    base = api.build_artifact(root, workdir.parent / "dist")  # shared by its runs
    state = workdir / "hosts" / "pi"
    if state.exists():
        shutil.rmtree(state)
    host = Host(name="pi", connection="local", state_dir=str(state), python=sys.executable)
    log = workdir / "commands.jsonl"
    connection.subprocess = _Wrapped(log)

    def deploy(art):
        return lambda: api.deploy([host], art, lambda *a: None, RunOptions(parallel=1))[0]

    costs = {"full": [], "noop": []}
    started: list = []
    _become_subreaper()

    def live() -> set:
        return {g.pid for g in find_gateways(state.parent)}

    try:
        _one(deploy(variant(base, "w0", workdir / "variants")), log, state, started)
        for rep in range(reps):
            art = variant(base, f"r{rep}", workdir / "variants")
            costs["full"].append(_one(deploy(art), log, state, started))
            costs["noop"].append(_one(deploy(art), log, state, started))
            _charge(started, live())  # the gateway of the deploy before, stopped by this one
    finally:
        from fleet.continuity import detached

        for gw in find_gateways(state.parent):
            try:
                detached.stop(gw.pid, 10.0)
            except Exception:  # noqa: BLE001  (best effort: the next one may stop it)
                pass
    _charge(started, set())
    out.write_text(json.dumps(costs))


def _split(cost: dict) -> dict[str, float]:
    """CPU seconds by step of one deploy (see STEPS)."""
    steps: dict[str, float] = {}
    inst = {k: float(v) for k, v in (cost.get("installer_cpu_s") or {}).items()}
    for cmd in cost["commands"]:
        kind = cmd["kind"]
        if kind in ("upload+install", "install") and inst.get("process"):
            own = inst.pop("process")
            steps_sum = 0.0
            for name, value in inst.items():
                steps[name] = steps.get(name, 0.0) + value
                steps_sum += value
            steps["python start + imports"] = max(0.0, own - steps_sum)
            if kind == "upload+install":
                steps["upload receive (sh)"] = max(0.0, cmd["cpu_s"] - own)
            continue
        steps[kind] = steps.get(kind, 0.0) + cmd["cpu_s"]
    detached = sum(d["cpu_s"] for d in cost["detached"])
    if detached:
        steps["gateway + supervisor (detached)"] = detached
    return steps


def _total(cost: dict) -> float:
    return (sum(c["cpu_s"] for c in cost["commands"])
            + sum(d["cpu_s"] for d in cost["detached"]))


def _peak(cost: dict) -> int:
    return max([c["rss_kb"] for c in cost["commands"]]
               + [d["rss_kb"] for d in cost["detached"]] + [0])


def summarize(costs: dict) -> dict:
    """Medians over the repetitions: total CPU, peak RSS, processes, CPU by step, per kind."""
    out = {}
    for what, runs in costs.items():
        steps: dict[str, list[float]] = {}
        for cost in runs:
            for name, value in _split(cost).items():
                steps.setdefault(name, []).append(value)
        out[what] = {
            "cpu_ms": 1000 * statistics.median(_total(c) for c in runs),
            "peak_rss_mb": statistics.median(_peak(c) for c in runs) / 1024,
            "host_commands": statistics.median(len(c["commands"]) for c in runs),
            "commands": [c["kind"] for c in runs[-1]["commands"]],
            "by_step_ms": {k: round(1000 * statistics.median(v), 1)
                           for k, v in sorted(steps.items(),
                                              key=lambda kv: STEPS.index(kv[0])
                                              if kv[0] in STEPS else 99)},
        }
    return out


def measure(checkout: Path, reps: int, workdir: Path) -> dict:
    """Drive one checkout in a subprocess (its own code first on PYTHONPATH)."""
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "costs.json"
    env = dict(os.environ, PYTHONPATH=str(checkout))
    subprocess.run([sys.executable, __file__, str(out), str(reps), str(workdir)], env=env,
                   check=True, timeout=600 + 120 * reps, cwd=str(checkout))
    return json.loads(out.read_text())


def bench(workdir: Path, reps: int, baseline: str = "", log=print):
    """The host cost of this checkout's deploy and no-op redeploy; with `baseline`, of that
    checkout too, alternately, and the ratios."""
    import fleet
    from lab.bench.report import Section

    root = Path(fleet.__file__).resolve().parent.parent
    contenders = {"this": root}
    if baseline:
        other = Path(baseline).expanduser().absolute()
        if not (other / "fleet" / "deploy" / "api.py").is_file():
            raise ValueError(f"--baseline {baseline}: not a fleet checkout (no "
                             "fleet/deploy/api.py there); give the root of one, e.g. the main "
                             "branch's worktree")
        contenders = {"baseline": other, "this": root}
    costs: dict[str, dict] = {name: {"full": [], "noop": []} for name in contenders}
    base = workdir / "hostcost"
    for rep in range(reps):  # alternate, one full + no-op pair per contender each round
        for name, checkout in contenders.items():
            got = measure(checkout, 1, Path(tempfile.mkdtemp(dir=_mk(base / name))))
            for what in ("full", "noop"):
                costs[name][what] += got[what]
            log(f"hostcost {name} rep {rep + 1}: full {_total(got['full'][0]) * 1000:.0f} ms, "
                f"no-op {_total(got['noop'][0]) * 1000:.0f} ms")
    sec = Section("hostcost", "host cost of a deploy (CPU, peak RSS, by step)")
    summary = {name: summarize(c) for name, c in costs.items()}
    for name, s in summary.items():
        for what in ("full", "noop"):
            label = "deploy" if what == "full" else "no-op redeploy"
            sec.figures[f"{name}: host CPU per {label}"] = f"{s[what]['cpu_ms']:.0f} ms"
            sec.figures[f"{name}: peak RSS per {label}"] = f"{s[what]['peak_rss_mb']:.1f} MB"
            sec.figures[f"{name}: host commands per {label}"] = (
                f"{s[what]['host_commands']:g} ({', '.join(s[what]['commands'])})")
    if baseline:
        for what in ("full", "noop"):
            ratio = summary["this"][what]["cpu_ms"] / summary["baseline"][what]["cpu_ms"]
            sec.figures[f"CPU ratio this/baseline, {what}"] = f"{ratio:.2f}"
    sec.details = {"summary": summary, "costs": costs}
    return sec


def _mk(path: Path) -> str:
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


if __name__ == "__main__":  # the driver, run by `measure` in the checkout's own Python path
    drive(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
