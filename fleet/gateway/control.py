"""The control socket server: JSON lines over `<state>/run/gateway.sock`, one thread per client.

Shutdown is graceful: stop accepting, remove the socket, let in-flight requests finish (bounded),
then return. Transcripts are fsynced on every append, so nothing is left to flush after that.

Limits (a client can never exhaust the process): at most `max_connections` open connections (a
share of RLIMIT_NOFILE; the excess is answered "busy" and closed, and the client retries), a
request line of at most MAX_LINE bytes, idle connections closed after IDLE_TIMEOUT_S, and
`accept` backing off on EMFILE/ENFILE instead of ending the serve loop. The largest legitimate
request is one agent turn (`session.turn`/`session.messages` with its new messages); MAX_LINE
leaves room for a turn of ~1M tokens of text, far above what one model turn produces.
"""

from __future__ import annotations

import ctypes
import errno
import json
import logging
import os
import resource
import select
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from fleet.continuity import strictjson

log = logging.getLogger("fleet.gateway.control")
MAX_LINE = 4 * 1024 * 1024
IDLE_TIMEOUT_S = 15.0  # between requests on one connection (clients send one request each)
MAX_CONNECTIONS = 256
BACKLOG = 1024
BUSY_ERROR = "gateway busy: too many open connections; retry"
_ACCEPT_BACKOFF_S = (0.01, 0.5)  # first and longest pause when out of file descriptors
_LARGE = 256 * 1024  # after a request this large, hand freed heap pages back to the system
_TRIM_EVERY_S = 1.0  # and when the last connection closes, at most this often
FIRST_REQUEST_GRACE_S = 2.0  # after stop: how long a new connection may take to send its request


def bind_unix(path: Path) -> socket.socket:
    """Listen on `path` (replacing a stale socket); long paths are bound via a chdir."""
    if path.exists() or path.is_symlink():
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if len(str(path).encode()) > 100:
            cwd = os.getcwd()
            os.chdir(str(path.parent))
            try:
                sock.bind(path.name)
            finally:
                os.chdir(cwd)
        else:
            sock.bind(str(path))
        os.chmod(str(path), 0o600)
        sock.listen(BACKLOG)  # the kernel caps it at net.core.somaxconn
    except BaseException:
        sock.close()
        raise
    return sock


def connection_limit() -> int:
    """MAX_CONNECTIONS, or fewer when RLIMIT_NOFILE is low: half the descriptors stay free for
    transcripts, state files, locks and plugin work."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(4, min(MAX_CONNECTIONS, soft // 2 - 16))


def _libc() -> Any:
    """This process's own symbols (dlopen(NULL)), libc's among them: `ctypes.util.find_library`
    runs `ldconfig -p` in a child process, which cost a gateway start ~20 ms of CPU."""
    try:
        return ctypes.CDLL(None)
    except (OSError, TypeError):
        return None


_LIBC = _libc()
_MALLOC_TRIM = getattr(_LIBC, "malloc_trim", None)  # glibc only; absent on macOS/musl
if _MALLOC_TRIM is not None:
    _MALLOC_TRIM.argtypes = [ctypes.c_size_t]
_M_ARENA_MAX = -8
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 64 * 1024


def limit_arenas(count: int = 2) -> None:
    """Cap glibc's malloc arenas (default 8 per core): with a thread per connection, each
    concurrent burst otherwise spreads the heap over many arenas that are never given back, and
    the resident size ratchets up after every burst (the MALLOC_ARENA_MAX=2 remedy, applied
    from inside). Also fix the mmap threshold at MMAP_THRESHOLD: glibc raises it (up to 32 MiB)
    each time a large block is freed, after which large transient buffers (a connection's
    64 KiB receive buffer, an index being written, a transcript being read) are carved from the
    heaps and leave holes there; mapped on their own, they go back to the system when freed.
    No-op where glibc's mallopt is absent."""
    mallopt = getattr(_LIBC, "mallopt", None)
    if mallopt is not None and _MALLOC_TRIM is not None:
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt(_M_ARENA_MAX, count)
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def release_memory() -> None:
    """Return freed heap pages to the system (glibc keeps a large request's buffers otherwise)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


class ControlServer:
    """Accept loop + per-connection threads around a `handle(request) -> response` function."""

    def __init__(self, path: Path, handle: Callable[[Any], Dict[str, Any]]) -> None:
        self.path = Path(path)
        self.handle = handle
        self.stop_event = threading.Event()
        self._sock: Optional[socket.socket] = None
        self._inflight = 0
        self._open = 0  # connections accepted and not yet closed
        self._trimmed = 0.0
        self.max_connections = connection_limit()
        self._fresh = 0  # connections accepted that have not had their first answer yet
        self._cond = threading.Condition()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    def bind(self) -> None:
        limit_arenas()  # before the first connection thread
        self._sock = bind_unix(self.path)
        self._sock.setblocking(False)

    def serve(self, should_stop: Callable[[], bool]) -> None:
        """Accept until `should_stop()` or `stop()`; does not drain (see `close`)."""
        assert self._sock is not None, "bind() first"
        backoff = 0.0
        while not self.stop_event.is_set() and not should_stop():
            if backoff:  # out of descriptors: pending clients wait in the backlog meanwhile
                self.stop_event.wait(backoff)
            try:
                ready, _, _ = select.select([self._sock, self._wake_r], [], [], 0.5)
            except InterruptedError:
                continue
            if self._sock not in ready:
                continue
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:
                if self.stop_event.is_set():
                    break
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    backoff = min(max(backoff * 2, _ACCEPT_BACKOFF_S[0]), _ACCEPT_BACKOFF_S[1])
                    log.warning("accept: %s; retrying in %.2fs (%d connections open)",
                                exc.strerror, backoff, self._open)
                    continue
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EINTR):
                    continue
                raise
            backoff = 0.0
            conn.setblocking(True)
            if self._open >= self.max_connections:
                self._refuse(conn)
                continue
            self._start_conn(conn)

    @staticmethod
    def _refuse(conn: socket.socket) -> None:
        """Answer a connection over the limit at once (the client retries) and close it."""
        try:
            conn.settimeout(0.5)
            conn.sendall((json.dumps({"ok": False, "error": BUSY_ERROR, "busy": True})
                          + "\n").encode("utf-8"))
        except OSError:
            pass
        finally:
            conn.close()

    def _start_conn(self, conn: socket.socket) -> None:
        """A thread per connection; until it answered its first request it counts as `fresh`,
        and shutdown waits for it (its client is already waiting for that answer)."""
        with self._cond:
            self._fresh += 1
            self._open += 1
        try:
            threading.Thread(target=self._serve_conn, args=(conn,), daemon=True).start()
        except RuntimeError:  # can't start new thread: refuse this one, keep serving the rest
            with self._cond:
                self._fresh -= 1
                self._open -= 1
            self._refuse(conn)

    def stop(self) -> None:
        """Wake the accept loop at once (safe from a signal handler)."""
        self.stop_event.set()
        self.wake()

    def wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass

    def close(self, drain_timeout_s: float = 10.0) -> bool:
        """Unlink the socket first (a client connecting now finds none and retries), answer the
        connections already queued in the listen backlog or accepted but not yet read (closing
        them would lose those requests: the client sees a reset or an empty answer), then stop
        listening and wait for in-flight requests; True if all finished."""
        self.stop_event.set()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        if self._sock is not None:
            while True:  # the backlog: connections the kernel accepted for us
                try:
                    conn, _ = self._sock.accept()
                except OSError:  # BlockingIOError: backlog empty
                    break
                conn.setblocking(True)
                self._start_conn(conn)
            self._sock.close()
            self._sock = None
            for fd in (self._wake_r, self._wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
        deadline = time.monotonic() + drain_timeout_s
        with self._cond:
            while (self._inflight or self._fresh) and time.monotonic() < deadline:
                self._cond.wait(max(0.0, min(0.1, deadline - time.monotonic())))
            return self._inflight == 0 and self._fresh == 0

    def _serve_conn(self, conn: socket.socket) -> None:
        conn.settimeout(IDLE_TIMEOUT_S)
        buf = bytearray()
        fresh = True
        large = False
        try:
            while True:
                scanned = 0
                while buf.find(b"\n", scanned) < 0:
                    scanned = len(buf)
                    if self.stop_event.is_set() and not buf:
                        if not fresh:
                            return  # an idle kept-alive connection: nothing is lost
                        conn.settimeout(FIRST_REQUEST_GRACE_S)  # its request is on its way
                    chunk = conn.recv(65536)
                    if not chunk:
                        if bytes(buf).strip():
                            self._answer(conn, bytes(buf))
                        return
                    buf += chunk
                    if len(buf) > MAX_LINE:
                        large = True
                        self._send(conn, {"ok": False, "error": (
                            f"request larger than {MAX_LINE // (1024 * 1024)} MiB; split it "
                            "(e.g. several session.messages calls)")})
                        return
                end = buf.find(b"\n")
                line = bytes(buf[:end])
                del buf[:end + 1]
                large = large or len(line) > _LARGE
                if line.strip():
                    self._answer(conn, line)
                    if fresh:
                        fresh = False
                        self._done_fresh()
                del line
        except (OSError, socket.timeout):
            return
        finally:
            conn.close()
            del buf
            with self._cond:
                self._open -= 1
                idle = self._open == 0
            if fresh:
                self._done_fresh()
            if large or (idle and time.monotonic() - self._trimmed > _TRIM_EVERY_S):
                self._trimmed = time.monotonic()
                release_memory()  # a burst is over: give its buffers and thread arenas back

    def _done_fresh(self) -> None:
        with self._cond:
            self._fresh -= 1
            self._cond.notify_all()

    def _answer(self, conn: socket.socket, line: bytes) -> None:
        with self._cond:
            self._inflight += 1
        try:
            try:
                request = strictjson.loads(line.decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                response = {"ok": False, "error": f"request is not valid JSON: {exc}"}
            else:
                response = self.handle(request)
            self._send(conn, response)
        finally:
            with self._cond:
                self._inflight -= 1
                self._cond.notify_all()

    @staticmethod
    def _send(conn: socket.socket, response: Dict[str, Any]) -> None:
        try:
            data = strictjson.dumps(response, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError) as exc:
            data = json.dumps({"ok": False, "error": f"response not serialisable: {exc}"})
        conn.sendall((data + "\n").encode("utf-8"))
