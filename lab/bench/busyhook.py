"""`health` while a plugin's hook keeps the gateway's interpreter busy.

A gateway process runs its plugins' hooks in its own interpreter, so a hook that computes holds
CPython's global interpreter lock (GIL) and every other thread, the one answering `health`
included, waits for it at each step that released it (accept, thread start, recv, send, close).
The benchmark starts a real gateway (`python3 -m fleet.gateway start`) with one extra plugin
whose `agent_end` handler spins until told to stop, starts an agent turn, and while the handler
spins sends `health` requests from this process (a separate process, as a probe or `invoke
status` would be), one after another. Two handlers:

- `cpu`: pure Python arithmetic that checks its stop file every ~20 ms. The interpreter forces
  a switch every 5 ms (`sys.getswitchinterval()`), so each wait is bounded.
- `cpu+syscalls`: the same arithmetic, checking its stop file (one `stat`) every ~0.1 ms. Each
  check drops the GIL and takes it straight back before a waiting thread wakes, which also
  resets the interpreter's forced-switch clock: waiting threads are starved until they win a
  race (the GIL "convoy effect", https://bugs.python.org/issue7946).

The figure is the latency of `health` compared with an idle gateway. No goal is checked here
beyond printing: the first case shows the bound the design gives, the second the limit of
running plugin code in the gateway's own interpreter.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import fleet
from fleet.continuity.statelayout import StateLayout
from fleet.gateway import client
from lab.bench.report import Section

CALLS = 40
SPIN = """
import os, time
def register(api):
    running = os.path.join(str(api.state_dir), "spin-running")
    stop = os.path.join(str(api.state_dir), "spin-stop")
    def spin(event, ctx):
        open(running, "w").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(stop) and time.monotonic() < deadline:
            for _ in range(ROUNDS):
                sum(i * i for i in range(2000))
    api.on("agent_end", spin, {"timeoutMs": 180000})
"""
HOOKS = {"cpu": 200, "cpu+syscalls": 1}  # arithmetic rounds (~0.1 ms each) between two stats


def _gateway(state: Path, *args: str) -> subprocess.CompletedProcess:
    root = Path(fleet.__file__).resolve().parent.parent
    return subprocess.run([sys.executable, "-m", "fleet.gateway", "--state-dir", str(state),
                           *args], capture_output=True, text=True, timeout=120, cwd=str(root))


def _plugin(root: Path, rounds: int) -> Path:
    d = root / "spin"
    d.mkdir(parents=True, exist_ok=True)
    (d / "openclaw.plugin.json").write_text(json.dumps({
        "id": "spin", "version": "1.0.0",
        "configSchema": {"type": "object", "additionalProperties": False}}))
    (d / "package.json").write_text(json.dumps({"version": "1.0.0"}))
    (d / "plugin.py").write_text(SPIN.replace("ROUNDS", str(rounds)))
    return root


def _health_latencies(sock: Path, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        resp = client.request(sock, {"op": "health"}, timeout_s=30, retry_s=0)
        out.append(time.perf_counter() - t0)
        if not resp.get("ok"):
            raise RuntimeError(f"health failed: {resp.get('error')}")
    return out


def measure(workdir: Path, kind: str, calls: int = CALLS) -> tuple[list[float], list[float]]:
    """(idle latencies, latencies while the `kind` hook spins), from one fresh gateway."""
    root = workdir / "busyhook" / kind.replace("+", "-")
    shutil.rmtree(root, ignore_errors=True)
    state = root / "state"
    plugins = _plugin(root / "plugins", HOOKS[kind])
    res = _gateway(state, "init", "--link-plugins-from", str(plugins))
    if res.returncode != 0:
        raise RuntimeError(f"gateway init: {res.stderr.strip()}")
    res = _gateway(state, "start")
    if res.returncode != 0:
        raise RuntimeError(f"gateway start: {res.stderr.strip()}")
    sock = StateLayout(state).socket
    turn = None
    try:
        idle = _health_latencies(sock, calls)
        key = client.request(sock, {"op": "session.start", "agentId": "main"})["result"]
        turn = threading.Thread(target=client.request, daemon=True, args=(sock, {
            "op": "session.turn", "sessionKey": key["sessionKey"], "prompt": "go",
            "steps": ["x"]}), kwargs={"timeout_s": 180})
        turn.start()
        deadline = time.monotonic() + 30
        while not (state / "spin-running").exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the spinning hook never started")
            time.sleep(0.01)
        busy = _health_latencies(sock, calls)
        return idle, busy
    finally:
        (state / "spin-stop").touch()
        if turn is not None:
            turn.join(30)
        _gateway(state, "stop")


def bench(workdir: Path, reps: int = 3, log=print) -> Section:
    sec = Section("busyhook", "health while a hook is busy (one gateway process)")
    for _ in range(reps):
        for kind in HOOKS:
            idle, busy = measure(workdir, kind)
            for v in idle:
                sec.add("idle", v)
            for v in busy:
                sec.add(f"busy hook: {kind}", v)
            log(f"  busyhook {kind}: median {sorted(busy)[len(busy) // 2] * 1000:.1f} ms, "
                f"max {max(busy) * 1000:.1f} ms (idle median "
                f"{sorted(idle)[len(idle) // 2] * 1000:.2f} ms)")
    for kind in HOOKS:
        s = sec.summary(f"busy hook: {kind}")
        sec.figures[f"health during a {kind} hook"] = (
            f"median {s['median'] * 1000:.1f} ms, p99 {s.get('p99', s['max']) * 1000:.1f} ms, "
            f"max {s['max'] * 1000:.1f} ms")
    sec.goal("health median during a cpu-bound hook", sec.summary("busy hook: cpu")["median"],
             0.1, "s")
    sec.notes.append("cpu+syscalls: the GIL convoy; bounded only by moving plugin code out of "
                     "the gateway's interpreter")
    return sec
