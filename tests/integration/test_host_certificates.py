"""A real sshd presenting a CA-signed host certificate, reached through the CLI (marker `docker`).

known_hosts holds only the CA's `@cert-authority` line, as a company's fleet ships it: `fleet
exec` reaches the host while its certificate is valid, and refuses it, saying why, once the
certificate has expired or names another host. OpenSSH's own client, given the same file, is
asked the same question where it is installed, so fleet's verdict is checked against ssh's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from fleetcli import FLEET

from lab.harness import hostcert, hosts

pytestmark = pytest.mark.docker


def fleet(cwd, *args):
    proc = subprocess.run([sys.executable, "-c", FLEET, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "SSH_AUTH_SOCK": "", "FLEET_SSH_CONFIG": ""})
    return proc.returncode, proc.stdout, proc.stderr


def openssh_accepts(host, key_path, known) -> bool | None:
    """Whether OpenSSH's client logs in with the same known_hosts (None: no ssh here)."""
    ssh = shutil.which("ssh")
    if ssh is None:
        if os.environ.get("FLEET_REQUIRE_SSH"):
            pytest.fail("FLEET_REQUIRE_SSH is set but there is no ssh client")
        return None
    proc = subprocess.run(
        [ssh, "-F", "none", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
         "-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null",
         "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10", "-i", str(key_path),
         "-p", str(host.port), f"{host.user}@127.0.0.1", "true"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return proc.returncode == 0


def test_a_ca_signed_host_is_accepted_and_a_bad_certificate_refused_saying_why(fresh_fleet,
                                                                                tmp_path):
    run = fresh_fleet([hosts.HostSpec("signed", "opc")])
    host = run.hosts["signed"]
    ca = ed25519.Ed25519PrivateKey.generate()
    ca_line = ("@cert-authority [127.0.0.1]:* " + ca.public_key().public_bytes(
        Encoding.OpenSSH, PublicFormat.OpenSSH).decode() + "\n")
    known = tmp_path / "known_hosts"
    known.write_text(ca_line)
    inventory = yaml.safe_load(run.inventory_path.read_text())
    inventory["vars"]["known_hosts"] = str(known)
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(inventory))
    now = int(time.time())
    cases = [(["127.0.0.1"], now - 60, now + 3600, None),
             (["127.0.0.1"], now - 7200, now - 3600, "expired at "),
             (["db.example.com"], now - 60, now + 3600, "is for db.example.com, not 127.0.0.1")]
    for principals, after, before, reason in cases:
        hostcert.present(host, hostcert.sign(host.host_key, ca, principals, after, before,
                                             key_id="signed-cert"))
        code, out, err = fleet(tmp_path, "exec", "-H", "signed", "--json", "--yes", "id -un")
        result = json.loads(out)["hosts"][0]
        if reason is None:
            assert code == 0 and result["data"]["stdout"].strip() == "opc", (result, err)
        else:
            assert code == 1 and result["result"] == "host_key", (result, err)
            note = result["note"]
            assert 'host certificate refused: its certificate "signed-cert"' in note, note
            assert reason in note and str(known) in note and f"[127.0.0.1]:{host.port}" in note
        assert openssh_accepts(host, run.key.path, known) in (None, reason is None)
    assert known.read_text() == ca_line  # strict: nothing recorded
