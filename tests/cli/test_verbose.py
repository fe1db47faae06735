"""`fleet -v` (and Invoke's `-e`/`--echo`): each command sent to a host, and how it ended, on
stderr; stdout stays the report (one JSON document with --json)."""

from __future__ import annotations

import json
import subprocess
import sys

from fleetcli import FLEET

INVENTORY = """\
hosts:
  sb1: {connection: local, state_dir: .fleet/sandbox/sb1}
  sb2: {connection: local, state_dir: .fleet/sandbox/sb2}
groups:
  sandbox: {hosts: [sb1, sb2]}
"""


def fleet(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", FLEET, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_verbose_shows_each_remote_command_and_its_end(tmp_path):
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    for flag in ("-v", "--verbose", "-e"):
        proc = fleet(tmp_path, flag, "status", "--json")
        assert proc.returncode in (0, 1), proc.stderr
        assert [h["host"] for h in json.loads(proc.stdout)["hosts"]] == ["sb1", "sb2"]
        lines = proc.stderr.splitlines()
        for host in ("sb1", "sb2"):
            sent = [line for line in lines if line.startswith(f"{host} $ ")]
            assert len(sent) == 1 and "fleet.installer" in sent[0], proc.stderr
            assert any(line.startswith(f"{host} exit 0 after ") for line in lines), proc.stderr
    quiet = fleet(tmp_path, "status", "--json")
    assert "$ " not in quiet.stderr
