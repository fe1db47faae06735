"""Real gateway processes in temp state dirs, driven through the CLI as an operator would."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from gateway_helpers import RECORDER, REPO, call, run_cli, write_plugin

SLOW_COMMAND = """
import time
def register(api):
    def slow(ctx):
        marker, seconds = ctx["args"].split()
        open(marker, "w").close()  # the test's cue: the request is being handled now
        time.sleep(float(seconds))
        return {"text": "finished"}
    api.register_command("slow", slow)
"""
# Runs the gateway CLI with a connect that leaves a mark on each failed attempt (argv[1]: the
# mark's path), so a test can tell when a client is retrying a socket that is not there yet.
MARKED_CLIENT = """
import sys
from pathlib import Path
from fleet.gateway import __main__ as cli, client
mark, connect = Path(sys.argv.pop(1)), client.connect_unix
def marked(*a, **kw):
    try:
        return connect(*a, **kw)
    except OSError:
        with mark.open("a") as fh:
            fh.write("failed attempt\\n")
        raise
client.connect_unix = marked
sys.exit(cli.main(sys.argv[1:]))
"""


def wait_for_file(path: Path, timeout: float = 30) -> None:
    """Until `path` exists; fails the test naming it after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout:g}s"
        time.sleep(0.02)


def init_with(tmp_path: Path, state: Path, **plugins: str) -> None:
    src = tmp_path / "plugins"
    for pid, code in plugins.items():
        write_plugin(src, pid, code, version="2.0.0")
    res = run_cli(state, "init", "--link-plugins-from", str(src))
    assert res.returncode == 0, res.stderr


def start(state: Path, gateways, *extra: str) -> subprocess.CompletedProcess:
    res = run_cli(state, "start", *extra)
    if res.returncode == 0:
        gateways.append(state)
    return res


def status(state: Path) -> dict:
    return json.loads(run_cli(state, "status", "--json").stdout)


def test_start_status_stop_and_stop_again(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    res = start(state, gateways, "--expect", "recorder=2.0.0")
    assert res.returncode == 0, res.stderr
    assert "ready: recorder 2.0.0" in res.stdout
    st = status(state)
    assert st["running"] and st["health"]["versions"] == {"recorder": "2.0.0"}
    assert st["health"]["releaseRoot"] == str(REPO.resolve())
    pid = st["pid"]
    res = run_cli(state, "stop")
    assert res.returncode == 0 and f"gateway pid {pid} stopped" in res.stdout
    res = run_cli(state, "stop")
    assert res.returncode == 0
    assert res.stdout.strip() == f"gateway is not running (state dir {state})"
    assert run_cli(state, "status").returncode == 3
    assert not (state / "run" / "gateway.sock").exists()


def test_second_start_refuses_naming_the_running_pid(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    assert start(state, gateways).returncode == 0
    pid = status(state)["pid"]
    res = run_cli(state, "start")
    assert res.returncode == 1
    assert f"gateway already running (pid {pid}" in res.stderr
    assert status(state)["pid"] == pid


def test_kill_9_leaves_a_stale_pidfile_that_start_recognises(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    assert start(state, gateways).returncode == 0
    pid = status(state)["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 3
    while status(state)["running"] and time.monotonic() < deadline:
        time.sleep(0.02)
    record = json.loads((state / "run" / "gateway.pid").read_text())  # stale, not removed
    assert record["pid"] == pid and record["argv"][-1] == "run"
    assert status(state)["running"] is False
    res = start(state, gateways)
    assert res.returncode == 0, res.stderr
    assert status(state)["pid"] != pid
    assert call(state, "health")["ok"]


def test_plugin_raising_on_import_makes_start_fail_with_its_error(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER,
              broken="raise RuntimeError('release is broken: missing module')\n")
    res = start(state, gateways)
    assert res.returncode == 1
    assert "plugin load failed" in res.stderr
    assert "RuntimeError: release is broken: missing module" in res.stderr
    assert "gateway.log (tail)" in res.stderr
    assert status(state)["running"] is False  # the failed gateway is not left behind


def test_expect_mismatch_fails_start(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    res = start(state, gateways, "--expect", "recorder=9.9.9", "--json")
    assert res.returncode == 1
    assert "recorder is 2.0.0 (want 9.9.9)" in json.loads(res.stdout)["error"]
    assert status(state)["running"] is False


def snapshot_files(state: Path) -> dict:
    skip = {"run", "logs"}
    return {
        str(p.relative_to(state)): p.read_bytes()
        for p in sorted(state.rglob("*"))
        if p.is_file() and p.relative_to(state).parts[0] not in skip
        and not p.name.endswith(".lock")
    }


def test_restart_keeps_every_transcript_and_state_file(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    assert start(state, gateways).returncode == 0
    parent = call(state, "session.start")["result"]["sessionKey"]
    call(state, "session.turn", {"sessionKey": parent, "prompt": "plan", "steps": ["planned"]})
    child = call(state, "subagent.spawn", {"parentSessionKey": parent, "task": "t",
                                           "steps": [{"compaction": True}]})["result"]
    (state / "workspace" / "memory").mkdir(parents=True, exist_ok=True)
    (state / "workspace" / "memory" / "CURRENT_STATE.md").write_text("# state\n")
    before = snapshot_files(state)
    old_pid = status(state)["pid"]
    res = run_cli(state, "restart", "--json")
    assert res.returncode == 0, res.stderr
    health = json.loads(res.stdout)
    assert health["pid"] != old_pid and health["previous"]["stopped"] is True
    after = snapshot_files(state)
    assert {k: after.get(k) for k in before} == before
    # sessions survive: the child's pending announce completes after the restart
    end = call(state, "subagent.end", {"childSessionKey": child["childSessionKey"]})["result"]
    assert end["announce"]["state"] == "pending"
    turn = call(state, "session.turn", {"sessionKey": child["childSessionKey"],
                                        "prompt": "go on", "steps": ["the answer"]})["result"]
    assert turn["announce"]["state"] == "delivered"
    msgs = call(state, "transcript", {"sessionKey": parent})["result"]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert "the answer" in msgs[-1]["content"][0]["text"]


def test_stop_lets_an_in_flight_request_finish(tmp_path, state, gateways):
    init_with(tmp_path, state, slow=SLOW_COMMAND)
    assert start(state, gateways).returncode == 0
    env = dict(os.environ, PYTHONPATH=str(REPO))
    handling = tmp_path / "handling"
    pending = subprocess.Popen(
        [sys.executable, "-m", "fleet.gateway", "--state-dir", str(state), "call", "command",
         f"command=/slow {handling} 0.8"], stdout=subprocess.PIPE, text=True, env=env)
    wait_for_file(handling)
    res = run_cli(state, "stop")
    assert res.returncode == 0 and "terminated" in res.stdout
    out, _ = pending.communicate(timeout=5)
    assert pending.returncode == 0
    assert out == "finished\n"


def test_client_call_survives_the_restart_window(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    attempts = tmp_path / "attempts"
    waiting = subprocess.Popen(
        [sys.executable, "-c", MARKED_CLIENT, str(attempts), "--state-dir", str(state), "call",
         "health", "--retry", "30"], stdout=subprocess.PIPE, text=True, env=env)
    wait_for_file(attempts)  # the client has found no socket and is retrying
    assert start(state, gateways).returncode == 0
    out, _ = waiting.communicate(timeout=10)
    assert waiting.returncode == 0 and json.loads(out)["result"]["ready"] is True
    res = run_cli(state, "stop")
    assert res.returncode == 0
    unreachable = run_cli(state, "call", "health", "--retry", "0")
    assert unreachable.returncode == 3
    assert "not reachable" in json.loads(unreachable.stdout)["error"]


def test_call_cli_exit_code_follows_ok_and_parses_arguments(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    assert start(state, gateways).returncode == 0
    res = run_cli(state, "call", "session.start", "agentId=ops")
    assert res.returncode == 0
    key = json.loads(res.stdout)["result"]["sessionKey"]
    assert key == "agent:ops:main"
    res = run_cli(state, "call", "session.turn", f"sessionKey={key}", "prompt=42",
                  'steps:=["x", {"compaction": true}]')
    assert res.returncode == 0, res.stdout
    res = run_cli(state, "call", "session.turn", "sessionKey=agent:ops:nope")
    assert res.returncode == 1 and "unknown session" in json.loads(res.stdout)["error"]


def make_release(root: Path, name: str) -> Path:
    """A release dir holding a copy of the host-side packages, as the installer unpacks one."""
    rel = root / "releases" / name
    ignore = shutil.ignore_patterns("__pycache__")
    (rel / "fleet").mkdir(parents=True)
    shutil.copy(REPO / "fleet" / "__init__.py", rel / "fleet" / "__init__.py")
    for pkg in ("continuity", "plugins", "gateway"):
        shutil.copytree(REPO / "fleet" / pkg, rel / "fleet" / pkg, ignore=ignore)
    return rel


MULTILINE_COMMAND = """
def register(api):
    api.register_command("two", lambda ctx: {"text": "line one\\nline two: " + ctx["args"]})
"""


def test_call_command_prints_text_and_json_only_when_asked(tmp_path, state, gateways):
    init_with(tmp_path, state, two=MULTILINE_COMMAND)
    assert start(state, gateways).returncode == 0
    res = run_cli(state, "call", "command", "command=/two a b")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "line one\nline two: a b\n"
    res = run_cli(state, "call", "command", "command=/two x", "--json")
    assert json.loads(res.stdout)["result"]["text"] == "line one\nline two: x"
    res = run_cli(state, "call", "health")  # structured ops keep printing JSON
    assert json.loads(res.stdout)["result"]["ready"] is True
    run_cli(state, "stop")
    res = run_cli(state, "call", "command", "command=/two", "--retry", "0")
    assert res.returncode == 3 and res.stdout == "" and "not reachable" in res.stderr


def test_call_help_documents_the_argument_syntax(state):
    res = run_cli(state, "call", "--help")
    assert res.returncode == 0
    assert "key:=json" in res.stdout and "key=value" in res.stdout
    assert "'steps:=[" in res.stdout and "Exit status" in res.stdout


def test_a_running_gateway_keeps_its_release_when_current_is_switched(tmp_path, gateways):
    state = tmp_path / ("s" * 90) / "state"  # socket path longer than sun_path allows
    assert len(str(state / "run" / "gateway.sock")) > 108
    init_with(tmp_path, state, recorder=RECORDER)
    r1, r2 = make_release(tmp_path, "r1"), make_release(tmp_path, "r2")
    current = tmp_path / "current"
    current.symlink_to(r1)
    res = start(state, gateways, "--release", str(current), "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["releaseRoot"] == str(r1.resolve())
    tmp_link = tmp_path / "current.tmp"
    tmp_link.symlink_to(r2)
    os.replace(tmp_link, current)  # the installer's atomic switch
    assert call(state, "health")["result"]["release"] == "r1"
    res = run_cli(state, "restart", "--release", str(current), "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert call(state, "health")["result"]["release"] == "r2"


def test_stop_kills_a_gateway_that_ignores_sigterm_after_the_deadline(tmp_path, state, gateways):
    stubborn = ("import signal\n"
                "def register(api):\n"
                "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n")
    init_with(tmp_path, state, stubborn=stubborn)
    assert start(state, gateways).returncode == 0
    pid = status(state)["pid"]
    res = run_cli(state, "stop", "--timeout", "0.5")
    assert res.returncode == 0
    assert res.stdout.strip() == f"gateway pid {pid} stopped (killed)"
    assert status(state)["running"] is False
    assert not (state / "run" / "gateway.sock").exists()
    assert start(state, gateways).returncode == 0
    assert "(killed)" in run_cli(state, "stop", "--timeout", "0.2").stdout


def test_concurrent_starts_run_exactly_one_gateway(tmp_path, state, gateways):
    init_with(tmp_path, state, recorder=RECORDER)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "fleet.gateway", "--state-dir", str(state), "start"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(2)]
    gateways.append(state)
    results = [(p.wait(timeout=20), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 1], results
    pid = status(state)["pid"]
    loser = [err for code, err in results if code == 1][0]
    assert f"gateway already running (pid {pid}" in loser
