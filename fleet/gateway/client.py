"""Client of the control socket: one JSON line out, one JSON line back.

Connection refused or a missing socket is retried for a bounded window, so a client that calls
during a restart gap gets the new gateway instead of an error. So are a full listen backlog
(`EAGAIN` on connect: a burst of clients) and a "busy" answer (the gateway's connection limit),
with a bounded, jittered backoff.
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
_RETRYABLE = (FileNotFoundError, ConnectionRefusedError, BlockingIOError, InterruptedError)
BUSY_RETRY_S = 10.0  # a burst (full backlog, busy gateway) is retried this long at least


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


def _pause(delay: float) -> None:
    """Sleep about `delay`, jittered so that clients retrying together do not retry in step.
    `random` is imported here, on a retry, not in every process that asks a gateway once."""
    import random

    time.sleep(delay * (0.5 + random.random()))


def request(
    sock_path: Path,
    payload: Dict[str, Any],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retry_s: float = DEFAULT_RETRY_S,
) -> Dict[str, Any]:
    """Send one request and return the response dict; ClientError if unreachable after retries."""
    start = time.monotonic()
    deadline = start + max(0.0, retry_s)
    busy_deadline = start + max(retry_s, BUSY_RETRY_S)
    delay = 0.02
    while True:
        resp = _exchange(sock_path, payload, timeout_s, deadline, busy_deadline)
        if resp is not None:
            return resp
        _pause(delay)
        delay = min(delay * 1.5, 0.2)


def _exchange(sock_path: Path, payload: Dict[str, Any], timeout_s: float, deadline: float,
              busy_deadline: float) -> Any:
    """One attempt: the response, or None when the gateway said "busy" and time remains."""
    delay = 0.02
    while True:
        try:
            sock = connect_unix(Path(sock_path), min(timeout_s, 5.0))
            break
        except (BlockingIOError, InterruptedError) as exc:  # backlog full: a burst, not an outage
            if time.monotonic() >= busy_deadline:
                raise ClientError(f"gateway at {sock_path} stayed overloaded: {exc}") from exc
            _pause(delay)
            delay = min(delay * 1.5, 0.2)
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
    if resp.get("busy") is True and time.monotonic() < busy_deadline:
        return None
    return resp
