"""A direct client for a running OpenClaw gateway's RPC (WebSocket + JSON frames), stdlib only.

Why: every `openclaw gateway call` boots OpenClaw's CLI as a fresh Node process, 4-17 s each on a
2-core host, and a deploy or rollback makes several of them; the same RPC over the gateway's own
socket takes milliseconds. The wire contract (OpenClaw gateway protocol v4,
https://docs.openclaw.ai/gateway/protocol): WebSocket text frames on the gateway port; the
gateway opens with a `connect.challenge` event, the client's first request is `connect`, then
requests `{type: "req", id, method, params}` are answered by `{type: "res", id, ok,
payload | error}`; events in between are ignored here.

fleet connects as OpenClaw's trusted local backend client (`client.id: "gateway-client"`,
`mode: "backend"`), which the gateway admits without a device identity only on a direct loopback
connection with its shared secret (or with auth mode `none`). Anything else (TLS, a secret held
as a SecretRef, trusted-proxy or Tailscale auth, a refused handshake) is `Unsupported`: the
caller goes through the CLI instead, which has the user's device identity and secret resolution.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import struct
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from fleet.continuity import ids

# Gateway protocol versions this client speaks: 3 (OpenClaw 2026.4.x) and 4 (2026.9.x, whose
# MIN_CLIENT_PROTOCOL_VERSION is 4); the gateway picks one within the range.
MIN_PROTOCOL, MAX_PROTOCOL = 3, 4
SCOPES = ["operator.read", "operator.write", "operator.admin"]
MAX_MESSAGE = 64 * 1024 * 1024  # a listing is ~100 KB; anything this large is not an answer
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class GatewayUnreachable(OSError):
    """Nothing (or not a WebSocket gateway) answers on the port: the gateway is down."""


class Unsupported(RuntimeError):
    """The direct path cannot be used for this gateway (the reason says why); use the CLI."""


class CallError(RuntimeError):
    """The gateway answered a request with an error frame."""

    def __init__(self, method: str, error: Dict[str, Any]):
        self.method, self.error = method, error
        self.code = str(error.get("code") or "")
        self.message = str(error.get("message") or error)
        super().__init__(f"{method}: {self.message}")


def auth_for(config: Mapping[str, Any], env: Mapping[str, str]) -> Dict[str, str]:
    """The connect `auth` for a gateway configured by `config` (openclaw.json), or Unsupported.

    The secret comes from the environment the CLI would see (OPENCLAW_GATEWAY_TOKEN /
    OPENCLAW_GATEWAY_PASSWORD) or from the file when it holds a plain string.
    """
    gateway = config.get("gateway") if isinstance(config.get("gateway"), dict) else {}
    if gateway.get("mode") == "remote":
        raise Unsupported("gateway.mode is remote: the gateway is not on this host")
    tls = gateway.get("tls") if isinstance(gateway.get("tls"), dict) else {}
    if tls.get("enabled"):
        raise Unsupported("gateway.tls is enabled (fleet's direct client speaks ws:// only)")
    auth = gateway.get("auth") if isinstance(gateway.get("auth"), dict) else {}
    mode = auth.get("mode")
    if auth.get("allowTailscale") and mode not in ("token", "password", "none"):
        raise Unsupported("gateway.auth uses Tailscale identity")
    found: Dict[str, str] = {}
    for kind in ("token", "password"):
        value = env.get(f"OPENCLAW_GATEWAY_{kind.upper()}") or auth.get(kind)
        if isinstance(value, str) and value:
            found[kind] = value
        elif value is not None and mode in (None, kind):
            raise Unsupported(f"gateway.auth.{kind} is not a plain string (a SecretRef?)")
    if mode == "none":
        return {}
    if mode in ("token", "password"):
        if mode not in found:
            raise Unsupported(
                f"gateway.auth.mode is {mode} but no {mode} is set in the file or "
                f"in OPENCLAW_GATEWAY_{mode.upper()}"
            )
        return {mode: found[mode]}
    if mode is not None:
        raise Unsupported(f"gateway.auth.mode is {mode!r}")
    return found  # no mode: OpenClaw infers it from the secret that is set (or none)


class GatewayRpc:
    """One WebSocket session with a gateway on 127.0.0.1:`port` (see module doc).

    Use as a context manager, or `open()` / `close()`. Every read and write is bounded by the
    deadline of the call in progress, so nothing here waits without a timeout.
    """

    def __init__(
        self,
        port: int,
        auth: Dict[str, str],
        host: str = "127.0.0.1",
        client_version: str = "fleet",
    ):
        self.port, self.auth, self.host = port, auth, host
        self.client_version = client_version
        self.sock: Optional[socket.socket] = None
        self.hello: Dict[str, Any] = {}
        self._buf = b""
        self._upgraded = False

    # -- session -----------------------------------------------------------------------
    def __enter__(self) -> GatewayRpc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self, timeout: float) -> Dict[str, Any]:
        """Connect and handshake; returns the gateway's `hello-ok` payload.

        A gateway still starting answers `connect` with a retryable UNAVAILABLE: retried within
        `timeout`. A refused handshake (auth, device identity) is Unsupported.
        """
        deadline = time.monotonic() + timeout
        while True:
            self._connect(deadline)
            try:
                self.hello = self._handshake(deadline)
                return self.hello
            except CallError as exc:
                self.close()
                retry_ms = exc.error.get("retryAfterMs")
                if exc.error.get("retryable") and time.monotonic() < deadline:
                    time.sleep(
                        min(
                            max(float(retry_ms or 200), 50.0) / 1000.0,
                            max(0.0, deadline - time.monotonic()),
                        )
                    )
                    continue
                if exc.error.get("retryable"):
                    raise GatewayUnreachable(
                        f"gateway on port {self.port} still starting after "
                        f"{timeout:.0f}s: {exc.message}"
                    ) from None
                raise Unsupported(
                    f"the gateway refused fleet's direct connect: {exc.message}"
                ) from None
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        if self.sock is not None:
            if self._upgraded:  # a polite close frame; the socket closes either way
                try:
                    self._send_frame(0x8, struct.pack("!H", 1000), time.monotonic() + 0.5)
                except OSError:
                    pass
            self._drop()

    def _drop(self) -> None:
        """Forget the connection (closed by the peer, or being closed here)."""
        sock, self.sock, self._buf, self._upgraded = self.sock, None, b"", False
        if sock is not None:
            sock.close()

    def call(
        self, method: str, params: Optional[Dict[str, Any]] = None, timeout: float = 60.0
    ) -> Dict[str, Any]:
        """One request; its `payload`, or CallError with the gateway's error."""
        if self.sock is None:
            self.open(timeout)
        deadline = time.monotonic() + timeout
        return self._request(method, params if params is not None else {}, deadline)

    # -- protocol ------------------------------------------------------------------------
    def _handshake(self, deadline: float) -> Dict[str, Any]:
        first = self._recv_json(deadline)  # connect.challenge (not needed without a device)
        if not (first.get("type") == "event" and first.get("event") == "connect.challenge"):
            raise Unsupported(
                f"port {self.port}: no connect.challenge (first frame {str(first)[:80]}); "
                "not an OpenClaw gateway of protocol v4?"
            )
        params: Dict[str, Any] = {
            "minProtocol": MIN_PROTOCOL,
            "maxProtocol": MAX_PROTOCOL,
            "client": {
                "id": "gateway-client",
                "version": self.client_version,
                "platform": "linux" if os.name == "posix" else os.name,
                "mode": "backend",
                "displayName": "fleet installer",
            },
            "role": "operator",
            "scopes": list(SCOPES),
            "caps": [],
        }
        if self.auth:
            params["auth"] = dict(self.auth)
        hello = self._request("connect", params, deadline)
        granted = (
            (hello.get("auth") or {}).get("scopes") if isinstance(hello.get("auth"), dict) else None
        )
        if isinstance(granted, list) and "operator.admin" not in granted:
            raise CallError(
                "connect",
                {
                    "message": "the gateway granted fleet's backend "
                    f"connection only {granted}, not operator.admin"
                },
            )
        return hello

    def _request(self, method: str, params: Dict[str, Any], deadline: float) -> Dict[str, Any]:
        rid = ids.uuid4_hex()
        frame = {"type": "req", "id": rid, "method": method, "params": params}
        self._send_frame(0x1, json.dumps(frame).encode("utf-8"), deadline)
        while True:
            msg = self._recv_json(deadline)
            if msg.get("type") != "res" or msg.get("id") != rid:
                continue  # events (ticks, presence, plugins.changed) and others' answers
            if msg.get("ok"):
                payload = msg.get("payload")
                return payload if isinstance(payload, dict) else {"value": payload}
            error = msg.get("error")
            raise CallError(method, error if isinstance(error, dict) else {"message": str(error)})

    # -- WebSocket (RFC 6455, client side) ----------------------------------------------------
    def _connect(self, deadline: float) -> None:
        try:
            self.sock = socket.create_connection(
                (self.host, self.port), timeout=_left(deadline, self.port)
            )
        except OSError as exc:
            raise GatewayUnreachable(f"no gateway on {self.host}:{self.port}: {exc}") from None
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        request = (
            f"GET / HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\nUser-Agent: fleet-installer\r\n\r\n"
        )
        self._sendall(request.encode("ascii"), deadline)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self._recv_some(deadline)
            head += chunk
            if len(head) > 65536:
                break
        head, _, self._buf = head.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
        }
        accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode("ascii")).digest())
        if lines[0].split(" ")[1:2] != ["101"] or headers.get(
            "sec-websocket-accept"
        ) != accept.decode("ascii"):
            self.close()
            raise Unsupported(f"port {self.port}: no WebSocket upgrade ({lines[0][:60]})")
        self._upgraded = True

    def _send_frame(self, opcode: int, data: bytes, deadline: float) -> None:
        head = bytes([0x80 | opcode])
        n = len(data)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        self._sendall(head + mask + _mask(data, mask), deadline)

    def _recv_json(self, deadline: float) -> Dict[str, Any]:
        text = self._recv_message(deadline)
        try:
            msg = json.loads(text)
        except ValueError:
            raise GatewayUnreachable(f"port {self.port}: a frame that is not JSON") from None
        return msg if isinstance(msg, dict) else {}

    def _recv_message(self, deadline: float) -> bytes:
        parts: List[bytes] = []
        size = 0
        while True:
            fin, opcode, data = self._recv_frame(deadline)
            if opcode == 0x8:
                code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1005
                reason = data[2:].decode("utf-8", "replace")
                self._drop()
                raise GatewayUnreachable(f"gateway closed the connection ({code} {reason})")
            if opcode == 0x9:
                self._send_frame(0xA, data, deadline)
                continue
            if opcode == 0xA:
                continue
            parts.append(data)
            size += len(data)
            if size > MAX_MESSAGE:
                raise GatewayUnreachable(f"port {self.port}: a message over {MAX_MESSAGE} bytes")
            if fin:
                return b"".join(parts)

    def _recv_frame(self, deadline: float) -> Tuple[bool, int, bytes]:
        b0, b1 = self._read(2, deadline)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2, deadline))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8, deadline))[0]
        if n > MAX_MESSAGE:
            raise GatewayUnreachable(f"port {self.port}: a frame of {n} bytes")
        mask = self._read(4, deadline) if b1 & 0x80 else b""
        data = self._read(n, deadline)
        return bool(b0 & 0x80), b0 & 0x0F, _mask(data, mask) if mask else data

    def _read(self, n: int, deadline: float) -> bytes:
        while len(self._buf) < n:
            self._buf += self._recv_some(deadline)
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _recv_some(self, deadline: float) -> bytes:
        sock = self._live()
        sock.settimeout(_left(deadline, self.port))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            raise TimeoutError(f"gateway on port {self.port} did not answer in time") from None
        if not chunk:
            self._drop()
            raise GatewayUnreachable(f"gateway on port {self.port} closed the connection")
        return chunk

    def _sendall(self, data: bytes, deadline: float) -> None:
        sock = self._live()
        sock.settimeout(_left(deadline, self.port))
        try:
            sock.sendall(data)
        except socket.timeout:
            raise TimeoutError(
                f"gateway on port {self.port} did not take a request in time"
            ) from None

    def _live(self) -> socket.socket:
        if self.sock is None:
            raise GatewayUnreachable(f"no connection to the gateway on port {self.port}")
        return self.sock


def _left(deadline: float, port: int) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"gateway on port {port} did not answer in time")
    return left


def _mask(data: bytes, mask: bytes) -> bytes:
    if not data:
        return data
    key = (mask * (len(data) // 4 + 1))[: len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(len(data), "big")
