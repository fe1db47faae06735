"""Host-key policy against a real SSH server (paramiko's ServerInterface on 127.0.0.1).

Fabric's Connection accepts unknown keys silently; through fleet.deploy.connection an unknown or a
changed key is refused under `strict`, and `accept-new` records a first-seen key.
"""

from __future__ import annotations

import contextlib
import socket
import threading

import paramiko
import pytest

from fleet.deploy import hostkeys
from fleet.deploy.connection import ConnectionError_, connect
from fleet.deploy.inventory import Host


class _Server(paramiko.ServerInterface):
    def __init__(self):
        self.forwards = {}  # chanid -> (host, port) asked for by a direct-tcpip (jump) channel

    def check_channel_direct_tcpip_request(self, chanid, origin, destination):
        self.forwards[chanid] = destination
        return paramiko.OPEN_SUCCEEDED

    def check_auth_publickey(self, username, key):
        return paramiko.AUTH_SUCCESSFUL

    def get_allowed_auths(self, username):
        return "publickey"

    def check_channel_request(self, kind, chanid):
        return paramiko.OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel, command):
        def reply():
            # Output, exit status and EOF may reach the client before paramiko has answered
            # the exec request; a close may not (the client's exec would fail): the server
            # closes only once the client has.
            channel.sendall(b"ran: " + command + b"\n")
            channel.send_exit_status(0)
            channel.shutdown_write()
            while channel.recv(4096):
                pass
            channel.close()

        threading.Thread(target=reply, daemon=True).start()
        return True


def _forward(transport, server):
    """Serve jump-host channels: bridge each direct-tcpip channel to its TCP destination."""
    kept = []  # session channels are served by check_channel_exec_request; keep them open
    while transport.is_active():
        chan = transport.accept(1)
        if chan is None:
            continue
        if chan.get_id() not in server.forwards:
            kept.append(chan)
            continue
        target = socket.create_connection(server.forwards[chan.get_id()], timeout=5)
        for src, dst in ((chan, target), (target, chan)):
            threading.Thread(target=_pump, args=(src, dst), daemon=True).start()


def _pump(src, dst):
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except (OSError, EOFError):
        pass
    finally:
        for end in (src, dst):
            try:
                end.close()
            except (OSError, EOFError):  # paramiko raises EOFError closing on a dead transport
                pass


@pytest.fixture
def ssh_server():
    """An SSH server on 127.0.0.1 with a fresh host key; yields (port, host_key)."""
    with serving() as server:
        yield server


@contextlib.contextmanager
def serving():
    """Run an SSH server on 127.0.0.1 with a fresh host key: (port, host_key) while inside."""
    host_key = paramiko.ECDSAKey.generate()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()
    transports = []

    def serve():
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except OSError:
                continue
            transport = paramiko.Transport(sock)
            transport.add_server_key(host_key)
            transports.append(transport)
            server = _Server()
            try:
                transport.start_server(server=server)
            except (paramiko.SSHException, EOFError, OSError):
                continue
            threading.Thread(target=_forward, args=(transport, server), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], host_key
    finally:
        stop.set()
        thread.join(timeout=5)
        for transport in transports:
            transport.close()
        listener.close()


@pytest.fixture
def client_key(tmp_path):
    path = tmp_path / "id_ecdsa"
    paramiko.ECDSAKey.generate().write_private_key_file(str(path))
    return str(path)


def host_for(port, known_hosts, policy, client_key):
    return Host(name="box", host="127.0.0.1", port=port, user="tester", identity_file=client_key,
                known_hosts=str(known_hosts), host_key_policy=policy,
                timeouts={"connect": 5, "command": 10, "transfer": 10, "ready": 5, "lock": 0})


def known_line(port, key) -> str:
    return f"[127.0.0.1]:{port} {key.get_name()} {key.get_base64()}\n"


def test_strict_refuses_unknown_key_and_records_nothing(ssh_server, tmp_path, client_key):
    port, key = ssh_server
    known = tmp_path / "known_hosts"
    known.write_text("")
    with pytest.raises(ConnectionError_) as info:
        connect(host_for(port, known, "strict", client_key))
    message = str(info.value)
    assert "box" in message and "unknown host key" in message and str(known) in message
    assert "SHA256:" in message and "accept-new" in message
    assert known.read_text() == ""


def test_strict_refuses_changed_key(ssh_server, tmp_path, client_key):
    port, _ = ssh_server
    known = tmp_path / "known_hosts"
    known.write_text(known_line(port, paramiko.ECDSAKey.generate()))
    with pytest.raises(ConnectionError_, match="host key CHANGED"):
        connect(host_for(port, known, "strict", client_key))


def test_strict_accepts_known_key_and_runs_commands(ssh_server, tmp_path, client_key):
    port, key = ssh_server
    known = tmp_path / "known_hosts"
    known.write_text(known_line(port, key))
    conn = connect(host_for(port, known, "strict", client_key))
    try:
        result = conn.run("echo hello", timeout=10)
    finally:
        conn.close()
    assert result.exit_code == 0 and result.stdout == "ran: echo hello\n"


def test_accept_new_records_first_key_then_strict_trusts_it(ssh_server, tmp_path, client_key):
    port, key = ssh_server
    known = tmp_path / "known_hosts"
    connect(host_for(port, known, "accept-new", client_key)).close()
    assert known.read_text() == known_line(port, key)
    connect(host_for(port, known, "strict", client_key)).close()


def test_accept_new_still_refuses_a_changed_key(ssh_server, tmp_path, client_key):
    port, _ = ssh_server
    known = tmp_path / "known_hosts"
    original = known_line(port, paramiko.ECDSAKey.generate())
    known.write_text(original)
    with pytest.raises(ConnectionError_, match="host key CHANGED"):
        connect(host_for(port, known, "accept-new", client_key))
    assert known.read_text() == original


def test_fabric_alone_would_have_accepted_the_unknown_key(ssh_server, client_key):
    """Why hostkeys.apply exists: Fabric's default policy silently trusts any key."""
    from fabric import Connection

    port, key = ssh_server
    conn = Connection("127.0.0.1", user="tester", port=port, connect_timeout=5,
                      connect_kwargs={"key_filename": [client_key]})
    try:
        conn.open()  # no known_hosts names this fresh key, yet no refusal
        assert conn.is_connected
        assert conn.transport.get_remote_server_key() == key
    finally:
        conn.close()


def test_jump_host_is_used_and_both_keys_are_verified(ssh_server, tmp_path, client_key):
    """The target is reached through the jump host; each hop's key is checked under strict."""
    import dataclasses

    port, key = ssh_server
    known = tmp_path / "known_hosts"
    known.write_text(known_line(port, key))
    host = dataclasses.replace(host_for(port, known, "strict", client_key),
                               jump=f"tester@127.0.0.1:{port}")
    conn = connect(host)
    try:
        assert conn.conn.gateway is not None
        assert conn.run("echo via jump", timeout=10).stdout == "ran: echo via jump\n"
    finally:
        conn.close()
    known.write_text("")
    with pytest.raises(ConnectionError_, match="unknown host key"):
        connect(host)


def test_ssh_socket_has_nagle_off_and_a_refused_port_names_the_host(ssh_server, tmp_path,
                                                                    client_key):
    """Nagle + delayed ACK cost ~40 ms per small-packet exchange (measured on the harness:
    connect 72 -> 31 ms); the socket fleet hands to paramiko has TCP_NODELAY set."""
    port, key = ssh_server
    known = tmp_path / "known_hosts"
    known.write_text(known_line(port, key))
    conn = connect(host_for(port, known, "strict", client_key))
    try:
        sock = conn.conn.client.get_transport().sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        conn.close()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    free_port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(ConnectionError_,
                       match=f"box: cannot connect to tester@127.0.0.1:{free_port}"):
        connect(host_for(free_port, known, "strict", client_key))


def test_every_hop_of_a_multi_hop_jump_is_used_and_its_key_checked(tmp_path, client_key):
    """`jump: a,b`: a first, b through a, the host through b; each hop's key is checked."""
    import dataclasses

    with serving() as (port_a, key_a), serving() as (port_b, key_b):
        known = tmp_path / "known_hosts"
        both = known_line(port_a, key_a) + known_line(port_b, key_b)
        known.write_text(both)
        host = dataclasses.replace(
            host_for(port_b, known, "strict", client_key),
            jump=f"tester@127.0.0.1:{port_a},tester@127.0.0.1:{port_b}")
        conn = connect(host)
        try:
            assert conn.target.describe() == (f"tester@127.0.0.1:{port_b} via tester@127.0.0.1:"
                                               f"{port_b} via tester@127.0.0.1:{port_a}")
            assert conn.run("echo two hops", timeout=10).stdout == "ran: echo two hops\n"
        finally:
            conn.close()
        for missing in (port_a, port_b):  # either hop's key unknown: refused
            known.write_text("".join(line for line in both.splitlines(keepends=True)
                                     if not line.startswith(f"[127.0.0.1]:{missing} ")))
            with pytest.raises(ConnectionError_, match="unknown host key") as info:
                connect(host)
            assert info.value.kind == "host_key"


def test_marker_lines_and_a_bad_line_do_not_spoil_the_file(ssh_server, tmp_path, client_key):
    """One `@cert-authority` or `@revoked` line (or a line ssh skips) used to make every host of
    the file fail with paramiko's raw InvalidHostKey; they are read as OpenSSH reads them."""
    port, key = ssh_server
    other = paramiko.ECDSAKey.generate()
    known = tmp_path / "known_hosts"
    known.write_text(f"@cert-authority *.example.com {other.get_name()} {other.get_base64()}\n"
                     f"@revoked old.example.com {other.get_name()} {other.get_base64()}\n"
                     "this line is not a key line\n" + known_line(port, key))
    conn = connect(host_for(port, known, "strict", client_key))
    try:
        assert conn.run("true", timeout=10).exit_code == 0
    finally:
        conn.close()


@pytest.mark.parametrize("policy", ["strict", "accept-new"])
def test_a_revoked_key_is_refused_by_name_even_where_listed(ssh_server, tmp_path, client_key,
                                                             policy):
    port, key = ssh_server
    known = tmp_path / "known_hosts"
    text = f"@revoked * {key.get_name()} {key.get_base64()}\n" + known_line(port, key)
    known.write_text(text)
    with pytest.raises(ConnectionError_) as info:
        connect(host_for(port, known, policy, client_key))
    assert "is marked @revoked in" in str(info.value) and "SHA256:" in str(info.value)
    assert known.read_text() == text  # never recorded


def test_a_host_known_only_through_a_certificate_authority_is_refused_saying_so(
        ssh_server, tmp_path, client_key):
    port, _ = ssh_server
    ca = paramiko.ECDSAKey.generate()
    known = tmp_path / "known_hosts"
    known.write_text(f"@cert-authority [127.0.0.1]:* {ca.get_name()} {ca.get_base64()}\n")
    with pytest.raises(ConnectionError_) as info:
        connect(host_for(port, known, "strict", client_key))
    message = str(info.value)
    assert "@cert-authority" in message and "does not verify host certificates" in message


def test_accept_new_in_a_dry_run_writes_nothing(ssh_server, tmp_path, client_key):
    port, _ = ssh_server
    known = tmp_path / "known_hosts"
    with hostkeys.not_recording():
        connect(host_for(port, known, "accept-new", client_key)).close()
    assert not known.exists()


def test_a_dry_run_deploy_under_accept_new_writes_no_known_hosts(ssh_server, tmp_path,
                                                                 client_key):
    """The docs say a dry run writes nothing; it connects (and plans), and known_hosts stays
    as it was; a real run then records the key."""
    from pathlib import Path

    from fleet.deploy import api

    port, key = ssh_server
    known = tmp_path / "known_hosts"
    host = host_for(port, known, "accept-new", client_key)
    art = api.ArtifactRef(Path(tmp_path / "fleet-1.0.0.pyz"), "0" * 64, "1.0.0", {}, False)
    results = api.deploy([host], art, lambda *e: None, dry_run=True)
    assert results[0].result != "unreachable", results[0]  # it did connect
    assert not known.exists()
    connect(host).close()
    assert known.read_text() == known_line(port, key)
