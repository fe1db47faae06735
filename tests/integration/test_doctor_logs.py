"""`invoke doctor` and `invoke logs` over SSH against the session harness (read-only)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from integration_helpers import REPO, invoke_task

pytestmark = pytest.mark.docker

NAMES = ["cloud", "pi", "edge-1"]


def test_doctor_over_ssh_reports_every_host_in_one_document(deployed):
    run = invoke_task("doctor", "--inventory", str(deployed.inventory_path), "--hosts", "all")
    assert run.data is not None, run.stderr[-2000:]
    assert run.code == run.data["exit_code"] and run.data["exit_code"] in (0, 1, 2)
    hosts = {h["host"]: h for h in run.data["hosts"]}
    assert set(hosts) == set(NAMES)
    for name, host in hosts.items():
        assert host["ok"], (name, host)  # reached
        checks = {c["check"]: c for c in host["data"]["checks"]}
        assert checks["gateway"]["severity"] == "ok", (name, checks["gateway"])
        assert checks["plugin memory-continuity"]["severity"] == "ok"
        assert checks["python"]["message"].startswith("python 3.")
        assert abs(checks["clock"]["skew_s"]) < 5  # containers share the machine's clock
        assert deployed.hosts[name].state_dir in checks["state_dir"]["message"]
        assert host["data"]["continuity"]["targets"], name  # at least the default agent


def test_logs_over_ssh_prefix_each_host(deployed):
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(REPO), "logs", "--inventory",
         str(deployed.inventory_path), "--hosts", "all", "-n", "3"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "SSH_AUTH_SOCK": ""})
    assert proc.returncode == 0, proc.stderr[-2000:]
    prefixes = {line.split(" | ", 1)[0].strip() for line in proc.stdout.splitlines()}
    assert prefixes == set(NAMES)
    assert all(len([ln for ln in proc.stdout.splitlines() if ln.startswith(n + " ")]) <= 3
               for n in NAMES)
