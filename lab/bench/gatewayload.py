"""Load test of one gateway: N clients x M mixed requests, stopping by itself, printing figures.

`python3 -m lab.bench.gatewayload [--clients 50] [--requests 2000] [--json FILE]` starts a gateway
in a temporary state dir (the real plugins of this checkout), warms it up, measures its RSS, then
runs every client on its own thread, each sending its share of a fixed mix (health, agent turns
with hooks, appends, transcripts, `/mc` commands, subagent spawn + end), one request per
connection as the CLI does. It prints errors, latency percentiles, throughput, and RSS before,
at the end of the load and after the connections closed, then stops the gateway. "Before" is
measured after a warm-up of the same shape (every client at once, WARMUP requests each). Exit 1
when any request failed or RSS after is more than 10% above before; figures, never a timed
assertion.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from fleet.continuity.statelayout import StateLayout
from fleet.gateway import client

WARMUP = 20  # requests per client before "before" is measured
MIX = (("health", 40), ("turn", 20), ("messages", 10), ("transcript", 10), ("mc", 10),
       ("child", 10))


def rss_kib(pid: int) -> int:
    """Resident set size of `pid` from /proc (Linux), in KiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _gateway(state: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleet.gateway", "--state-dir", str(state), *args],
                          capture_output=True, text=True, timeout=120)


class Client:
    """One client: its own session, a deterministic request mix, its latencies and errors."""

    def __init__(self, sock: Path, index: int, count: int) -> None:
        self.sock = sock
        self.rng = random.Random(index)
        self.count = count
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.key = ""

    def call(self, payload: dict) -> dict | None:
        t0 = time.perf_counter()
        try:
            resp = client.request(self.sock, payload, timeout_s=120, retry_s=5)
        except client.ClientError as exc:
            self.errors.append(f"{payload['op']}: {exc}")
            return None
        finally:
            self.latencies.append(time.perf_counter() - t0)
        if not resp.get("ok"):
            self.errors.append(f"{payload['op']}: {resp.get('error')}")
            return None
        return resp["result"]

    def request(self, kind: str) -> None:
        n = len(self.latencies)
        if kind == "health":
            self.call({"op": "health"})
        elif kind == "turn":
            self.call({"op": "session.turn", "sessionKey": self.key,
                       "prompt": f"Step {n}: migrate table {self.rng.randint(1, 99)} to the new "
                                 "schema and report the row counts",
                       "steps": [f"Migrated; {self.rng.randint(1, 10**6)} rows copied."]})
        elif kind == "messages":
            self.call({"op": "session.messages", "sessionKey": self.key,
                       "steps": [f"progress note {n}"]})
        elif kind == "transcript":
            self.call({"op": "transcript", "sessionKey": self.key, "limit": 5})
        elif kind == "mc":
            self.call({"op": "command", "command": "/mc state"})
        else:
            child = self.call({"op": "subagent.spawn", "parentSessionKey": self.key,
                               "task": f"check replica {n}", "steps": [f"replica {n} in sync"]})
            if child:
                self.call({"op": "subagent.end", "childSessionKey": child["childSessionKey"],
                           "outcome": "ok"})

    def run(self, start: threading.Barrier) -> None:
        started = self.call({"op": "session.start", "agentId": "main"})
        self.key = (started or {}).get("sessionKey", "")
        start.wait()
        kinds = [k for k, _ in MIX]
        weights = [w for _, w in MIX]
        while len(self.latencies) < self.count + 1:
            self.request(self.rng.choices(kinds, weights)[0])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def run_load(clients: int, total: int, state: Path, rounds: int = 1) -> dict:
    """Start a gateway under `state`, load it, stop it; the figures."""
    assert _gateway(state, "init").returncode == 0
    started = _gateway(state, "start")
    if started.returncode != 0:
        raise RuntimeError(f"gateway did not start: {started.stderr}")
    sock = StateLayout(state).socket
    try:
        pid = client.request(sock, {"op": "health"})["result"]["pid"]
        # Warm-up of the same shape (all clients at once, WARMUP requests each): code paths,
        # caches, one thread stack and malloc arena per concurrent connection. "before" is a
        # warm gateway, so "after" can only differ by what the load itself leaves behind.
        warm = [Client(sock, 10**6 + i, WARMUP) for i in range(clients)]
        gate = threading.Barrier(clients)
        warmers = [threading.Thread(target=w.run, args=(gate,), daemon=True) for w in warm]
        for t in warmers:
            t.start()
        for t in warmers:
            t.join(600)
        time.sleep(1.5)
        before = rss_kib(pid)
        share = max(1, total // clients)
        peak = before
        rounds_after = []
        latencies: list[float] = []
        errors = [e for w in warm for e in w.errors]
        elapsed = 0.0
        for r in range(rounds):
            workers = [Client(sock, i + 1000 * r, share) for i in range(clients)]
            barrier = threading.Barrier(clients + 1)
            threads = [threading.Thread(target=w.run, args=(barrier,), daemon=True)
                       for w in workers]
            for t in threads:
                t.start()
            barrier.wait()
            t0 = time.perf_counter()
            while any(t.is_alive() for t in threads):
                peak = max(peak, rss_kib(pid))
                time.sleep(0.2)
            elapsed += time.perf_counter() - t0
            during = rss_kib(pid)
            time.sleep(1.5)  # connections closed: what the gateway keeps
            rounds_after.append(rss_kib(pid))
            latencies += [x for w in workers for x in w.latencies]
            errors += [e for w in workers for e in w.errors]
        after = rounds_after[-1]
        alive = client.request(sock, {"op": "health"})["ok"]
    finally:
        _gateway(state, "stop")
    return {
        "clients": clients, "requests": len(latencies), "errors": len(errors),
        "first_errors": errors[:5], "elapsed_s": round(elapsed, 2),
        "throughput_rps": round(len(latencies) / elapsed, 1),
        "latency_ms": {k: round(percentile(latencies, q) * 1000, 1)
                       for k, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))},
        "rss_kib": {"before": before, "peak": peak, "end_of_load": during, "after": after,
                    "after_each_round": rounds_after},
        "rss_after_vs_before": round(after / before, 3), "healthy_after": alive,
        "mix": dict(MIX),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=2000, help="total, shared by the clients")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat the load on the same gateway (RSS after each round)")
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fleet-load-") as tmp:
        fig = run_load(args.clients, args.requests, Path(tmp) / "state", args.rounds)
    lat, rss = fig["latency_ms"], fig["rss_kib"]
    print(f"{fig['clients']} clients, {fig['requests']} requests in {fig['elapsed_s']} s "
          f"({fig['throughput_rps']} req/s), errors: {fig['errors']}")
    print(f"latency ms: p50 {lat['p50']}  p90 {lat['p90']}  p99 {lat['p99']}  max {lat['max']}")
    print(f"RSS MiB: before {rss['before'] / 1024:.1f}  peak {rss['peak'] / 1024:.1f}  "
          f"end of load {rss['end_of_load'] / 1024:.1f}  after {rss['after'] / 1024:.1f}  "
          f"(after/before {fig['rss_after_vs_before']}); after each round: "
          + ", ".join(f"{k / 1024:.1f}" for k in rss["after_each_round"]))
    for err in fig["first_errors"]:
        print(f"  error: {err}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(fig, indent=2) + "\n", encoding="utf-8")
    ok = fig["errors"] == 0 and fig["rss_after_vs_before"] <= 1.10 and fig["healthy_after"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
