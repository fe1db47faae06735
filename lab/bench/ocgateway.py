"""(§5 of round 2) fleet on two real OpenClaw gateways (the sandbox OpenClaw hosts).

Two local OpenClaw 2026.9.6 gateways (the pinned toolchain, `lab.openclaw.sandbox`), each with
its own state dir, ports and scripted model, under `<workdir>/ocgateway` (its own inventory, so
they never collide with `invoke deploy -H sandbox-openclaw` or another checkout's hosts).
Alternated per repetition:

- *full deploy*: a new release (artifact variant) to both hosts, `fleet.deploy.api.deploy` as
  `invoke deploy` runs it: upload, unpack, openclaw.json checked by `openclaw config validate`,
  activation (plugins.reload, else a restart), readiness from the gateway's `plugins.list`;
- *no-op redeploy*: the same release again (`unchanged`);
- *OpenClaw cold start*: both gateways stopped, then `openclaw gateway run` for both at once
  (as the deploy activates both at once) until each answers its own `/readyz`; the same for one
  gateway alone. The floor a deploy that restarts OpenClaw can reach.

Then the hook round trip inside the real gateway: a release whose bridge (each plugin's
`bridge.mjs`) also writes each hook call's duration (OpenClaw calling the plugin's handler ->
JSON line to the Python worker -> answer) to a file named by `FLEET_BENCH_HOOK_TIMINGS`,
then agent turns through `openclaw agent` on both hosts, in two rounds. Only the benchmark's
variant carries that timing code. With `FLEET_BENCH_HOOK_BASELINE=<git revision>` each round
also runs the turns on that revision's bridge, worker and hook bus (HOOK_FILES), alternated with
the current ones: old and new side by side under the same load.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path

from fleet.deploy import api
from fleet.deploy.inventory import load
from fleet.deploy.runner import RunOptions
from lab.bench.artifacts import variant
from lab.bench.report import Section
from lab.bench.stats import alternation, percentile
from lab.openclaw import sandbox

HOSTS = ("oc-bench-1", "oc-bench-2")
TIMINGS_ENV = "FLEET_BENCH_HOOK_TIMINGS"
BRIDGE = "fleet/plugins/bridge.mjs"  # the one source of the bridge
# ... and the copies a release ships, one per plugin directory: the ones OpenClaw imports
SHIPPED_BRIDGES = ("fleet/plugins/memory_continuity/bridge.mjs", "fleet/plugins/mc/bridge.mjs")
_IMPORT = 'import { existsSync, realpathSync } from "node:fs";'
_HOOK = "  async hook(name, event, ctx) {\n"
_TIMED_HOOK = """  async hook(name, event, ctx) {
    const t0 = performance.timeOrigin + performance.now();
    const out = await this.hookUntimed(name, event, ctx);
    const t1 = performance.timeOrigin + performance.now();
    const file = process.env.TIMINGS_ENV;
    if (file) {
      appendFileSync(file, JSON.stringify({ hook: name, plugin: this.pluginId, ms: t1 - t0 })
        + "\\n");
    }
    return out;
  }

  async hookUntimed(name, event, ctx) {
""".replace("TIMINGS_ENV", TIMINGS_ENV)
READY_TIMEOUT_S = 600.0
# The files a hook call crosses (OpenClaw -> bridge -> worker -> hook bus), swapped as a whole for
# a side-by-side run against another revision ($FLEET_BENCH_HOOK_BASELINE).
HOOK_FILES = (*SHIPPED_BRIDGES, "fleet/gateway/worker.py", "fleet/gateway/hooks.py")
BASELINE_ENV = "FLEET_BENCH_HOOK_BASELINE"
ROUNDS = 2  # batches of agent turns per variant, alternated


def timed_bridge(source: bytes) -> bytes:
    """bridge.mjs whose hook() also appends {hook, plugin, ms} per call to $FLEET_BENCH_HOOK_
    TIMINGS; refuses a bridge this edit does not fit (the benchmark must not time nothing)."""
    text = source.decode("utf-8")
    if text.count(_IMPORT) != 1 or text.count(_HOOK) != 1:
        raise RuntimeError(f"{BRIDGE}: the benchmark's timing edit no longer fits (its fs "
                           "import or `async hook(name, event, ctx)` changed); update "
                           "fleet/bench/ocgateway.py")
    text = text.replace(_IMPORT, 'import { appendFileSync, existsSync, realpathSync } '
                                 'from "node:fs";')
    return text.replace(_HOOK, _TIMED_HOOK).encode("utf-8")


def inventory_text(timings_dir: Path) -> str:
    """Two sandbox OpenClaw hosts on free loopback ports (state dirs beside the file), each
    logging its hook timings to `<timings_dir>/<host>.jsonl`."""
    return sandbox.inventory_text(HOSTS, "bench", options={
        name: {f"env.{TIMINGS_ENV}": str(timings_dir / f"{name}.jsonl")} for name in HOSTS})


class Gateways:
    """The two hosts, started by a first deploy; `close()` stops gateways and models."""

    def __init__(self, root: Path):
        from lab.openclaw import sandbox  # noqa: PLC0415

        self.sandbox = sandbox
        self.root = root
        self.timings = root / "timings"
        self.timings.mkdir(parents=True, exist_ok=True)
        (root / "inventory.yaml").write_text(inventory_text(self.timings))
        self.hosts = sandbox.resolve(load(root / "inventory.yaml").select("bench"))
        sandbox.prepare(self.hosts)

    def manager(self, host):
        from fleet.installer.openclawgw import OpenclawManager  # noqa: PLC0415

        return OpenclawManager(Path(host.state_dir), dict(host.manager_options,
                                                          mode="supervised"))

    def deploy(self, artifact, expect: str | tuple[str, ...]) -> tuple[float, list]:
        t0 = time.perf_counter()
        results = api.deploy(self.hosts, artifact, lambda *a: None,
                             RunOptions(parallel=len(self.hosts)))
        seconds = time.perf_counter() - t0
        bad = [r for r in results if r.result not in ((expect,) if isinstance(expect, str)
                                                      else expect)]
        if bad:
            raise RuntimeError("; ".join(f"{r.host}: {r.result} {r.note[:300]}" for r in bad))
        return seconds, results

    def cold_start(self, hosts) -> float:
        """Stop `hosts`' gateways, start them all at once; seconds until each answers /readyz."""
        managers = [self.manager(h) for h in hosts]
        for m in managers:
            m.process.stop(m.stop_grace)
        t0 = time.perf_counter()
        for m in managers:
            m.process.start()
        waiting = list(managers)
        while waiting:
            waiting = [m for m in waiting if not m.http_ready(timeout=1.0)]
            for m in waiting:
                if m.process.exited():
                    raise RuntimeError(f"cold start: {m.process.exited()}")
            if time.perf_counter() - t0 > READY_TIMEOUT_S:
                raise RuntimeError(f"cold start: not ready within {READY_TIMEOUT_S:.0f} s")
            if waiting:
                time.sleep(0.05)
        return time.perf_counter() - t0

    def pids(self) -> list[int | None]:
        return [self.manager(h).process.pid() for h in self.hosts]

    def turns(self, host, count: int, log) -> None:
        m = self.manager(host)
        for i in range(count):
            msg = (f"Turn {i}: continue the deploy pipeline for the gateway fleet "
                   f"[[reply: Step {i} done.]]")
            proc = m.cli("agent", "--agent", "main", "--message", msg, "--json", "--timeout",
                         "600", timeout=660)
            if proc.returncode != 0:
                raise RuntimeError(f"{host.name}: openclaw agent failed: "
                                   f"{(proc.stdout + proc.stderr)[-600:]}")
        log(f"  openclaw: {host.name}: {count} agent turns done")

    def close(self) -> None:
        self.sandbox.down(self.hosts)


def hook_samples(paths: list[Path]) -> dict[str, list[float]]:
    """hook name -> round trips in seconds, each file's first call per hook left out (it
    includes starting the Python worker)."""
    out: dict[str, list[float]] = {}
    for path in paths:
        seen: set[str] = set()
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
                name = f"{rec['plugin']}:{rec['hook']}"
                ms = float(rec["ms"])
            except (ValueError, KeyError, TypeError):
                continue
            if name not in seen:
                seen.add(name)
                out.setdefault(f"{name} (first, starts the worker)", []).append(ms / 1000)
                continue
            out.setdefault(name, []).append(ms / 1000)
    return out


def baseline_edits(rev: str) -> dict:
    """Artifact edits that put the hook path's files (HOOK_FILES) of git revision `rev` of this
    checkout in place of the current ones (bridge.mjs timed as usual)."""
    import subprocess  # noqa: PLC0415

    import fleet  # noqa: PLC0415

    root = Path(fleet.__file__).resolve().parent.parent
    edits = {}
    for name in HOOK_FILES:
        source = BRIDGE if name in SHIPPED_BRIDGES else name  # what the revision holds
        proc = subprocess.run(["git", "-C", str(root), "show", f"{rev}:{source}"],
                              capture_output=True, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"{BASELINE_ENV}={rev}: git cannot show {source}: "
                               f"{proc.stderr.decode(errors='replace').strip()}")
        data = timed_bridge(proc.stdout) if name in SHIPPED_BRIDGES else proc.stdout
        edits[name] = lambda _old, data=data: data
    return edits


def hook_round_trip(gw: Gateways, base, out: Path, sec: Section, turns: int, log=print) -> None:
    """Agent turns through `openclaw agent` on both hosts with the timed bridge, in ROUNDS
    batches; with $FLEET_BENCH_HOOK_BASELINE (a git revision) each round runs a batch on that
    revision's hook path (HOOK_FILES) and one on the current one, so both see the same load.
    Each batch writes its own timing files (its first call per hook left out)."""
    import os  # noqa: PLC0415

    variants = {"current": variant(base, "oc-timed", out,
                                   dict.fromkeys(SHIPPED_BRIDGES, timed_bridge))}
    rev = os.environ.get(BASELINE_ENV, "").strip()
    if rev:
        variants = {f"baseline {rev}": variant(base, "oc-timed-baseline", out,
                                               baseline_edits(rev)), **variants}
    errors: list[str] = []

    def drive(host) -> None:
        try:
            gw.turns(host, turns, log)
        except Exception as exc:  # reported below, with the other host's outcome
            errors.append(f"{type(exc).__name__}: {exc}")

    files: dict[str, list[Path]] = {label: [] for label in variants}
    for rnd in range(ROUNDS):
        for label, artifact in variants.items():
            gw.deploy(artifact, ("installed", "unchanged"))
            threads = [threading.Thread(target=drive, args=(h,)) for h in gw.hosts]
            for t in threads:
                t.start()
            for t in threads:
                t.join(1800)
            for path in sorted(gw.timings.glob("*.jsonl")):
                kept = path.with_name(f"{label.replace(' ', '-')}.{rnd}.{path.name}.done")
                path.rename(kept)
                files[label].append(kept)
            log(f"  openclaw: hook round {rnd + 1}: {label}: {turns} turns per host done")
    for label in variants:
        samples = hook_samples(files[label])
        prefix = "hook " if label == "current" else f"hook [{label}] "
        for name, values in sorted(samples.items()):
            sec.samples[f"{prefix}{name}"] = values
    bpb = hook_samples(files["current"]).get("memory-continuity:before_prompt_build", [])
    if not bpb:
        errors.append("no before_prompt_build round trip was recorded")
    else:
        sec.goal("before_prompt_build round trip in OpenClaw (bridge -> worker) p50",
                 statistics.median(bpb), 0.005, "s")
        if len(bpb) >= 20:
            sec.figures["before_prompt_build round trip p90"] = (
                f"{percentile(bpb, 90) * 1000:.1f} ms")
    if errors:
        raise RuntimeError("; ".join(errors))


def bench(base, workdir: Path, reps: int = 3, turns: int = 8, log=print) -> Section:
    import shutil  # noqa: PLC0415

    sec = Section("ocgateway", "§5 fleet on two real OpenClaw 2026.9.6 gateways")
    root = (workdir / "ocgateway").absolute()
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    out = root / "variants"
    gw = Gateways(root)
    try:
        t0 = time.perf_counter()
        first = variant(base, "oc-first", out)
        gw.deploy(first, "installed")
        log(f"  openclaw: first deploy (gateways start) {time.perf_counter() - t0:.1f} s")
        current = first
        both, one = "OpenClaw cold start, both gateways", "OpenClaw cold start, one gateway"
        for rep, name in alternation(["full deploy", "no-op redeploy", both], reps):
            if name == "full deploy":
                current = variant(base, f"oc{rep:03d}", out)
                pids = gw.pids()
                seconds, results = gw.deploy(current, "installed")
                sec.details.setdefault("full deploy steps", []).append(
                    {r.host: r.steps for r in results})
                kept = sum(1 for a, b in zip(pids, gw.pids()) if a is not None and a == b)
                sec.notes[:] = [f"activation: {kept} of {len(pids)} gateways kept their pid "
                                "(plugins.reload), the others restarted"]
            elif name == "no-op redeploy":
                seconds, _ = gw.deploy(current, "unchanged")
            else:
                seconds = gw.cold_start(gw.hosts)
                sec.add(one, gw.cold_start(gw.hosts[:1]))
            sec.add(name, seconds)
            log(f"  openclaw rep {rep + 1}: {name}: {seconds:.2f} s")
        sec.figures["full deploy / cold start (both)"] = sec.ratio("full deploy", both)
        sec.figures["full deploy / cold start (one)"] = sec.ratio("full deploy", one)
        sec.figures["no-op / full deploy"] = sec.ratio("no-op redeploy", "full deploy")
        if sec.details.get("full deploy steps"):
            last = sec.details["full deploy steps"][-1]
            sec.figures["full deploy steps, last rep (s)"] = last
        sec.goal("full deploy / OpenClaw cold start (both at once)",
                 sec.ratio("full deploy", both)["median"], 1.3, "ratio")

        hook_round_trip(gw, base, out, sec, turns, log)
    finally:
        gw.close()
    return sec
