"""The tasks as a user runs them: the `fleet` console script (same namespace as `invoke`)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from deploy_helpers import release_of, stop_gateways

INVENTORY = """\
vars: {connection: local, gateway: {manager: fleet}, timeouts: {ready: 30, command: 120}}
hosts:
  good: {state_dir: .fleet/hosts/good}
  nopython: {state_dir: .fleet/hosts/nopython, python: /nonexistent/python3}
groups:
  pair: {hosts: [good, nopython]}
"""


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    yield tmp_path
    stop_gateways([tmp_path / ".fleet" / "hosts" / name for name in ("good", "nopython", "mine")])


def fleet(workdir, *args):
    proc = subprocess.run([sys.executable, "-c", "from fleet.cli.program import main; main()",
                           *args], cwd=workdir, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def test_deploy_json_reports_every_host_and_exit_code_says_if_all_succeeded(workdir, artifacts):
    art = artifacts()
    code, out, err = fleet(workdir, "deploy", "--hosts", "pair", "--artifact", str(art.path),
                           "--json")
    doc = json.loads(out)
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert code == 1 and doc["ok"] is False
    assert hosts["good"]["result"] == "installed" and hosts["good"]["ok"]
    assert hosts["good"]["to"]["release"] == release_of(art)
    assert set(hosts["good"]["steps"]) >= {"connect", "upload", "install", "host.ready"}
    assert hosts["nopython"]["result"] == "failed"
    assert "/nonexistent/python3" in hosts["nopython"]["note"]
    assert doc["artifact"]["sha256"] == art.sha256
    assert "good" in err  # live progress goes to stderr, not into the JSON

    code, out, _ = fleet(workdir, "deploy", "--hosts", "good", "--artifact", str(art.path),
                         "--json")
    assert code == 0 and json.loads(out)["hosts"][0]["result"] == "unchanged"

    log = [json.loads(x) for x in (workdir / ".fleet" / "deploy-log.jsonl").read_text()
           .splitlines()]
    assert [entry["ok"] for entry in log] == [False, True]
    assert {h["host"]: h["result"] for h in log[0]["hosts"]} == {"good": "installed",
                                                                  "nopython": "failed"}
    assert log[1]["artifact"]["sha256"] == art.sha256 and log[1]["action"] == "deploy"

    code, out, _ = fleet(workdir, "deploy", "--hosts", "good", "--artifact", str(art.path),
                         "--retry-failed")
    assert code == 0 and "nothing to retry" in out  # the last deploy succeeded on `good`
    code, out, _ = fleet(workdir, "deploy", "--hosts", "pair", "--artifact", str(art.path),
                         "--json")
    code, out, _ = fleet(workdir, "deploy", "--hosts", "pair", "--artifact", str(art.path),
                         "--retry-failed", "--json")
    assert code == 1 and [h["host"] for h in json.loads(out)["hosts"]] == ["nopython"]


def test_status_table_and_unknown_host_message(workdir, artifacts):
    art = artifacts()
    fleet(workdir, "deploy", "--hosts", "good", "--artifact", str(art.path))
    code, out, _ = fleet(workdir, "status", "--hosts", "good")
    assert code == 0 and "good" in out and art.version in out
    code, out, _ = fleet(workdir, "status", "--hosts", "good", "--json")
    assert json.loads(out)["hosts"][0]["data"]["ready"] is True
    code, _, err = fleet(workdir, "status", "--hosts", "goood")
    assert code == 2 and "did you mean 'good'" in err and "nopython" in err


def test_dry_run_prints_plan(workdir, artifacts):
    art = artifacts()
    code, out, _ = fleet(workdir, "deploy", "--hosts", "good", "--artifact", str(art.path),
                         "--dry-run")
    assert code == 0 and "install" in out and "nothing installed" in out
    assert not (workdir / ".fleet" / "hosts" / "good" / "fleet" / "current").exists()
