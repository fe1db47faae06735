"""`~/.ssh/config` over a real sshd: an alias, a jump host and two hops (marker `docker`).

The inventory names only ssh_config aliases; address, port, user, key and the jump hosts come from
the operator's `~/.ssh/config` (HOME points at a test directory; one block sits in an included
file, the user and key in a `Host fleet-*` block), host keys stay strict on every hop. The jumps
are the harness host itself: its sshd forwards to its own 127.0.0.1:22, so every packet stays on
loopback and the published port, and a deploy that lands proves the channels went through it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fleetcli import FLEET

from lab.harness import hosts

pytestmark = pytest.mark.docker


def fleet(cwd, home, *args, **env):
    proc = subprocess.run([sys.executable, "-c", FLEET, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "HOME": str(home), "SSH_AUTH_SOCK": "", **env})
    return proc.returncode, proc.stdout, proc.stderr


def test_alias_and_jump_host_from_ssh_config(fresh_fleet, artifacts, tmp_path):
    run = fresh_fleet([hosts.HostSpec("edge-7", "opc")])
    edge = run.hosts["edge-7"]
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    known = home / ".ssh" / "known_hosts"
    known.write_text(f"[127.0.0.1]:{edge.port} {edge.host_key}\n")
    (home / ".ssh" / "fleet.d").mkdir()
    (home / ".ssh" / "fleet.d" / "edge.conf").write_text(f"""\
Host fleet-edge
  HostName 127.0.0.1
  Port {edge.port}
""")
    (home / ".ssh" / "config").write_text(f"""\
Include fleet.d/*.conf

Host fleet-inner fleet-loop fleet-twice
  HostName 127.0.0.1
  Port 22

Host fleet-inner
  ProxyJump fleet-edge

Host fleet-twice
  ProxyJump fleet-edge,fleet-loop

Host fleet-*
  User opc
  IdentityFile {run.key.path}
""")
    (tmp_path / "inventory.yaml").write_text("""\
vars: {gateway: {manager: fleet}, timeouts: {connect: 10, command: 60, transfer: 30, ready: 30}}
hosts:
  alias: {host: fleet-edge, state_dir: /home/opc/.openclaw}
  jumped: {host: fleet-inner, state_dir: /home/opc/.openclaw-jumped}
  twice: {host: fleet-twice, state_dir: /home/opc/.openclaw-twice}
""")
    art = artifacts()
    # the inner sshd's key (seen as 127.0.0.1:22 through the jump) is not trusted yet: refused
    code, out, err = fleet(tmp_path, home, "deploy", "-H", "alias,jumped,twice", "--yes",
                           "--artifact", str(art.path), "--json")
    doc = json.loads(out)
    results = {h["host"]: h for h in doc["hosts"]}
    assert code == 1 and results["alias"]["result"] == "installed", (doc, err)
    # the key of the first hop is known, the next hop's not: refused at that hop
    for name in ("jumped", "twice"):
        assert results[name]["result"] == "host_key", results[name]
    assert "via opc@127.0.0.1:" in results["jumped"]["note"]
    with known.open("a") as fh:
        fh.write(f"127.0.0.1 {edge.host_key}\n")
    code, out, err = fleet(tmp_path, home, "deploy", "-H", "alias,jumped,twice", "--json",
                           "--artifact", str(art.path))
    results = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert code == 0, (out, err)
    assert results["alias"]["result"] == "unchanged"
    assert results["jumped"]["result"] == results["twice"]["result"] == "installed"
    # it really landed on the harness host, in each jumped host's own state dir
    for state in ("/home/opc/.openclaw-jumped", "/home/opc/.openclaw-twice"):
        audit = edge.exec(f"cat {state}/fleet/audit.jsonl")
        assert audit.ok and '"installed"' in audit.stdout
    # without the ssh_config the alias means nothing: the config is what made it work
    code, out, _ = fleet(tmp_path, home, "status", "-H", "alias", "--json",
                         FLEET_SSH_CONFIG="")
    assert code == 1 and json.loads(out)["hosts"][0]["result"] == "unreachable"
