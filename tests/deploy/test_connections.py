"""One connection per host for a whole run: the lease take, the deploy and the lease release
share it (each ssh handshake costs the control side and the host CPU and round trips)."""

from __future__ import annotations

import threading
import time

import pytest
from test_hostkeys import client_key, ssh_server  # noqa: F401  (fixtures)

from fleet.deploy import connection
from fleet.deploy.inventory import Host


@pytest.fixture
def counted(monkeypatch):
    """Every connection fleet.deploy opens, in order (host names)."""
    opened: list[str] = []
    real = connection.connect

    def counting(host: Host):
        opened.append(host.name)
        return real(host)

    monkeypatch.setattr(connection, "connect", counting)
    return opened


def test_a_deploy_connects_once_per_host(sandbox, artifacts, counted):
    results = sandbox.deploy(artifacts())
    assert all(r.ok for r in results.values())
    assert sorted(counted) == ["a", "b", "c"]  # lease take, install, lease release: one each


def test_a_redeploy_and_a_restart_connect_once_per_host(sandbox, artifacts, counted):
    base = artifacts()
    sandbox.deploy(base)
    counted.clear()
    assert all(r.result == "unchanged" for r in sandbox.deploy(base).values())
    assert all(r.ok for r in sandbox.run("restart").values())
    assert sorted(counted) == ["a", "a", "b", "b", "c", "c"]


def test_a_dropped_connection_is_opened_again(sandbox, counted):
    conns = connection.Connections()
    host = sandbox.inventory.hosts["a"]
    first = conns.get(host)
    assert conns.get(host) is first
    conns.drop(host)
    again = conns.get(host)
    assert again is not first and again.run("echo hi", 10).stdout == "hi\n"
    conns.close()
    assert counted == ["a", "a"]


# Commands over ssh: stdout, stderr lines as they come, exit code, and the deadline (against an
# in-process paramiko server, tests/deploy/test_hostkeys.py).


@pytest.fixture
def scripted(monkeypatch, ssh_server, client_key, tmp_path):  # noqa: F811
    """Connect to the test server whose exec requests run `script(channel)` on a thread."""
    from test_hostkeys import _Server, host_for, known_line

    def use(script):
        def exec_request(self, channel, command):
            threading.Thread(target=script, args=(channel,), daemon=True).start()
            return True

        monkeypatch.setattr(_Server, "check_channel_exec_request", exec_request)
        port, key = ssh_server
        known = tmp_path / "known_hosts"
        known.write_text(known_line(port, key))
        return connection.connect(host_for(port, known, "strict", client_key))

    return use


def test_ssh_command_gives_stdout_exit_code_and_stderr_lines_as_they_come(scripted):
    def script(channel):
        time.sleep(0.05)
        channel.sendall(b"out1\n")
        channel.sendall_stderr(b'{"step": "a"}\npart')
        time.sleep(0.05)
        channel.sendall_stderr(b"ial \xc3\xa9\n")
        channel.sendall(b"out2\n")
        channel.send_exit_status(3)
        channel.close()

    conn = scripted(script)
    lines: list[str] = []
    res = conn.run("anything", 10, on_stderr_line=lines.append)
    conn.close()
    assert (res.exit_code, res.stdout) == (3, "out1\nout2\n")
    assert lines == ['{"step": "a"}', "partial \u00e9"]
    assert res.stderr == '{"step": "a"}\npartial \u00e9\n'


def test_ssh_command_past_its_timeout_fails_naming_the_host(scripted):
    conn = scripted(lambda channel: time.sleep(30))  # never answers
    t0 = time.monotonic()
    with pytest.raises(connection.ConnectionError_, match="box: command timed out after"):
        conn.run("hang", 0.5)
    assert time.monotonic() - t0 < 5
    conn.close()


def test_a_run_reuses_its_open_ssh_connection(scripted):
    def script(channel):
        time.sleep(0.05)
        channel.sendall(b"hi\n")
        channel.send_exit_status(0)
        channel.close()

    first = scripted(script)  # a connection to the server, to learn its host entry
    host = first.host
    first.close()
    conns = connection.Connections()
    try:
        conn = conns.get(host)
        assert conn.run("echo hi", 10).stdout == "hi\n"
        assert conns.get(host) is conn  # the lease take, the install and the release share it
        assert conn.run("echo hi", 10).stdout == "hi\n"
        conn.close()  # dropped under the run: the next use opens a new one
        again = conns.get(host)
        assert again is not conn and again.run("echo hi", 10).stdout == "hi\n"
    finally:
        conns.close()
