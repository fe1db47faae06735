"""Host-key policy against a real SSH server (paramiko's ServerInterface on 127.0.0.1).

Fabric's Connection accepts unknown keys silently; through fleet.deploy.connection an unknown or a
changed key is refused under `strict`, and `accept-new` records a first-seen key.
"""

from __future__ import annotations

import contextlib
import copy
import io
import shutil
import socket
import subprocess
import threading
import time

import paramiko
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    SSHCertificateBuilder,
    SSHCertificateType,
    load_ssh_public_key,
)

from fleet.deploy import hostkeys
from fleet.deploy.connection import ConnectionError_, connect
from fleet.deploy.hostkeys import CERT_SUFFIX, fingerprint
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
def serving(host_key=None, certificate=None):
    """Run an SSH server on 127.0.0.1 with `host_key` (default: a fresh one) and, like sshd's
    HostCertificate, `certificate` (see `certified`): (port, host_key) while inside."""
    host_key = host_key or paramiko.ECDSAKey.generate()
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
            if certificate is not None:  # an RSA one is offered under its SHA-2 names
                cert_type = certificate.public_blob.key_type
                for name in ([f"rsa-sha2-{bits}{CERT_SUFFIX}" for bits in (512, 256)]
                             if cert_type == f"ssh-rsa{CERT_SUFFIX}" else [cert_type]):
                    transport.server_key_dict[name] = certificate
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


def test_a_host_with_a_matching_authority_but_no_certificate_is_refused_saying_so(
        ssh_server, tmp_path, client_key):
    port, key = ssh_server
    ca = paramiko.ECDSAKey.generate()
    known = tmp_path / "known_hosts"
    known.write_text(f"@cert-authority [127.0.0.1]:* {ca.get_name()} {ca.get_base64()}\n")
    with pytest.raises(ConnectionError_) as info:
        connect(host_for(port, known, "strict", client_key))
    message = str(info.value)
    assert info.value.kind == "host_key"
    assert f"[127.0.0.1]:{port}: no host certificate: the host presented its plain key" in message
    assert f"@cert-authority line 1 of {known}" in message and fingerprint(key) in message
    known.write_text(known.read_text() + known_line(port, key))  # its own key line vouches
    connect(host_for(port, known, "strict", client_key)).close()


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


def test_fleet_deploy_dry_run_under_accept_new_writes_no_known_hosts(ssh_server, tmp_path,
                                                                    client_key, artifacts):
    """The same through the `fleet` script, as an operator runs it: `deploy --dry-run` with
    `host_key_policy: accept-new` connects to a host it has never seen, reads and plans, and
    leaves known_hosts unwritten."""
    import json
    import os
    import sys

    port, key = ssh_server
    known = tmp_path / "known_hosts"
    (tmp_path / "inventory.yaml").write_text(
        "vars: {timeouts: {connect: 5, command: 10, ready: 5}}\nhosts:\n"
        f"  box: {{host: 127.0.0.1, port: {port}, user: tester, identity_file: '{client_key}', "
        f"known_hosts: '{known}', host_key_policy: accept-new}}\n")
    script = "import sys; sys.argv[0] = 'fleet'; from fleet.cli.program import main; main()"
    proc = subprocess.run([sys.executable, "-c", script, "deploy", "-H", "box", "--dry-run",
                           "--artifact", str(artifacts().path), "--json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, FLEET_SSH_CONFIG=""))
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert [h["host"] for h in doc["hosts"]] == ["box"], doc
    # it connected (the stand-in server's answers then fail the status check: no matter)
    assert doc["hosts"][0]["result"] != "unreachable" and "connect" in doc["hosts"][0]["steps"]
    assert not known.exists()
    connect(host_for(port, known, "accept-new", client_key)).close()  # a real connection does
    assert known.read_text() == known_line(port, key)


# --- host certificates (`@cert-authority`), checked as ssh checks them ---------------------------

HOST, USER = SSHCertificateType.HOST, SSHCertificateType.USER


def presenting(key: paramiko.PKey, certificate: str) -> paramiko.PKey:
    """`key` as a server presents it with its certificate (sshd's HostCertificate): the key
    exchange sends the certificate, signatures are made with the key."""
    shown = copy.copy(key)
    shown.__class__ = type("Certified", (type(key),),
                           {"asbytes": lambda self: self.public_blob.key_blob})
    shown.load_certificate(certificate)
    return shown


def openssh(public_key) -> str:
    return public_key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()


def certified(key: paramiko.PKey, ca, principals=(b"127.0.0.1",), kind=HOST,
              after: int = -60, before: int = 3600, critical=None) -> paramiko.PKey:
    """`key` with a certificate signed by `ca`, valid from now+after to now+before (seconds)."""
    now = int(time.time())
    public = load_ssh_public_key(f"{key.get_name()} {key.get_base64()}".encode())
    builder = (SSHCertificateBuilder().public_key(public).serial(7).type(kind)
               .key_id(b"box-cert").valid_after(now + after).valid_before(now + before))
    builder = (builder.valid_principals(list(principals)) if principals
               else builder.valid_for_all_principals())
    for name, value in (critical or {}).items():
        builder = builder.add_critical_option(name, value)
    return presenting(key, builder.sign(ca).public_bytes().decode())


@pytest.fixture
def ca():
    return ed25519.Ed25519PrivateKey.generate()


def authority(ca, patterns="[127.0.0.1]:*", marker="@cert-authority") -> str:
    return f"{marker} {patterns} {openssh(ca.public_key())}\n"


def cert_server(ca, key=None, **cert):
    """A server presenting a certificate of its host key (default: a fresh ECDSA one) signed by
    `ca` (`certified` arguments), besides the key itself, as sshd with HostKey and
    HostCertificate."""
    key = key or paramiko.ECDSAKey.generate()
    return serving(key, certified(key, ca, **cert))


def refusal(port, known, client_key, policy="strict") -> str:
    with pytest.raises(ConnectionError_) as info:
        connect(host_for(port, known, policy, client_key))
    assert info.value.kind == "host_key"
    message = str(info.value)
    assert f"[127.0.0.1]:{port}" in message and str(known) in message
    return message


def _host_key(kind: str) -> paramiko.PKey:
    if kind == "ecdsa":
        return paramiko.ECDSAKey.generate()
    private = (rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "rsa"
               else ed25519.Ed25519PrivateKey.generate())
    pem = private.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption()).decode()
    return {"rsa": paramiko.RSAKey, "ed25519": paramiko.Ed25519Key}[kind].from_private_key(
        io.StringIO(pem))


@pytest.mark.parametrize("kind", ["ecdsa", "ed25519", "rsa"])
def test_a_valid_host_certificate_from_a_trusted_ca_is_accepted(tmp_path, client_key, ca,
                                                                 kind):
    """known_hosts lists no key of the host, only the CA: the certificate is what vouches."""
    known = tmp_path / "known_hosts"
    known.write_text(authority(ca))
    with cert_server(ca, _host_key(kind)) as (port, _):
        conn = connect(host_for(port, known, "strict", client_key))
        try:
            assert conn.conn.client.get_transport().host_key_type.endswith(CERT_SUFFIX)
            assert conn.run("echo certified", timeout=10).stdout == "ran: echo certified\n"
        finally:
            conn.close()
    assert known.read_text() == authority(ca)  # nothing recorded


def test_hosts_without_a_matching_authority_negotiate_plain_keys_as_before(
        tmp_path, client_key, ca):
    """A server offering its certificate too is asked for its plain key when no
    `@cert-authority` line matches it (one for other hosts does not count)."""
    known = tmp_path / "known_hosts"
    with cert_server(ca) as (port, key):
        known.write_text(authority(ca, "*.example.com") + known_line(port, key))
        conn = connect(host_for(port, known, "strict", client_key))
        try:
            assert conn.conn.client.get_transport().host_key_type == key.get_name()
        finally:
            conn.close()
        known.write_text(authority(ca, "*.example.com"))
        assert "unknown host key" in refusal(port, known, client_key)


@pytest.mark.parametrize("cert, reason", [
    ({"after": -7200, "before": -3600}, "expired at "),
    ({"after": 3600, "before": 7200}, "is not valid before "),
    ({"principals": (b"web1.example.com", b"192.0.2.9")},
     "is for web1.example.com, 192.0.2.9, not 127.0.0.1"),
    ({"principals": ()}, "lists no principals"),
    ({"kind": USER}, "is a user certificate, not a host certificate"),
    ({"critical": {b"force-command": b"true"}}, "carries critical options (force-command)"),
])
def test_an_invalid_host_certificate_is_refused_saying_why(tmp_path, client_key, ca, cert,
                                                           reason):
    known = tmp_path / "known_hosts"
    known.write_text(authority(ca))
    with cert_server(ca, **cert) as (port, key):
        message = refusal(port, known, client_key)
    assert f"[127.0.0.1]:{port}: host certificate refused: its certificate \"box-cert\"" in message
    assert reason in message and fingerprint(key) in message
    assert "has no line of its own" in message


def test_a_certificate_from_an_unknown_ca_is_refused(tmp_path, client_key, ca):
    other = ed25519.Ed25519PrivateKey.generate()
    known = tmp_path / "known_hosts"
    known.write_text(authority(other))
    with cert_server(ca) as (port, _):
        message = refusal(port, known, client_key)
    assert "host certificate refused" in message
    assert "no @cert-authority line has that key" in message


def test_a_ca_whose_line_does_not_match_the_host_is_not_trusted_for_it(tmp_path, client_key,
                                                                        ca):
    """The signer's line is for *.example.com; another CA's line matches the host."""
    other = ed25519.Ed25519PrivateKey.generate()
    known = tmp_path / "known_hosts"
    known.write_text(authority(ca, "*.example.com") + authority(other))
    with cert_server(ca) as (port, _):
        message = refusal(port, known, client_key)
    assert (f"trusted by @cert-authority line 1 of {known} only for *.example.com, not for "
            f"[127.0.0.1]:{port}") in message


def test_a_hashed_or_tab_separated_authority_line_matches(tmp_path, client_key, ca):
    known = tmp_path / "known_hosts"
    with cert_server(ca) as (port, _):
        known.write_text(authority(ca, paramiko.HostKeys.hash_host(f"[127.0.0.1]:{port}")))
        connect(host_for(port, known, "strict", client_key)).close()
        known.write_text(authority(ca).replace(" ", "\t"))
        connect(host_for(port, known, "strict", client_key)).close()


@pytest.mark.parametrize("policy", ["strict", "accept-new"])
def test_a_revoked_ca_is_refused_even_where_the_hosts_key_is_listed(tmp_path, client_key, ca,
                                                                     policy):
    known = tmp_path / "known_hosts"
    with cert_server(ca) as (port, key):
        text = authority(ca) + authority(ca, "*", "@revoked") + known_line(port, key)
        known.write_text(text)
        message = refusal(port, known, client_key, policy)
    assert "which is marked @revoked in" in message and "CA ssh-ed25519 SHA256:" in message
    assert known.read_text() == text


def test_a_certificate_of_a_revoked_host_key_is_refused(tmp_path, client_key, ca):
    known = tmp_path / "known_hosts"
    with cert_server(ca) as (port, key):
        known.write_text(authority(ca) + f"@revoked * {key.get_name()} {key.get_base64()}\n")
        message = refusal(port, known, client_key)
    assert f"host key {key.get_name()} {fingerprint(key)} is marked @revoked" in message


def test_a_refused_certificate_falls_back_to_the_hosts_own_key_line_as_ssh_does(
        tmp_path, client_key, ca):
    """ssh drops a certificate it refuses and checks the plain key: a key line listing it
    accepts the host, a line listing another key is a changed key."""
    known = tmp_path / "known_hosts"
    with cert_server(ca, after=-7200, before=-3600) as (port, key):
        known.write_text(authority(ca) + known_line(port, key))
        connect(host_for(port, known, "strict", client_key)).close()
        known.write_text(authority(ca) + known_line(port, paramiko.ECDSAKey.generate()))
        message = refusal(port, known, client_key)
    assert "host key CHANGED" in message and "expired at" in message


def test_accept_new_records_the_plain_key_of_a_host_whose_certificate_is_refused(
        tmp_path, client_key, ca):
    """As ssh's accept-new: the certificate's plain key is new, so it is recorded."""
    known = tmp_path / "known_hosts"
    known.write_text(authority(ca))
    with cert_server(ca, principals=(b"elsewhere",)) as (port, key):
        connect(host_for(port, known, "accept-new", client_key)).close()
    assert known.read_text() == authority(ca) + known_line(port, key)


def test_every_jump_hop_has_its_certificate_checked(tmp_path, client_key, ca):
    import dataclasses

    known = tmp_path / "known_hosts"
    known.write_text(authority(ca))
    with cert_server(ca) as (port_a, _), cert_server(ca) as (port_b, _):
        host = dataclasses.replace(host_for(port_b, known, "strict", client_key),
                                   jump=f"tester@127.0.0.1:{port_a}")
        conn = connect(host)
        try:
            assert conn.run("echo hop", timeout=10).stdout == "ran: echo hop\n"
        finally:
            conn.close()
    with cert_server(ca, after=-7200, before=-3600) as (port_a, _), \
            cert_server(ca) as (port_b, _):
        host = dataclasses.replace(host_for(port_b, known, "strict", client_key),
                                   jump=f"tester@127.0.0.1:{port_a}")
        with pytest.raises(ConnectionError_, match=f"127.0.0.1]:{port_a}: host certificate "
                                                   "refused: .* expired at"):
            connect(host)


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
def test_certificates_signed_by_ssh_keygen_are_read_as_openssh_writes_them(tmp_path,
                                                                         client_key):
    keygen = shutil.which("ssh-keygen")
    ca_path, pub = tmp_path / "ca", tmp_path / "host.pub"
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", ca_path], check=True)
    key = paramiko.ECDSAKey.generate()
    known = tmp_path / "known_hosts"
    known.write_text(f"@cert-authority * {(tmp_path / 'ca.pub').read_text()}")
    for validity, principal, ok in (("-5m:+1h", "127.0.0.1", True),
                                    ("-5m:+1h", "db.example.com", False),
                                    ("20200101:20200102", "127.0.0.1", False)):
        pub.write_text(f"{key.get_name()} {key.get_base64()}\n")
        subprocess.run([keygen, "-q", "-s", ca_path, "-I", "keygen-cert", "-h", "-n", principal,
                        "-V", validity, pub], check=True, capture_output=True)
        presented = presenting(key, (tmp_path / "host-cert.pub").read_text())
        with serving(key, presented) as (port, _):
            if ok:
                connect(host_for(port, known, "strict", client_key)).close()
                continue
            message = refusal(port, known, client_key)
        assert 'certificate "keygen-cert"' in message
        assert ("expired at 2020-01-0" in message if principal == "127.0.0.1"
                else "is for db.example.com, not 127.0.0.1" in message)


def test_known_hosts_lookup_answers_as_paramiko_does(tmp_path):
    """The indexed known_hosts gives a host the keys paramiko's own lookup gives: plain and
    hashed lines, one key per type (a later line for a name and type replaces the key),
    revoked keys left out, other hosts' lines not."""
    ecdsa_a, ecdsa_b, other = (paramiko.ECDSAKey.generate() for _ in range(3))
    rsa_key, gone = paramiko.RSAKey.generate(2048), paramiko.ECDSAKey.generate()
    name = "[192.0.2.7]:2222"
    hashed = paramiko.HostKeys.hash_host(name)
    text = "".join([
        f"192.0.2.8 {other.get_name()} {other.get_base64()}\n",
        f"{name} {ecdsa_a.get_name()} {ecdsa_a.get_base64()}\n",
        f"{hashed} {rsa_key.get_name()} {rsa_key.get_base64()}\n",
        f"{name},192.0.2.9 {ecdsa_b.get_name()} {ecdsa_b.get_base64()}\n",
        f"192.0.2.9 {gone.get_name()} {gone.get_base64()}\n",
        f"@revoked * {gone.get_name()} {gone.get_base64()}\n"])
    path = tmp_path / "known_hosts"
    path.write_text(text)
    known = hostkeys.read_known_hosts(path)
    reference = paramiko.HostKeys()  # filled line by line with `add`, as fleet did before
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("@"):
            entry = paramiko.hostkeys.HostKeyEntry.from_line(line, number)
            for host in entry.hostnames:
                reference.add(host, entry.key.get_name(), entry.key)
    for host in (name, "192.0.2.8", "192.0.2.9", "192.0.2.10"):
        expected = [k for k in (reference.lookup(host) or {}).values() if not known.is_revoked(k)]
        assert [k.asbytes() for k in known.listed_keys(host)] == [k.asbytes() for k in expected]
    assert [k.get_name() for k in known.listed_keys(name)] == ["ecdsa-sha2-nistp256", "ssh-rsa"]
    assert known.listed_keys(name)[0].asbytes() == ecdsa_b.asbytes()
