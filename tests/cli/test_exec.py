"""`fleet exec`: one ad-hoc command on the selected hosts, through the `fleet` script."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys

from fleetcli import FLEET


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def inventory(tmp_path) -> None:
    (tmp_path / "inventory.yaml").write_text(f"""\
hosts:
  sb1: {{connection: local, state_dir: .fleet/sandbox/sb1}}
  sb2: {{connection: local, state_dir: .fleet/sandbox/sb2}}
  gone: {{host: 127.0.0.1, port: {free_port()}, timeouts: {{connect: 5}}}}
groups:
  sandbox: {{hosts: [sb1, sb2]}}
""")


def fleet(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", FLEET, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_exec_prints_each_hosts_output_prefixed_and_exits_by_the_worst(tmp_path):
    inventory(tmp_path)
    proc = fleet(tmp_path, "exec", "-H", "sandbox", "echo out; echo oops >&2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for host in ("sb1", "sb2"):
        assert f"{host} | out" in lines and f"{host} | oops" in proc.stderr.splitlines()
        assert any(line.startswith(f"{host} | exit 0") for line in lines)
    assert lines[-1].startswith("OK: 2 ok")
    proc = fleet(tmp_path, "exec", "-H", "sandbox", "exit 3")
    assert proc.returncode == 1 and "sb1 | exit 3" in proc.stdout


def test_exec_json_and_an_unreachable_host_among_others(tmp_path):
    inventory(tmp_path)
    proc = fleet(tmp_path, "exec", "-H", "sb1,gone", "--json", "--yes", "printf '\\033[31mred'")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["exit_code"] == 1
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert hosts["sb1"]["data"] == {"exit_code": 0, "stdout": "\x1b[31mred", "stderr": ""}
    assert hosts["gone"]["result"] == "unreachable" and not hosts["gone"]["ok"]
    # on a terminal's stream, what a host printed is shown escaped, never interpreted
    proc = fleet(tmp_path, "exec", "-H", "sb1", "printf '\\033[31mred'")
    assert "\x1b" not in proc.stdout and "red" in proc.stdout


def test_exec_without_a_command_is_a_usage_error(tmp_path):
    inventory(tmp_path)
    proc = fleet(tmp_path, "exec", "-H", "sandbox", "  ")
    assert proc.returncode == 2 and "give the command to run" in proc.stderr


def test_help_flags_print_the_tasks_help_and_run_nothing(tmp_path):
    inventory(tmp_path)
    for args in (["--help"], ["-h"], ["-H", "sandbox", "touch ran", "--help"],
                 ["-h", "-H", "sandbox"]):
        proc = fleet(tmp_path, "exec", *args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Run one shell command on every selected host" in proc.stdout, args
        assert "--hosts" in proc.stdout and "--verbose" not in proc.stdout, args
    proc = fleet(tmp_path, "exec", "-H", "sandbox", "-h", "touch ran")  # help, then a word
    assert proc.returncode == 2 and "touch ran" in proc.stderr
    assert not list(tmp_path.rglob("ran")) and not (tmp_path / ".fleet").exists()


def test_a_core_flag_is_never_the_command(tmp_path):
    inventory(tmp_path)
    proc = fleet(tmp_path, "exec", "-H", "sandbox", "--json", "-v")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 2 and doc["hosts"] == [], doc
    assert "needs its command" in doc["error"]
    proc = fleet(tmp_path, "exec", "-v", "-H", "sb1", "echo hi")  # -v: echo each command
    assert proc.returncode == 0 and "sb1 | hi" in proc.stdout and "$ echo hi" in proc.stderr
    proc = fleet(tmp_path, "exec", "-H", "sandbox", "--jsn")  # a mistyped flag runs nothing
    assert proc.returncode == 2 and "starts with a dash" in proc.stderr
    assert "sb1" not in proc.stdout


def test_a_program_whose_name_starts_with_a_dash_runs_after_a_space(tmp_path):
    inventory(tmp_path)
    (tmp_path / "bin").mkdir()
    script = tmp_path / "bin" / "-hello"
    script.write_text("#!/bin/sh\necho dashed\n")
    script.chmod(0o755)
    proc = subprocess.run([sys.executable, "-c", FLEET, "exec", "-H", "sb1", " -hello"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert proc.returncode == 0 and "sb1 | dashed" in proc.stdout, proc.stderr


def released_as_told(note: str, cwd) -> subprocess.CompletedProcess:
    """Run the `fleet lock.release ...` a refusal names, as pasted, from another directory."""
    words = shlex.split(note.split("When the work is done: ", 1)[1])
    assert words[:2] == ["fleet", "lock.release"], note
    cwd.mkdir(exist_ok=True)
    return fleet(cwd, *words[1:])


def test_exec_is_refused_on_a_locked_host_until_the_named_release(tmp_path):
    inventory(tmp_path)
    proc = fleet(tmp_path, "lock.acquire", "-H", "sb1", "-m", "disk swap")
    assert proc.returncode == 0, proc.stderr
    proc = fleet(tmp_path, "exec", "-H", "sandbox", "--json", "touch ran")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and not list(tmp_path.rglob("ran")), doc
    assert {h["result"] for h in doc["hosts"]} == {"refused"}  # sb2 too: one run, all or none
    note = {h["host"]: h["note"] for h in doc["hosts"]}["sb1"]
    assert "locked for maintenance" in note and "disk swap" in note
    assert released_as_told(note, tmp_path / "elsewhere").returncode == 0
    proc = fleet(tmp_path, "exec", "-H", "sandbox", "touch ran")
    assert proc.returncode == 0 and (tmp_path / "ran").exists(), proc.stderr
    log = [json.loads(line) for line in (tmp_path / ".fleet/deploy-log.jsonl").read_text()
           .splitlines()]
    assert [(e["action"], e["command"], e["ok"]) for e in log] == [
        ("exec", "touch ran", False), ("exec", "touch ran", True)]


def test_exec_outside_the_sandbox_needs_a_yes_once(tmp_path):
    (tmp_path / "inventory.yaml").write_text(
        "hosts:\n  prod1: {connection: local, state_dir: outside/prod1}\n")
    proc = subprocess.run([sys.executable, "-c", FLEET, "exec", "-H", "prod1", "touch ran"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and not (tmp_path / "ran").exists(), proc.stderr
    assert "outside the sandbox and not yet confirmed" in proc.stderr and "--yes" in proc.stderr
    proc = fleet(tmp_path, "exec", "-H", "prod1", "--yes", "touch ran")
    assert proc.returncode == 0 and (tmp_path / "ran").exists(), proc.stderr
    proc = fleet(tmp_path, "exec", "-H", "prod1", "echo again")  # confirmed: asked once
    assert proc.returncode == 0 and "prod1 | again" in proc.stdout, proc.stderr
