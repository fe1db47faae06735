"""(9) Deploys to two real OpenClaw gateways: fleet's direct gateway RPC against the OpenClaw CLI.

Two sandbox OpenClaw hosts (lab.openclaw.sandbox: real gateways of the pinned toolchain, each
with its own state dir, port and scripted model; the most this machine runs at once) are
deployed once, then each repetition runs, per contender, the three deploys an operator notices:

- upgrade: a new release (a variant of the base artifact: new SHA, same versions), activated by
  the gateway's `plugins.reload`;
- no-op: the same release again (fleet checks and changes nothing);
- broken: a release whose memory-continuity entry throws at load: rolled back on both hosts,
  the old version answering.

The contenders differ only in the installer's gateway options (CONTENDERS): `cli` is fleet
before direct RPC (`rpc: cli`: `openclaw gateway call`, one Node boot per RPC; `validate:
always`: `openclaw config validate` for every new config), `direct` talks to the gateway's
WebSocket (fleet/installer/openclawrpc.py) and still validates every config, `direct+known` also
reuses the verdicts OpenClaw already gave (the default). The same two gateways serve all three,
and the contender that goes first rotates.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

from fleet.deploy import api
from fleet.deploy.inventory import Host, parse
from lab.bench.artifacts import variant
from lab.bench.report import Section
from lab.bench.stats import alternation
from lab.openclaw import sandbox, toolchain

# contender -> the installer's gateway options: before this round (every RPC and every config
# check a CLI boot), the direct RPC alone, and the direct RPC with OpenClaw's verdicts remembered
CONTENDERS = {
    "cli": {"rpc": "cli", "validate": "always"},
    "direct": {"rpc": "direct", "validate": "always"},
    "direct+known": {"rpc": "direct", "validate": "known"},
}
DEPLOYS = ("upgrade", "no-op", "broken -> rolled back")
THROW = 'throw new Error("benchmark: a broken release whose entry throws at load");\n'


def broken_artifact(root: Path, out: Path) -> api.ArtifactRef:
    """The project's release with memory-continuity's OpenClaw entry throwing at load."""
    tree = out / "broken-tree"
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(
        root / "fleet", tree / "fleet", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, tree / name)
    entry = tree / "fleet" / "plugins" / "memory_continuity" / "index.js"
    entry.write_text(THROW + entry.read_text(encoding="utf-8"), encoding="utf-8")
    return api.build_artifact(tree, out / "broken-dist")


def sandbox_hosts(state: Path) -> list[Host]:
    """Two sandbox OpenClaw hosts under `state`, on free loopback ports."""
    text = sandbox.inventory_text(("bench-oc-a", "bench-oc-b"), "bench")
    return sandbox.resolve(parse(text, state / "inventory.yaml").select("bench"))


def bench(base: api.ArtifactRef, root: Path, workdir: Path, reps: int, log=print) -> Section:
    sec = Section("openclaw", "9. deploys to two real OpenClaw gateways: direct RPC vs CLI")
    sec.notes.append(
        "contenders: "
        + "; ".join(
            f"{k}: {', '.join(f'{o}={v}' for o, v in opts.items())}"
            for k, opts in CONTENDERS.items()
        )
    )
    if toolchain.find() is None:
        raise RuntimeError("needs the pinned OpenClaw toolchain: run `invoke openclaw.install`")
    state = (workdir / "openclaw").absolute()
    if state.exists():
        shutil.rmtree(state)
    state.mkdir(parents=True)
    hosts = sandbox_hosts(state)
    sandbox.prepare(hosts)
    broken = broken_artifact(root, state)
    nonce = 0

    def deploy(how: str, artifact: api.ArtifactRef) -> tuple[float, list]:
        chosen = [
            replace(h, manager_options=dict(h.manager_options, **CONTENDERS[how])) for h in hosts
        ]
        t0 = time.perf_counter()
        results = api.deploy(chosen, artifact, lambda *a: None)
        return time.perf_counter() - t0, results

    try:
        seconds, results = deploy("direct+known", variant(base, "oc-first", state / "variants"))
        _expect(results, {"installed"}, "first deploy")
        sec.figures["first deploy (2 gateways start)"] = f"{seconds:.1f} s"
        log(f"  openclaw: first deploy {seconds:.1f} s")
        for rep, how in alternation(list(CONTENDERS), reps):
            nonce += 1
            good = variant(base, f"oc{nonce}", state / "variants")
            for what, artifact, want in (
                ("upgrade", good, {"installed"}),
                ("no-op", good, {"unchanged"}),
                ("broken -> rolled back", broken, {"rolled_back"}),
            ):
                seconds, results = deploy(how, artifact)
                _expect(results, want, f"{what} ({how})")
                sec.add(f"{what} ({how})", seconds)
                log(f"  openclaw rep {rep + 1} {how}: {what} {seconds:.1f} s")
    finally:
        for line in sandbox.down(hosts):
            log(f"  {line}")
    for what in DEPLOYS:
        for faster in ("direct", "direct+known"):
            r = sec.ratio(f"{what} (cli)", f"{what} ({faster})")
            if r["median"] is not None:
                sec.figures[f"{what}: cli / {faster}"] = f"{r['median']:.1f}x"
    sec.goal(
        "broken release rolled back (direct+known), median",
        sec.summary("broken -> rolled back (direct+known)")["median"],
        10.0,
        "s",
    )
    return sec


def _expect(results: list, want: set, what: str) -> None:
    got = {r.result for r in results}
    if not got <= want:
        raise RuntimeError(
            f"{what}: {', '.join(f'{r.host} {r.result} ({r.note})' for r in results)}"
        )
