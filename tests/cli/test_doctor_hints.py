"""What `fleet doctor` tells an operator to run works when pasted: a host's own hint ("fix:
`invoke restart`") comes back naming the host and its inventory, from any directory."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from deploy_helpers import stop_gateways

FLEET = "import sys; sys.argv[0] = 'fleet'; from fleet.cli.program import main; main()"
INVENTORY = """\
vars: {connection: local, gateway: {manager: fleet}, timeouts: {ready: 30, command: 120}}
hosts:
  box: {state_dir: .fleet/sandbox/box}
groups:
  sandbox: {hosts: [box]}
"""


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops/inventory.yaml").write_text(INVENTORY)
    yield tmp_path / "ops"
    stop_gateways([tmp_path / "ops/.fleet/sandbox/box"])


def fleet(cwd: Path, *args: str) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-c", FLEET, *args, "--json"], cwd=cwd,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    return proc.returncode, json.loads(proc.stdout)


def test_a_hosts_fix_hint_names_the_host_and_inventory_and_works_pasted(workdir, artifacts):
    code, doc = fleet(workdir, "deploy", "--artifact", str(artifacts().path))
    assert code == 0, doc
    supervisor = json.loads((workdir / ".fleet/sandbox/box/run/supervisor.pid").read_text())
    os.kill(supervisor["pid"], signal.SIGKILL)  # the gateway goes on, unsupervised
    code, doc = fleet(workdir, "doctor")
    checks = {c["check"]: c for c in doc["hosts"][0]["data"]["checks"]}
    hint = re.search(r"fix: `([^`]+)`", checks["supervisor"]["message"])
    assert hint, checks["supervisor"]
    words = shlex.split(hint.group(1))
    assert words[:4] == ["fleet", "restart", "-H", "box"], words
    assert words[4:] == ["--inventory", str(workdir / "inventory.yaml")], words
    code, doc = fleet(workdir.parent, *words[1:])  # pasted elsewhere: it works
    assert code == 0 and doc["hosts"][0]["result"] == "restarted", doc
    code, doc = fleet(workdir, "doctor")
    checks = {c["check"]: c for c in doc["hosts"][0]["data"]["checks"]}
    assert checks["supervisor"]["severity"] == "ok", checks["supervisor"]
