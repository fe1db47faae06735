"""(5) Restart gap: a client hammers `health` while the gateway restarts.

The gateway runs on this machine from a real deploy (a local host, same installer, fleet
manager); the restart is the one `invoke restart` runs (installer `restart`: lock, the manager's
`python3 -m fleet.gateway restart`, readiness). A thread sends `health` requests back to back
(1 ms apart) through the gateway's own client:

- without retry (`retry_s=0`): the failure window is the time from the first failed request's
  start to the end of the last failed one (refused connections while no gateway listens);
- with the client CLI's retry (`fleet.gateway.client.DEFAULT_RETRY_S`): the requests lost are
  those that still end in an error; their longest latency shows what the retry absorbed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from fleet.continuity.statelayout import StateLayout
from fleet.deploy import api
from fleet.deploy.inventory import Host
from fleet.deploy.runner import RunOptions
from fleet.gateway import client
from lab.bench.report import Section
from lab.bench.stats import alternation

PAUSE_S = 0.001


@dataclass
class Sample:
    t0: float
    t1: float
    ok: bool
    pid: int | None
    error: str = ""


def hammer(sock: Path, retry_s: float, stop: threading.Event, out: list[Sample]) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            resp = client.request(sock, {"op": "health"}, timeout_s=10.0, retry_s=retry_s)
            ok = bool(resp.get("ok"))
            pid = (resp.get("result") or {}).get("pid")
            err = "" if ok else str(resp.get("error"))
        except client.ClientError as exc:
            ok, pid, err = False, None, str(exc)
        out.append(Sample(t0, time.perf_counter(), ok, pid, err))
        time.sleep(PAUSE_S)


def analyse(samples: list[Sample]) -> dict:
    """Failure window, lost requests, longest request, longest stretch without a success."""
    failed = [s for s in samples if not s.ok]
    window = (max(s.t1 for s in failed) - min(s.t0 for s in failed)) if failed else 0.0
    oks = [s.t1 for s in samples if s.ok]
    no_success = max((b - a for a, b in zip(oks, oks[1:])), default=0.0)
    pids = []
    for s in samples:
        if s.ok and (not pids or pids[-1] != s.pid):
            pids.append(s.pid)
    return {"requests": len(samples), "failed": len(failed), "window_s": window,
            "longest_request_s": max((s.t1 - s.t0 for s in samples), default=0.0),
            "longest_without_success_s": no_success, "pids": pids,
            "errors": sorted({_category(s.error) for s in failed})}


def local_host(state_dir: Path) -> Host:
    return Host(name="gap", connection="local", state_dir=str(state_dir),
                python=sys.executable)


def bench(artifact: api.ArtifactRef, workdir: Path, reps: int, log=print) -> Section:
    sec = Section("restartgap", "5. restart gap: client hammering health during `restart`")
    state = workdir / "restartgap" / "state"
    if state.exists():
        shutil.rmtree(state)
    host = local_host(state.absolute())
    res = api.deploy([host], artifact, lambda *a: None, RunOptions(parallel=1))
    if not res[0].ok:
        raise RuntimeError(f"restart gap: local deploy failed: {res[0].note}")
    sock = StateLayout(state).socket
    per_mode: dict[str, list[dict]] = {"no retry": [], "CLI retry": []}
    try:
        for rep, mode in alternation(list(per_mode), reps):
            retry = 0.0 if mode == "no retry" else client.DEFAULT_RETRY_S
            samples: list[Sample] = []
            stop = threading.Event()
            worker = threading.Thread(target=hammer, args=(sock, retry, stop, samples))
            worker.start()
            time.sleep(0.3)
            t0 = time.perf_counter()
            restarted = api.restart([host], lambda *a: None, RunOptions(parallel=1))
            restart_s = time.perf_counter() - t0
            time.sleep(0.3)
            stop.set()
            worker.join(30)
            if not restarted[0].ok:
                raise RuntimeError(f"restart failed: {restarted[0].note}")
            a = analyse(samples)
            a["restart_s"] = restart_s
            per_mode[mode].append(a)
            if mode == "no retry":
                sec.add("failure window (no retry)", a["window_s"])
            else:
                sec.add("longest request (CLI retry)", a["longest_request_s"])
            sec.add("restart command", restart_s)
            log(f"  restart gap rep {rep + 1} {mode}: {a['failed']}/{a['requests']} failed, "
                f"window {a['window_s'] * 1000:.0f} ms, longest request "
                f"{a['longest_request_s'] * 1000:.0f} ms, restart {restart_s:.2f} s")
    finally:
        api.status([host], lambda *a: None)
        _stop_gateway(state)
    lost = sum(a["failed"] for a in per_mode["CLI retry"])
    sec.figures["requests (no retry / CLI retry)"] = (
        f"{sum(a['requests'] for a in per_mode['no retry'])} / "
        f"{sum(a['requests'] for a in per_mode['CLI retry'])}")
    sec.figures["lost with CLI retry"] = lost
    errors = sorted({e for a in per_mode["no retry"] + per_mode["CLI retry"]
                     for e in a["errors"]})
    sec.figures["errors seen"] = "; ".join(errors) or "none"
    sec.details["per repetition"] = per_mode
    sec.goal("failure window median", sec.summary("failure window (no retry)")["median"], 0.3,
             "s")
    sec.goal("requests lost with CLI retry", float(lost), 0.0)
    return sec


def _stop_gateway(state: Path) -> None:
    current = StateLayout(state).current
    if current.exists():
        subprocess.run([sys.executable, "-m", "fleet.gateway", "--state-dir", str(state), "stop"],
                       env={"PYTHONPATH": str(current.resolve()), "PATH": "/usr/bin:/bin"},
                       cwd="/", capture_output=True, timeout=30)


def _category(error: str) -> str:
    """The kind of failure without the socket path: 'not reachable', 'connection failed'..."""
    for marker, name in (("not reachable", "refused or no socket (before retry gave up)"),
                         ("closed the connection", "closed without answering"),
                         ("failed:", "connection broken mid-request"),
                         ("no answer", "timed out"), ("cannot connect", "connect error")):
        if marker in error:
            return name
    return error[:80]
