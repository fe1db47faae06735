"""`fleet exec`: one ad-hoc command on the selected hosts, through the `fleet` script."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

FLEET = "import sys; sys.argv[0] = 'fleet'; from fleet.cli.program import main; main()"


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
    proc = fleet(tmp_path, "exec", "-H", "sb1,gone", "--json", "printf '\\033[31mred'")
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
