"""The control socket server: JSON lines over `<state>/run/gateway.sock`, one thread per client.

Shutdown is graceful: stop accepting, remove the socket, let in-flight requests finish (bounded),
then return. Transcripts are fsynced on every append, so nothing is left to flush after that.
"""

from __future__ import annotations

import json
import logging
import os
import select
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional

log = logging.getLogger("fleet.gateway.control")
MAX_LINE = 32 * 1024 * 1024
IDLE_TIMEOUT_S = 120.0


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
        sock.listen(64)
    except BaseException:
        sock.close()
        raise
    return sock


class ControlServer:
    """Accept loop + per-connection threads around a `handle(request) -> response` function."""

    def __init__(self, path: Path, handle: Callable[[Any], Dict[str, Any]]) -> None:
        self.path = Path(path)
        self.handle = handle
        self.stop_event = threading.Event()
        self._sock: Optional[socket.socket] = None
        self._inflight = 0
        self._cond = threading.Condition()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    def bind(self) -> None:
        self._sock = bind_unix(self.path)
        self._sock.setblocking(False)

    def serve(self, should_stop: Callable[[], bool]) -> None:
        """Accept until `should_stop()` or `stop()`; does not drain (see `close`)."""
        assert self._sock is not None, "bind() first"
        while not self.stop_event.is_set() and not should_stop():
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
            except OSError:
                if self.stop_event.is_set():
                    break
                raise
            conn.setblocking(True)
            threading.Thread(target=self._serve_conn, args=(conn,), daemon=True).start()

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
        """Stop listening, unlink the socket, wait for in-flight requests; True if all finished."""
        self.stop_event.set()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            for fd in (self._wake_r, self._wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        deadline = time.monotonic() + drain_timeout_s
        with self._cond:
            while self._inflight and time.monotonic() < deadline:
                self._cond.wait(max(0.0, min(0.1, deadline - time.monotonic())))
            return self._inflight == 0

    def _serve_conn(self, conn: socket.socket) -> None:
        conn.settimeout(IDLE_TIMEOUT_S)
        buf = b""
        try:
            while True:
                while b"\n" not in buf:
                    if self.stop_event.is_set() and not buf:
                        return
                    chunk = conn.recv(65536)
                    if not chunk:
                        if buf.strip():
                            self._answer(conn, buf)
                        return
                    buf += chunk
                    if len(buf) > MAX_LINE:
                        self._send(conn, {"ok": False, "error": "request line too long"})
                        return
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    self._answer(conn, line)
        except (OSError, socket.timeout):
            return
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, line: bytes) -> None:
        with self._cond:
            self._inflight += 1
        try:
            try:
                request = json.loads(line.decode("utf-8"))
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
            data = json.dumps(response, ensure_ascii=False, default=str)
        except (TypeError, ValueError) as exc:
            data = json.dumps({"ok": False, "error": f"response not serialisable: {exc}"})
        conn.sendall((data + "\n").encode("utf-8"))
