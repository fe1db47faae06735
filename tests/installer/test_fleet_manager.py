"""The fleet manager stops and starts our gateway itself (no `fleet.gateway restart` wrapper):
stop by the pidfile's lock holder with SIGKILL after the grace period, and a gateway that dies
before it is ready fails the deploy at once, with its log, instead of after the ready timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from deploy_helpers import REPO, build, make_tree, release_of

from fleet.gateway import process
from fleet.gateway.layout import Layout

HOLDER = """
import signal, sys, time
sys.path.insert(0, {repo!r})
from pathlib import Path
from fleet.gateway.pidfile import PidFile
if sys.argv[2] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
PidFile(Path(sys.argv[1]) / "run" / "gateway.pid").acquire()
print("locked", flush=True)
time.sleep(60)
"""


def hold_pidfile(state, mode):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(repo=str(REPO)), str(state),
                             mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_stop_terminates_the_lock_holder_and_reports_nothing_running_after(tmp_path):
    proc = hold_pidfile(tmp_path, "polite")
    assert process.stop(Layout(tmp_path), grace_s=5) == (proc.pid, "terminated")
    assert proc.wait(timeout=5) != 0
    assert process.stop(Layout(tmp_path)) is None


def test_stop_kills_a_gateway_ignoring_sigterm_and_clears_its_files(tmp_path):
    proc = hold_pidfile(tmp_path, "stubborn")
    layout = Layout(tmp_path)
    layout.socket.write_text("")
    layout.ready_file.write_text(json.dumps({"pid": proc.pid, "ready": True}))
    assert process.stop(layout, grace_s=0.3) == (proc.pid, "killed")
    assert proc.wait(timeout=5) == -9
    assert not layout.socket.exists() and not layout.ready_file.exists()


def test_killing_a_gateway_leaves_a_ready_file_naming_another_live_gateway(tmp_path):
    """Every killer checks the pid first: a ready file that names another (live) gateway is
    that gateway's, and removing it would make a healthy host look not ready."""
    proc = hold_pidfile(tmp_path, "stubborn")
    layout = Layout(tmp_path)
    other = json.dumps({"pid": os.getpid(), "ready": True, "release": "x"}, sort_keys=True)
    layout.ready_file.write_text(other + "\n")
    assert process.stop(layout, grace_s=0.3) == (proc.pid, "killed")
    assert proc.wait(timeout=5) == -9
    assert layout.ready_file.read_text() == other + "\n"


def test_gateway_dying_at_start_fails_the_deploy_at_once_with_its_log(sandbox, artifacts,
                                                                      tmp_path):
    base = artifacts()
    sandbox.deploy(base, hosts="a")
    tree = make_tree(tmp_path / "dying", bump="5.0.3")
    with open(tree / "fleet" / "gateway" / "service.py", "a") as fh:
        fh.write('\nraise SystemExit("this gateway cannot start: test fault")\n')
    dying = build(tree, tmp_path / "dist")
    res = sandbox.deploy(dying, hosts="a")["a"]
    assert res.result == "rolled_back" and not res.ok, res.note
    assert "exited with code 1 before it was ready" in res.note, res.note
    assert "this gateway cannot start: test fault" in res.note, res.note
    assert sandbox.current("a") == release_of(base)
    assert sandbox.health("a")["versions"]["memory-continuity"] == base.version
