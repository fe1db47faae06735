"""Client of the control socket: one JSON line out, one JSON line back.

Connection refused or a missing socket is retried for a bounded window, so a client that calls
during a restart gap gets the new gateway instead of an error.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRY_S = 5.0
_RETRYABLE = (FileNotFoundError, ConnectionRefusedError)


class ClientError(RuntimeError):
    """The gateway could not be reached or answered garbage; the message says which socket."""


def connect_unix(path: Path, timeout_s: float) -> socket.socket:
    """Connect, coping with socket paths longer than sun_path allows (via the directory fd)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    target = str(path)
    dir_fd = None
    try:
        if len(target.encode()) > 100 and os.path.isdir("/proc/self/fd"):
            dir_fd = os.open(str(Path(path).parent), os.O_RDONLY)
            target = f"/proc/self/fd/{dir_fd}/{Path(path).name}"
        sock.connect(target)
        return sock
    except BaseException:
        sock.close()
        raise
    finally:
        if dir_fd is not None:
            os.close(dir_fd)


def request(
    sock_path: Path,
    payload: Dict[str, Any],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retry_s: float = DEFAULT_RETRY_S,
) -> Dict[str, Any]:
    """Send one request and return the response dict; ClientError if unreachable after retries."""
    deadline = time.monotonic() + max(0.0, retry_s)
    delay = 0.02
    while True:
        try:
            sock = connect_unix(Path(sock_path), min(timeout_s, 5.0))
            break
        except _RETRYABLE as exc:
            if time.monotonic() >= deadline:
                raise ClientError(
                    f"gateway not reachable at {sock_path}: {exc.strerror or exc}; "
                    "is it running? (python3 -m fleet.gateway --state-dir ... status)"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 1.5, 0.2)
        except OSError as exc:
            raise ClientError(f"cannot connect to {sock_path}: {exc}") from exc
    try:
        sock.settimeout(timeout_s)
        sock.sendall((json.dumps(payload) + "\n").encode("utf-8"))
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
    except socket.timeout as exc:
        raise ClientError(f"no answer from {sock_path} within {timeout_s:g}s") from exc
    except OSError as exc:
        raise ClientError(f"connection to {sock_path} failed: {exc}") from exc
    finally:
        sock.close()
    if not buf.strip():
        raise ClientError(f"gateway at {sock_path} closed the connection without answering")
    try:
        resp = json.loads(buf.decode("utf-8"))
    except ValueError as exc:
        raise ClientError(f"gateway at {sock_path} sent invalid JSON: {buf[:200]!r}") from exc
    if not isinstance(resp, dict) or "ok" not in resp:
        raise ClientError(f"gateway at {sock_path} sent an unexpected answer: {resp!r}")
    return resp
