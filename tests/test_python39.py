"""The host side promises Python 3.9: deploy with 3.9 and drive the gateway with it."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

import pytest
from deploy_helpers import SANDBOX_INVENTORY, Sandbox, release_of, stop_gateways


def python39() -> str | None:
    """A working Python 3.9 (a pyenv shim on PATH may exist without being runnable)."""
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9")))
    candidates += [p for p in [shutil.which("python3.9")] if p]
    for candidate in candidates:
        try:
            check = "import sys; assert sys.version_info[:2] == (3, 9)"
            ok = subprocess.run([candidate, "-c", check], capture_output=True,
                                timeout=30).returncode == 0
        except OSError:
            ok = False
        if ok:
            return candidate
    return None


PY39 = python39()


@pytest.mark.skipif(PY39 is None, reason="no Python 3.9 interpreter on this machine")
def test_a_python_3_9_host_installs_and_runs_sessions(tmp_path, artifacts):
    inventory = SANDBOX_INVENTORY.replace("  connection: local\n",
                                          f"  connection: local\n  python: {PY39}\n")
    box = Sandbox(tmp_path, inventory)
    art = artifacts()
    try:
        result = box.deploy(art, hosts="a")["a"]
        assert result.ok and result.result == "installed", result.note
        assert box.current("a") == release_of(art)
        pid = box.health("a")["pid"]
        assert "3.9" in os.path.basename(os.readlink(f"/proc/{pid}/exe"))

        state = box.state("a")
        env = dict(os.environ, PYTHONPATH=str(state / "fleet" / "current"))

        def call(*args: str) -> dict:
            proc = subprocess.run([PY39, "-m", "fleet.gateway", "--state-dir", str(state),
                                   "call", "--json", *args], capture_output=True, text=True,
                                  env=env, timeout=60, cwd="/")
            assert proc.returncode == 0, proc.stdout + proc.stderr
            return json.loads(proc.stdout)["result"]

        key = call("session.start", "agentId=main")["sessionKey"]
        call("session.turn", f"sessionKey={key}", "prompt=Ship the 3.9 fleet",
             'steps:=["On it."]')
        child = call("subagent.spawn", f"parentSessionKey={key}", "task=Check the Pi",
                     'steps:=["The Pi runs 3.9 fine."]')
        assert "Ship the 3.9 fleet" in child["turn"]["injectedContext"]
        call("subagent.end", f"childSessionKey={child['childSessionKey']}", "outcome=ok")
        text = call("command", "command=/mc state")["text"]
        assert "Ship the 3.9 fleet" in text
        assert "The Pi runs 3.9 fine." in (state / "workspace" / "memory" /
                                           "CURRENT_STATE.md").read_text()
    finally:
        stop_gateways([box.state(n) for n in box.inventory.hosts])
