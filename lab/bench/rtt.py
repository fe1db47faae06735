"""(8) Deploy time over a network with round-trip time: fleet vs the original manual loop.

Three harness hosts (cloud, pi on bullseye, edge-1), each behind a lab.harness.network link on
127.0.0.1. For each RTT (0, 50, 100, 200 ms) both contenders deploy to all three hosts,
alternating, through the same links: fleet (parallel, one connection and two commands per host)
and the manual loop (sequential scp + scp + ssh restart per host, then an ssh version grep per
host, a fresh connection each). Round trips are where the two differ most: the manual loop pays
every SSH handshake and every command's round trip once per host, in a row.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from lab.bench import fixture
from lab.bench.artifacts import plugin_files
from lab.bench.deploys import Variants
from lab.bench.manual import ManualLoop
from lab.bench.report import Section
from lab.bench.stats import alternation

RTTS_MS = (0, 50, 100, 200)
HOSTS = 3


def bench(base, workdir: Path, reps: int, rtts=RTTS_MS, log=print) -> Section:
    """Start 3 hosts behind links, set up the manual install, then alternate per RTT."""
    from fleet.deploy.inventory import load  # noqa: PLC0415
    from lab.harness.network import LinkSet  # noqa: PLC0415

    sec = Section("rtt", f"8. deploy to {HOSTS} hosts at {', '.join(map(str, rtts))} ms RTT: "
                         "fleet vs the manual loop")
    fl = fixture.start(HOSTS, workdir / "rtt-harness", log=log)
    try:
        with LinkSet(fl.run) as links:
            hosts = load(fl.run.inventory_path).select("all")  # dialled through the links
            variants = Variants(base, workdir / "rtt-variants")
            loop = ManualLoop(fl.key_path, fl.known_hosts)
            files = plugin_files(base, Path(tempfile.mkdtemp(dir=workdir)))
            log("  rtt: one-time setup of the manual install and a first fleet deploy")
            for host in hosts:
                loop.setup(host, base.path, files)
            fixture.deploy(hosts, variants.next())
            version = base.components.get("memory-continuity", base.version)
            for rtt in rtts:
                links.set(rtt_ms=rtt)
                fleet_name, manual_name = f"fleet, {rtt} ms", f"manual loop, {rtt} ms"
                for rep, name in alternation([fleet_name, manual_name], reps):
                    if name == fleet_name:
                        seconds, _ = fixture.deploy(hosts, variants.next())
                    else:
                        seconds = loop.deploy(hosts, files, version)
                    sec.add(name, seconds)
                    log(f"  rtt rep {rep + 1}: {name}: {seconds:.2f} s")
                sec.figures[f"manual / fleet, {rtt} ms"] = sec.ratio(manual_name, fleet_name)
            sec.details["link connections"] = {n: links[n].connections_total
                                               for n in links.links}
        first, last = rtts[0], rtts[-1]
        for who in ("fleet", "manual loop"):
            a, b = sec.summary(f"{who}, {first} ms"), sec.summary(f"{who}, {last} ms")
            if a.get("median") is not None and b.get("median") is not None:
                sec.figures[f"{who}: added per 100 ms RTT"] = (
                    f"{(b['median'] - a['median']) / (last - first) * 100:.2f} s")
        sec.notes.append("links add half the RTT to every byte each way and one RTT per new "
                         "connection (the TCP handshake); hosts share the machine's cores")
    finally:
        fl.close()
    return sec
