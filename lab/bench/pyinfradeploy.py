"""pyinfra 3 doing the same work as a fleet deploy: upload when the hash differs, unpack, switch
the links, restart, wait for the new version.

pyinfra comes from the `bench` extra in its own venv (lab.bench.tools): never a dependency of
fleet or its tests. Run as its best users run it: one inventory file, every host at once (its
default), `--no-wait` so a host goes on to its next operation without waiting for the others,
`-y` (no confirmation), strict host keys against the harness's known_hosts. `files.put` compares
the remote file's SHA-1 and uploads only when it differs; `files.link` switches a link only when
its target differs. Each host gets its own state dir (`~/.openclaw-pyinfra`).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from fleet.deploy.api import ArtifactRef
from fleet.deploy.inventory import Host
from lab.bench import tools

STATE = ".openclaw-pyinfra"
CONFIG = '{"agents": {"list": [{"id": "main", "default": true}]}}'

DEPLOY = """\
import json
import shlex
from types import SimpleNamespace

from pyinfra import host
from pyinfra.operations import files, server

with open(host.data.params) as fh:  # this run's artifact, sha256, version, state dir name
    d = SimpleNamespace(**json.load(fh))
state = "/home/%s/%s" % (host.data.ssh_user, d.state_name)
release = "%s/fleet/releases/%s-%s" % (state, d.version, d.sha256[:12])
art = "%s/fleet/artifacts/%s.pyz" % (state, d.sha256)
gateway = "cd / && PYTHONPATH=%s/fleet/current python3 -m fleet.gateway --state-dir %s" % (
    state, state)

files.put(name="artifact (uploaded only when its hash differs)", src=d.artifact, dest=art,
          add_deploy_dir=False, mode="644")
server.shell(name="config and unpack", commands=[
    "mkdir -p %s/extensions %s/fleet/releases" % (state, state),
    "[ -f %s/openclaw.json ] || printf %%s %s > %s/openclaw.json" % (
        state, shlex.quote(d.config), state),
    "[ -f %s/fleet_manifest.json ] || python3 -m zipfile -e %s %s" % (release, art, release),
])
files.link(name="current", path="%s/fleet/current" % state, target=release)
for pid, pkg in (("memory-continuity", "memory_continuity"), ("mc", "mc")):
    files.link(name="plugin " + pid, path="%s/extensions/%s" % (state, pid),
               target="%s/fleet/current/fleet/plugins/%s" % (state, pkg))
server.shell(name="restart the gateway", commands=[gateway + " restart --timeout 120"])
server.shell(name="wait for the new version", commands=[
    "for i in $(seq 150); do "
    "out=$(%s call health 2>/dev/null) && "
    "case \\"$out\\" in *'\\"memory-continuity\\": \\"%s\\"'*) ;; *) false;; esac && "
    "case \\"$out\\" in *%s*) exit 0;; esac; sleep 0.2; done; "
    "echo \\"no new version: $out\\" >&2; exit 1" % (gateway, d.version, release)])
"""


class PyinfraDeploy:
    """`pyinfra inventory.py deploy.py` against the harness hosts; one run per deploy."""

    def __init__(self, workdir: Path, hosts: list[Host], key: Path, known_hosts: Path,
                 log=print):
        self.exe = tools.executable("pyinfra", log=log)
        self.workdir = workdir.absolute()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.deploy_file = self.workdir / "deploy.py"
        self.deploy_file.write_text(DEPLOY)
        self.inventory = self.workdir / "inventory.py"
        self.inventory.write_text(inventory_text(hosts, key, known_hosts))

    def deploy(self, artifact: ArtifactRef) -> float:
        version = artifact.components.get("memory-continuity", artifact.version)
        params = self.workdir / "params.json"  # a path: --data would parse values as JSON
        params.write_text(json.dumps({"artifact": str(artifact.path), "sha256": artifact.sha256,
                                      "version": version, "state_name": STATE,
                                      "config": CONFIG}))
        cmd = [str(self.exe), "-y", "--no-wait", "--data", f"params={params}",
               str(self.inventory), str(self.deploy_file)]
        env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH="")
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900,
                              stdin=subprocess.DEVNULL, cwd=self.workdir)
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
            raise RuntimeError(f"pyinfra exited {proc.returncode}:\n{tail}")
        return elapsed


def inventory_text(hosts: list[Host], key: Path, known_hosts: Path) -> str:
    """A pyinfra inventory file: every host with its address, port, user and strict keys."""
    rows = []
    for h in hosts:
        data = {"ssh_hostname": h.host, "ssh_port": h.port, "ssh_user": h.user,
                "ssh_key": str(key), "ssh_known_hosts_file": str(known_hosts),
                "ssh_strict_host_key_checking": "yes"}
        rows.append(f"    ({h.name!r}, {data!r}),")
    return "hosts = [\n" + "\n".join(rows) + "\n]\n"
