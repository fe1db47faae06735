"""`fleet doctor` / `invoke doctor` against local sandbox hosts, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from deploy_helpers import REPO, stop_gateways

INVENTORY = """\
vars: {connection: local, gateway: {manager: fleet}, timeouts: {ready: 30, command: 120}}
hosts:
  a: {state_dir: .fleet/hosts/a}
  b: {state_dir: .fleet/hosts/b}
  closed: {connection: ssh, host: 127.0.0.1, port: 1, user: nobody, state_dir: /tmp/x,
           timeouts: {connect: 3}}
groups:
  sandbox: {hosts: [a, b]}
"""


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    yield tmp_path
    stop_gateways([tmp_path / ".fleet" / "hosts" / h for h in ("a", "b")])


def fleet(workdir, *args):
    proc = subprocess.run([sys.executable, "-c", "from fleet.cli.program import main; main()",
                           *args], cwd=workdir, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def gw_call(state, *args):
    env = {"PYTHONPATH": str(state / "fleet" / "current")}
    proc = subprocess.run([sys.executable, "-m", "fleet.gateway", "--state-dir", str(state),
                           "call", "--json", *args], capture_output=True, text=True, timeout=60,
                          env=env, cwd="/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)["result"]


def doctor_json(workdir, hosts="sandbox"):
    code, out, err = fleet(workdir, "doctor", "--hosts", hosts, "--json")
    return code, json.loads(out), err


def test_fleet_doctor_exit_codes_follow_the_worst_host(workdir, artifacts):
    art = artifacts()
    code, _, err = fleet(workdir, "deploy", "--hosts", "sandbox", "--artifact", str(art.path))
    assert code == 0, err
    a, b = workdir / ".fleet" / "hosts" / "a", workdir / ".fleet" / "hosts" / "b"
    for state in (a, b):
        state.chmod(0o700)
    # a session on a: its state file is written; b never ran a session
    key = gw_call(a, "session.start", "agentId=main")["sessionKey"]
    gw_call(a, "session.turn", f"sessionKey={key}", "prompt=Ship the doctor",
            'steps:=["Working on it."]')
    code, doc, _ = doctor_json(workdir)
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert code == 0 and doc["exit_code"] == 0 and doc["severity"] in ("ok", "info"), doc
    assert doc["schema"] == 1 and doc["action"] == "doctor" and doc["ok"] is True
    checks = {c["check"]: c for c in hosts["a"]["data"]["checks"]}
    assert {"python", "disk", "state_dir", "gateway", "plugin memory-continuity", "plugin mc",
            "deploy_lock", "temp_files", "clock"} <= set(checks)
    assert checks["plugin memory-continuity"]["message"] == \
        f"memory-continuity {art.components['memory-continuity']} loaded"
    assert abs(checks["clock"]["skew_s"]) < 5
    main_a = hosts["a"]["data"]["continuity"]["targets"][0]
    assert main_a["agent"] == "main" and main_a["severity"] == "info"  # the last answer
    assert {f["check"] for f in main_a["findings"]} >= {"exists", "stale", "sections"}

    # warnings: a result waits for review in a child's state file on b
    child = b / "workspace" / "memory" / "subagents" / "kid" / "CURRENT_STATE.md"
    child.parent.mkdir(parents=True)
    text = (a / "workspace" / "memory" / "CURRENT_STATE.md").read_text()
    head, _, _ = text.partition("## Unsurfaced Results")
    child.write_text(head + '## Unsurfaced Results\n[2026-03-31T11:00:00.000Z] Subagent "kid" '
                     "completed.\n  Result: The kid found the bug\n")
    code, doc, _ = doctor_json(workdir)
    assert code == 1 and doc["severity"] == "warning"
    b_host = {h["host"]: h for h in doc["hosts"]}["b"]
    b_targets = {t["child"]: t for t in b_host["data"]["continuity"]["targets"]}
    assert b_targets["kid"]["severity"] == "warning"

    # critical: b's gateway is stopped; the table names the host and the check
    subprocess.run([sys.executable, "-m", "fleet.gateway", "--state-dir", str(b), "stop"],
                   env={"PYTHONPATH": str(b / "fleet" / "current")}, cwd="/", timeout=60,
                   check=True, capture_output=True)
    code, out, _ = fleet(workdir, "doctor", "--hosts", "sandbox")
    assert code == 2
    assert "Overall status: CRITICAL" in out
    line = next(row for row in out.splitlines() if "│ b" in row and "gateway" in row)
    assert "CRITICAL" in line and "not ready" in line


def test_fleet_doctor_unreachable_and_uninstalled_hosts_are_critical(workdir):
    code, doc, _ = doctor_json(workdir, "a,closed")
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert code == 2 and doc["exit_code"] == 2 and doc["ok"] is False
    # a host's `ok`: it was reached; its `result`: its severity
    assert hosts["closed"]["ok"] is False and hosts["closed"]["result"] == "critical"
    assert hosts["closed"]["data"]["checks"][0]["check"] == "reach"
    assert hosts["a"]["ok"] is True and hosts["a"]["result"] == "critical"
    assert hosts["a"]["data"]["checks"][0]["message"] == \
        "fleet is not installed; run a deploy first"


def test_doctor_task_has_help_through_invoke(workdir):
    proc = subprocess.run([sys.executable, "-m", "invoke", "-r", str(REPO), "--help", "doctor"],
                          cwd=workdir, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--json" in proc.stdout and "2 critical" in proc.stdout
