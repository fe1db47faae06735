"""The harness's user-space network link (no Docker): a TCP proxy adding RTT, bandwidth caps,
drops and partitions in front of a local echo server."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from lab.harness.network import DOWN, UP, Link, LinkError, Profile


class EchoServer:
    """Sends a banner line on connect, then echoes everything; counts bytes received."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.received = 0
        self.resets = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.sendall(b"HELLO\n")
                while True:
                    data = conn.recv(65536)
                    if not data:
                        conn.shutdown(socket.SHUT_WR)
                        return
                    with self._lock:
                        self.received += len(data)
                    conn.sendall(data)
            except OSError:
                with self._lock:
                    self.resets += 1

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server():
    srv = EchoServer()
    yield srv
    srv.close()


def dial(link: Link, timeout: float = 5.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", link.port), timeout=timeout)
    assert recv_exact(sock, 6) == b"HELLO\n"
    return sock


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_bytes_pass_unchanged_both_ways_and_the_end_of_stream_too(server):
    payload = bytes(range(256)) * 4096  # 1 MiB
    with Link(server.port) as link:
        sock = dial(link)
        sender = threading.Thread(target=sock.sendall, args=(payload,))
        sender.start()
        echoed = recv_exact(sock, len(payload))
        sender.join()
        sock.shutdown(socket.SHUT_WR)
        assert echoed == payload
        assert sock.recv(10) == b"", "the server's end of stream must reach the client"
        assert link.bytes[UP] == len(payload) and link.bytes[DOWN] == len(payload) + 6


def test_round_trip_time_is_added_to_every_exchange_and_to_the_handshake(server):
    with Link(server.port, Profile(rtt_ms=120)) as link:
        started = time.monotonic()
        sock = dial(link)
        handshake = time.monotonic() - started
        started = time.monotonic()
        sock.sendall(b"ping")
        assert recv_exact(sock, 4) == b"ping"
        exchange = time.monotonic() - started
        link.set(rtt_ms=0)
        sock.sendall(b"pong")
        assert recv_exact(sock, 4) == b"pong"
    assert handshake >= 0.12 + 0.06, "one RTT for the handshake plus half for the banner"
    assert exchange >= 0.12


def test_bandwidth_cap_paces_the_transfer(server):
    payload = b"x" * 200_000
    with Link(server.port, Profile(rate_bps=100_000)) as link:
        sock = dial(link)
        started = time.monotonic()
        threading.Thread(target=sock.sendall, args=(payload,), daemon=True).start()
        assert recv_exact(sock, len(payload)) == payload
        elapsed = time.monotonic() - started
    assert elapsed >= 1.5, "200 kB each way at 100 kB/s cannot take less than ~2 s"


def test_drop_after_n_bytes_resets_the_connection_mid_transfer(server):
    with Link(server.port) as link:
        sock = dial(link)
        dropped = link.drop_after(50_000, UP)
        with pytest.raises(OSError):
            sock.settimeout(5)
            for _ in range(100):
                sock.sendall(b"y" * 10_000)
                time.sleep(0.005)
            recv_exact(sock, 1_000_000)
            raise AssertionError("the connection was never dropped")
        assert dropped.wait(5)
        assert server.received <= 50_000
        assert dial(link).recv(0) == b"", "new connections work again after the drop"


def test_cut_resets_every_open_connection(server):
    with Link(server.port) as link:
        socks = [dial(link) for _ in range(3)]
        assert link.cut() == 3
        for sock in socks:
            sock.settimeout(5)
            with pytest.raises(OSError):
                sock.sendall(b"z")
                assert sock.recv(10) != b""  # a reset raises; an orderly end would be b""
                raise AssertionError("connection still open")


def test_partition_holds_everything_until_it_heals(server):
    with Link(server.port) as link:
        sock = dial(link)
        with link.partitioned_for():
            sock.sendall(b"held")
            sock.settimeout(0.5)
            with pytest.raises(socket.timeout):
                sock.recv(10)
            fresh = socket.create_connection(("127.0.0.1", link.port), timeout=5)
            fresh.settimeout(0.5)
            with pytest.raises(socket.timeout):
                fresh.recv(10)  # no banner: the host cannot be reached
        sock.settimeout(5)
        assert recv_exact(sock, 4) == b"held"
        fresh.settimeout(5)
        assert recv_exact(fresh, 6) == b"HELLO\n"


def test_bad_settings_are_refused_with_the_fix():
    with pytest.raises(LinkError, match="0 or more"):
        Profile(rtt_ms=-1)
    with pytest.raises(LinkError, match="positive"):
        Profile(rate_bps=0)
    with Link(1) as link, pytest.raises(LinkError, match="'up' or 'down'"):
        link.drop_after(10, "sideways")
