"""(1, round 2) fleet against its rivals as their best users run them, on the same hosts.

Contenders, each with its own state dir on every host and its own gateway, alternating within
each repetition (lab.bench.stats.alternation), each repetition a new artifact variant for all:
fleet; the hand-made loop (lab.bench.manual); ansible-core with its defaults (forks 5);
ansible-core tuned (lab.bench.ansible.TUNED_CFG: pipelining, forks 8, ControlPersist, no
facts); pyinfra 3 (lab.bench.pyinfradeploy). Goals: fleet / tuned Ansible <= 0.2 and
fleet / pyinfra <= 0.5.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

from lab.bench import fixture
from lab.bench.ansible import AnsibleDeploy
from lab.bench.artifacts import plugin_files
from lab.bench.manual import ManualLoop
from lab.bench.pyinfradeploy import PyinfraDeploy
from lab.bench.report import Section
from lab.bench.stats import alternation

FLEET, MANUAL, ANSIBLE, TUNED, PYINFRA = ("fleet", "manual loop", "ansible (defaults, forks 5)",
                                          "ansible tuned", "pyinfra 3")
CONTENDERS = (FLEET, MANUAL, ANSIBLE, TUNED, PYINFRA)
GOALS = {TUNED: 0.2, PYINFRA: 0.5}


def bench(fl: fixture.Fleet, variants, reps: int, workdir: Path, log=print) -> Section:
    import os  # noqa: PLC0415

    load0 = os.getloadavg()[0]
    n = len(fl.hosts)
    sec = Section("rivals", f"1. fleet vs its rivals as their best users run them, {n} hosts")
    key, known = fl.key_path, fl.known_hosts
    # a ceiling, as the rivals' `restart --timeout 120`: a loaded machine
    fl.hosts[:] = [replace(h, timeouts=replace(h.timeouts, ready=max(h.timeouts.ready, 120)))
                   for h in fl.hosts]
    runners = {
        ANSIBLE: AnsibleDeploy(workdir / "ansible", fl.hosts, key, known, log=log),
        TUNED: AnsibleDeploy(workdir / "ansible-tuned", fl.hosts, key, known, log=log,
                             tuned=True),
        PYINFRA: PyinfraDeploy(workdir / "pyinfra", fl.hosts, key, known, log=log),
    }
    loop = ManualLoop(key, known, timeout=300)  # a loaded machine: ssh alone took > 60 s
    files = plugin_files(variants.base, Path(tempfile.mkdtemp(dir=workdir)))
    version = variants.base.components.get("memory-continuity", variants.base.version)
    log("  rivals: one-time setup (manual runtime; a first untimed run of each rival)")
    for host in fl.hosts:
        loop.setup(host, variants.base.path, files)
    warm = variants.next()
    for name, runner in runners.items():
        runner.deploy(warm, None) if name != PYINFRA else runner.deploy(warm)
    cpu: dict[str, list[dict]] = {name: [] for name in CONTENDERS}
    for rep, name in alternation(list(CONTENDERS), reps):
        art = variants.next()
        with fixture.CpuMeter(fl.container_ids()) as meter:  # hosts' and the tool's own CPU
            if name == FLEET:
                seconds, _ = fixture.deploy(fl.hosts, art)
            elif name == MANUAL:
                seconds = loop.deploy(fl.hosts, files, version)
            elif name == PYINFRA:
                seconds = runners[PYINFRA].deploy(art)
            else:
                seconds = runners[name].deploy(art, None)
        sec.add(name, seconds)
        cpu[name].append(meter.result)
        log(f"  rivals rep {rep + 1}: {name}: {seconds:.2f} s, hosts CPU "
            f"{meter.result['hosts_cpu_s'] or 0:.2f} s, control CPU "
            f"{meter.result['control_cpu_s'] or 0:.2f} s")
    for name in CONTENDERS:
        hosts_cpu = [r["hosts_cpu_s"] for r in cpu[name] if r["hosts_cpu_s"] is not None]
        control = [r["control_cpu_s"] for r in cpu[name] if r["control_cpu_s"] is not None]
        if hosts_cpu and control:
            sec.figures[f"CPU per deploy, {name}"] = (
                f"hosts {statistics.median(hosts_cpu):.2f} s, "
                f"control side {statistics.median(control):.2f} s")
    sec.details["cpu per deploy"] = cpu
    for name in CONTENDERS[1:]:
        sec.figures[f"fleet / {name}"] = sec.ratio(FLEET, name)
    sec.figures["load average (1 min) at start / end"] = f"{load0:.1f} / {os.getloadavg()[0]:.1f}"
    for name, target in GOALS.items():
        sec.goal(f"fleet / {name}", sec.figures[f"fleet / {name}"]["median"], target, "ratio")
    return sec
