"""One connection per host for a whole run: the lease take, the deploy and the lease release
share it (each ssh handshake costs the control side and the host CPU and round trips)."""

from __future__ import annotations

import dataclasses
import logging
import sys
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

    def counting(host: Host, *args):
        opened.append(host.name)
        return real(host, *args)

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
    """Connect to the test server whose exec requests run `script(channel)` on a thread,
    started once the server has answered the request (as sshd does: a script that wrote and
    closed before that answer would close the channel under the client's exec)."""
    import paramiko
    import paramiko.common
    from test_hostkeys import _Server, host_for, known_line

    def use(script):
        accepted: dict = {}
        table = paramiko.Transport._channel_handler_table  # the transport dispatches from it
        handle_request = table[paramiko.common.MSG_CHANNEL_REQUEST]

        def exec_request(self, channel, command):
            accepted[id(channel)] = channel
            return True

        def answer_then_run(channel, message):
            handle_request(channel, message)  # sends the answer to an exec before returning
            if accepted.pop(id(channel), None) is not None:
                threading.Thread(target=script, args=(channel,), daemon=True).start()

        monkeypatch.setattr(_Server, "check_channel_exec_request", exec_request)
        monkeypatch.setitem(table, paramiko.common.MSG_CHANNEL_REQUEST, answer_then_run)
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
    gate = threading.Event()
    conn = scripted(lambda channel: gate.wait(60))  # answers nothing until the gate opens
    try:
        with pytest.raises(connection.ConnectionError_, match="box: command timed out after"):
            conn.run("hang", 0.5)
    finally:
        gate.set()
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


def _read_all(channel) -> bytes:
    data = []
    while chunk := channel.recv(65536):
        data.append(chunk)
    return b"".join(data)


def test_ssh_send_and_run_gives_the_file_as_stdin_then_the_answer(scripted, tmp_path):
    import hashlib

    payload = bytes(range(256)) * 12000  # ~3 MB: more than one channel window
    local = tmp_path / "x.pyz"
    local.write_bytes(payload)

    def script(channel):
        got = _read_all(channel)  # until the client's end of input
        channel.sendall(f"{len(got)} {hashlib.sha256(got).hexdigest()}\n".encode())
        channel.send_exit_status(0)
        channel.close()

    conn = scripted(script)
    calls = []
    res = conn.send_and_run(local, "store and install", 10, 10, on_sent=lambda: calls.append(1))
    conn.close()
    assert res.exit_code == 0 and calls == [1]
    assert res.stdout == f"{len(payload)} {hashlib.sha256(payload).hexdigest()}\n"


def test_ssh_upload_cut_off_by_the_host_fails_naming_the_host_and_the_file(scripted, tmp_path):
    local = tmp_path / "x.pyz"
    local.write_bytes(b"\0" * 8_000_000)

    def script(channel):
        channel.recv(1000)
        channel.sendall_stderr(b"disk full\n")
        channel.close()  # gone before the file is through

    conn = scripted(script)
    with pytest.raises(connection.ConnectionError_, match="box: upload of x.pyz failed") as info:
        conn.send_and_run(local, "store", 10, 10)
    conn.close()
    assert "disk full" in str(info.value)


def test_a_run_raises_its_soft_open_files_limit_to_the_hard_one():
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 64:
        pytest.skip("the hard limit of open files is already this low")
    ssh = [Host(name=f"s{i}", host="192.0.2.1") for i in range(3)]
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))  # below what 3 hosts need
        raised = connection.open_files_limit(ssh)
        assert raised == resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 64
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_run_the_hard_limit_cannot_hold_is_refused_before_any_host_is_touched(tmp_path):
    """In a child process: an unprivileged process cannot raise its hard limit back."""
    import json
    import subprocess
    import sys

    child = """
import json, resource
from fleet.deploy import api
from fleet.deploy.inventory import Host
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
hosts = [Host(name=f"s{i}", host="192.0.2.1") for i in range(3)]
art = api.ArtifactRef(None, "0" * 64, "1.0.0", {})
print(json.dumps([[r.host, r.result, r.note] for r in api.deploy(hosts, art, print)]))
"""
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    assert [r[:2] for r in rows] == [["s0", "refused"], ["s1", "refused"], ["s2", "refused"]]
    assert "3 hosts need ~67 open files" in rows[0][2] and "ulimit -n 67" in rows[0][2]


def test_ssh_prefers_aes_gcm_and_still_connects_to_a_server_without_it(scripted, monkeypatch):
    import paramiko

    def script(channel):
        channel.sendall(b"hi\n")
        channel.send_exit_status(0)
        channel.close()

    conn = scripted(script)
    assert conn.conn.client.get_transport().local_cipher == "aes128-gcm@openssh.com"
    assert conn.run("echo hi", 10).stdout == "hi\n"
    conn.close()
    monkeypatch.setattr(paramiko.Transport, "_preferred_ciphers", ("aes128-ctr", "aes256-ctr"))
    old = scripted(script)  # both ends without GCM, as an old sshd
    assert old.conn.client.get_transport().local_cipher == "aes128-ctr"
    assert old.run("echo hi", 10).stdout == "hi\n"
    old.close()


def test_many_hosts_connecting_at_once_all_connect(ssh_server, tmp_path, client_key):  # noqa: F811
    """A run connects its hosts from many threads at once; every one of them connects and runs
    its command (a Config shared between connections once lost its keys under another thread,
    failing a few hosts of a 64-host deploy)."""
    from test_hostkeys import host_for, known_line

    port, key = ssh_server
    known = tmp_path / "known_hosts"
    known.write_text(known_line(port, key))
    conns = connection.Connections()
    errors: list[str] = []
    outputs: list[str] = []

    def one(i: int) -> None:
        host = dataclasses.replace(host_for(port, known, "strict", client_key), name=f"box{i}")
        try:
            outputs.append(conns.get(host).run(f"echo {i}", timeout=30).stdout)
        except Exception as exc:  # noqa: BLE001  (collected and shown by the assertion)
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads interleave often, as a loaded machine makes them
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        sys.setswitchinterval(interval)
    conns.close()
    assert errors == []
    assert sorted(outputs) == sorted(f"ran: echo {i}\n" for i in range(16))


def test_a_command_takes_bytes_as_its_stdin_as_it_takes_a_file(tmp_path):
    """A patch is sent from memory, an artifact from its file: the same stdin either way."""
    host = Host(name="here", connection="local", state_dir=str(tmp_path))
    (tmp_path / "artifact").write_bytes(b"from a file\n")
    local = connection.LocalConnection(host)
    sent = [local.send_and_run(source, "cat", 10, 10)
            for source in (b"from memory\n", tmp_path / "artifact")]
    assert [(r.exit_code, r.stdout) for r in sent] == [(0, "from memory\n"), (0, "from a file\n")]


def test_an_idle_ssh_connection_waits_for_the_host_without_waking(scripted):
    """Between commands the connection's reader waits for the host's next packet with no
    timeout: a run holds a thousand hosts' connections for minutes, and a wake every 30 s
    cost each host ~0.5 ms of CPU at 1,000 hosts. The test below shows a close still ends it."""
    def script(channel):
        channel.sendall(b"hi\n")
        channel.send_exit_status(0)
        channel.close()

    conn = scripted(script)
    assert conn.run("echo hi", 10).stdout == "hi\n"
    sock = conn.conn.client.get_transport().sock
    assert sock.gettimeout() is None
    conn.close()


def test_a_hosts_debug_message_is_logged_only_when_debug_logging_is_on(scripted, monkeypatch,
                                                                      caplog):
    """OpenSSH sends an SSH_MSG_DEBUG at each login (the key's options). paramiko escaped it
    byte by byte before logging it at DEBUG, a cost on every host for a line nobody saw: it is
    escaped and logged only when paramiko's log is at DEBUG, and the command goes on either way."""
    import paramiko
    import paramiko.common

    def script(channel):
        notice = paramiko.Message()
        notice.add_byte(paramiko.common.cMSG_DEBUG)
        notice.add_boolean(False)
        notice.add_string(b"authorized_keys:1: key options: pty\x01")
        notice.add_string(b"")
        channel.get_transport()._send_user_message(notice)
        channel.sendall(b"hi\n")
        channel.send_exit_status(0)
        channel.close()

    escaped = []
    real_escape = paramiko.util.safe_string
    monkeypatch.setattr(paramiko.util, "safe_string",
                        lambda s: escaped.append(s) or real_escape(s))
    quiet = scripted(script)
    with caplog.at_level(logging.INFO, logger="paramiko"):
        assert quiet.run("echo hi", 10).stdout == "hi\n"
    quiet.close()
    assert escaped == []
    loud = scripted(script)
    with caplog.at_level(logging.DEBUG, logger="paramiko"):
        assert loud.run("echo hi", 10).stdout == "hi\n"
    loud.close()
    assert any("key options: pty%01" in r.getMessage() for r in caplog.records
               if r.name.startswith("paramiko.transport")), [r.getMessage() for r in caplog.records]


def test_closing_an_ssh_connection_ends_it_at_once_on_both_ends(scripted):
    """A closed connection leaves no reader thread here and no session on the host: the reader
    waits in `recv` with no timeout, which a close alone did not wake."""
    def script(channel):
        channel.sendall(b"hi\n")
        channel.send_exit_status(0)
        channel.close()

    before = set(threading.enumerate())
    conn = scripted(script)
    assert conn.run("echo hi", 10).stdout == "hi\n"
    opened = set(threading.enumerate()) - before  # this end's reader, the server's transport
    assert opened
    time.sleep(0.3)  # idle, its reader parked in recv: a host waiting for its turn in a run
    conn.close()
    deadline = time.monotonic() + 3.0
    while any(t.is_alive() for t in opened) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [t.name for t in opened if t.is_alive()] == []
