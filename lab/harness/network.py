"""A network like the internet's between the control side and each harness host.

The engine here has no `tc netem` (its kernel lacks the qdisc) and refuses `--privileged`, so the
link is made in user space: a `Link` is a small TCP proxy on 127.0.0.1 in front of one host's
published sshd port, run by the control-side process in threads. It adds

- round-trip time: every byte is delivered half an RTT after it was read, in each direction, and
  a new connection costs one RTT before anything flows (the TCP handshake);
- a bandwidth cap per direction, shared by all connections of the link (as one uplink is);
- a connection dropped after N more bytes in a direction (mid-upload) or at once (`cut`), with a
  TCP reset, as when a home router drops its NAT state;
- a partition that heals: nothing is delivered either way and new connections get no answer,
  until `heal()`; what was sent meanwhile is delivered then, as TCP's retransmissions would.

`LinkSet` puts a link in front of every host of a harness run and points the run's generated
inventory (and known_hosts) at the links, so `invoke deploy --inventory ...` goes through them,
while the harness's own side channels (docker exec, `Harness.ssh`) keep the direct port.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

CHUNK = 16384
MAX_QUEUED = 4 * 1024 * 1024  # bytes held per direction before the reader stops reading
CONNECT_TIMEOUT_S = 10.0
UP, DOWN = "up", "down"  # control side -> host, host -> control side


class LinkError(RuntimeError):
    """A link could not be set up or configured; the message names the link and the fix."""


@dataclass(frozen=True)
class Profile:
    """What a link adds: round-trip time (ms) and a bandwidth cap (bytes/s per direction)."""

    rtt_ms: float = 0.0
    rate_bps: float | None = None

    def __post_init__(self) -> None:
        if self.rtt_ms < 0:
            raise LinkError(f"rtt_ms {self.rtt_ms!r}: give 0 or more milliseconds")
        if self.rate_bps is not None and self.rate_bps <= 0:
            raise LinkError(f"rate_bps {self.rate_bps!r}: give a positive rate, or None")


class _Pacer:
    """A shared bandwidth budget for one direction of a link: when the next byte may leave."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free_at = 0.0

    def reserve(self, size: int, rate: float | None) -> float:
        """Reserve `size` bytes of the link; return when the send may start."""
        if not rate:
            return 0.0
        with self._lock:
            now = time.monotonic()
            start = max(now, self._free_at)
            self._free_at = start + size / rate
            return start


class _Direction:
    """One direction of one proxied connection: a reader thread stamps each chunk with its due
    time, a writer thread delivers it then (and not while partitioned)."""

    def __init__(self, conn: _Connection, name: str, src: socket.socket,
                 dst: socket.socket) -> None:
        self.conn = conn
        self.name = name
        self.src, self.dst = src, dst
        self.queue: deque = deque()
        self.queued = 0
        self.cond = threading.Condition()
        self.threads = [threading.Thread(target=self._read, daemon=True),
                        threading.Thread(target=self._write, daemon=True)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def _read(self) -> None:
        link = self.conn.link
        try:
            while not self.conn.closed:
                data = self.src.recv(CHUNK)
                due = time.monotonic() + link.profile.rtt_ms / 2000.0
                with self.cond:
                    self.queue.append((due, data or None))
                    self.queued += len(data)
                    self.cond.notify_all()
                    if not data:
                        return
                    while self.queued > MAX_QUEUED and not self.conn.closed:
                        self.cond.wait(0.5)
        except OSError:
            self.conn.close(reset=True)

    def _write(self) -> None:
        link = self.conn.link
        try:
            while True:
                with self.cond:
                    while not self.queue and not self.conn.closed:
                        self.cond.wait(0.5)
                    if self.conn.closed:
                        return
                    due, data = self.queue[0]
                    wait = due - time.monotonic()
                    if wait > 0 or link.partitioned:
                        self.cond.wait(min(wait, 0.5) if wait > 0 else 0.05)
                        continue
                    self.queue.popleft()
                    if data is not None:
                        self.queued -= len(data)
                    self.cond.notify_all()
                if data is None:  # the sender closed its side: pass the end of stream on
                    with contextlib.suppress(OSError):
                        self.dst.shutdown(socket.SHUT_WR)
                    self.conn.half_closed(self.name)
                    return
                view = memoryview(data)
                while view:
                    piece = view[:CHUNK]
                    start = link.pacer[self.name].reserve(len(piece), link.profile.rate_bps)
                    delay = start - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    if not link.account(self.name, len(piece)):
                        self.conn.close(reset=True)
                        return
                    self.dst.sendall(piece)
                    view = view[len(piece):]
        except OSError:
            self.conn.close(reset=True)


class _Connection:
    """One client connection through a link, and its upstream connection to the host."""

    def __init__(self, link: Link, client: socket.socket) -> None:
        self.link = link
        self.client = client
        self.upstream: socket.socket | None = None
        self.closed = False
        self._ends: set[str] = set()
        self._lock = threading.Lock()
        self.directions: list[_Direction] = []

    def run(self) -> None:
        """Handshake delay (one RTT), then connect upstream and pump both ways."""
        link = self.link
        try:
            deadline = time.monotonic() + link.profile.rtt_ms / 1000.0
            while time.monotonic() < deadline or link.partitioned:
                if self.closed:
                    return
                time.sleep(0.01)
            self.upstream = socket.create_connection(("127.0.0.1", link.target_port),
                                                     timeout=CONNECT_TIMEOUT_S)
            self.upstream.settimeout(None)
            for sock in (self.client, self.upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            self.close(reset=True)
            return
        if self.closed:
            self.close(reset=True)
            return
        self.directions = [_Direction(self, UP, self.client, self.upstream),
                           _Direction(self, DOWN, self.upstream, self.client)]
        for direction in self.directions:
            direction.start()

    def half_closed(self, name: str) -> None:
        with self._lock:
            self._ends.add(name)
            both = len(self._ends) == 2
        if both:
            self.close()

    def close(self, reset: bool = False) -> None:
        """Close both sockets; with `reset` the peers see a TCP RST, not an orderly end."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        for sock in (self.client, self.upstream):
            if sock is None:
                continue
            with contextlib.suppress(OSError):
                if reset:  # linger 0: close() sends an RST
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            # Wake a reader blocked in recv() first (no FIN is sent for SHUT_RD): a socket
            # another thread still reads is only really closed when that call returns.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RD)
            with contextlib.suppress(OSError):
                sock.close()
        for direction in self.directions:
            direction.wake()
        self.link.forget(self)


class Link:
    """A TCP proxy on 127.0.0.1:`port` forwarding to 127.0.0.1:`target_port` under a Profile."""

    def __init__(self, target_port: int, profile: Profile | None = None, name: str = "") -> None:
        self.target_port = target_port
        self.name = name or f"link->{target_port}"
        self.profile = profile or Profile()
        self.pacer = {UP: _Pacer(), DOWN: _Pacer()}
        self.partitioned = False
        self.bytes = {UP: 0, DOWN: 0}
        self.connections_total = 0
        self._drop: dict[str, int] = {}
        self._lock = threading.Lock()
        self._live: set[_Connection] = set()
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=self.name, daemon=True)
        self._thread.start()

    # configuration -------------------------------------------------------------------------
    def set(self, rtt_ms: float | None = None, rate_bps: float | None | str = "keep") -> None:
        """Change the RTT and/or the bandwidth cap (None lifts it); applies to data read next."""
        self.profile = Profile(self.profile.rtt_ms if rtt_ms is None else rtt_ms,
                               self.profile.rate_bps if rate_bps == "keep" else rate_bps)

    def drop_after(self, nbytes: int, direction: str = UP) -> threading.Event:
        """Reset every connection of the link once `nbytes` more bytes went `direction`; the
        returned event is set when that happened. One shot."""
        if direction not in (UP, DOWN):
            raise LinkError(f"{self.name}: direction {direction!r}: use 'up' or 'down'")
        if nbytes < 0:
            raise LinkError(f"{self.name}: drop_after({nbytes}): give 0 or more bytes")
        event = threading.Event()
        with self._lock:
            self._drop = {"direction": direction, "left": nbytes, "event": event}
        return event

    def cut(self) -> int:
        """Reset every open connection now (a dropped link); return how many there were."""
        with self._lock:
            live = list(self._live)
        for conn in live:
            conn.close(reset=True)
        return len(live)

    def partition(self) -> None:
        """Stop delivering anything, both ways, on every connection, new ones included."""
        self.partitioned = True

    def heal(self) -> None:
        """End a partition: what was held is delivered now."""
        self.partitioned = False
        with self._lock:
            live = list(self._live)
        for conn in live:
            for direction in conn.directions:
                direction.wake()

    @contextlib.contextmanager
    def partitioned_for(self) -> Iterator[Link]:
        """A partition for the duration of the block; heals on exit, whatever happened."""
        self.partition()
        try:
            yield self
        finally:
            self.heal()

    # state ---------------------------------------------------------------------------------

    def account(self, direction: str, size: int) -> bool:
        """Count bytes about to be sent; False when a pending drop says to reset instead."""
        with self._lock:
            drop = self._drop
            if drop and drop["direction"] == direction:
                if drop["left"] < size:
                    self._drop = {}
                    live = list(self._live)
                    fire = drop["event"]
                else:
                    drop["left"] -= size
                    fire = None
            else:
                fire = None
            if fire is None:
                self.bytes[direction] += size
                return True
        for conn in live:
            conn.close(reset=True)
        fire.set()
        return False

    def forget(self, conn: _Connection) -> None:
        with self._lock:
            self._live.discard(conn)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            client.settimeout(None)
            conn = _Connection(self, client)
            with self._lock:
                self._live.add(conn)
                self.connections_total += 1
            threading.Thread(target=conn.run, daemon=True).start()

    def close(self) -> None:
        """Stop accepting and reset every open connection."""
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._server.close()
        self._thread.join(timeout=5)
        self.cut()

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LinkSet:
    """A link in front of every host of a harness run; the run's inventory points at them.

    Use as a context manager: on exit the links close and the inventory points at the hosts'
    direct ports again.
    """

    def __init__(self, harness, profile: Profile | None = None,
                 names: list[str] | None = None) -> None:
        self.harness = harness
        self.links: dict[str, Link] = {}
        for name in names or list(harness.hosts):
            host = harness.hosts[name]
            self.links[name] = Link(host.port, profile, name=f"link-{name}")
        harness.set_routes({name: link.port for name, link in self.links.items()})

    def __getitem__(self, name: str) -> Link:
        return self.links[name]

    def set(self, rtt_ms: float | None = None, rate_bps: float | None | str = "keep") -> None:
        """Apply an RTT and/or bandwidth cap to every link."""
        for link in self.links.values():
            link.set(rtt_ms=rtt_ms, rate_bps=rate_bps)

    def close(self) -> None:
        self.harness.set_routes({})
        for link in self.links.values():
            link.close()

    def __enter__(self) -> LinkSet:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
