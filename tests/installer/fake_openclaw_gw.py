"""A tiny stand-in for an OpenClaw gateway's socket on 127.0.0.1 (stdlib, in a thread).

It speaks what fleet's direct RPC client needs of the real one: `/readyz` over HTTP, and on the
same port the WebSocket protocol (connect.challenge, `connect` with the shared secret, requests
answered by `res` frames). A test scripts its answers per method and reads what was called.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socketserver
import struct
import threading
from typing import Any, Dict, List, Optional, Tuple

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
Answer = Tuple[bool, Dict[str, Any]]  # (ok, payload or error)


class FakeGateway(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, token: Optional[str] = None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.token = token
        self.starting = 0  # connects answered "gateway starting; retry" before the real one
        self.chatty = False  # an event and a ping before each answer
        self.fragment = False  # answers split into continuation frames
        self.plain_http = False  # no WebSocket on this port (another service)
        self.ready = True  # what /readyz says
        self.version = "2026.9.6"  # its hello-ok's server.version
        self.lists_methods = True  # its hello-ok lists the methods it answers (features.methods)
        self.answers: Dict[str, List[Any]] = {}  # method -> answers, the last one repeats
        self.calls: List[Tuple[str, Dict[str, Any]]] = []
        self.connects: List[Dict[str, Any]] = []
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server_address[1]

    def answer(self, method: str, *answers: Any) -> None:
        """Each answer: a payload dict, an `error(...)`, or None (never answer)."""
        self.answers[method] = list(answers)

    def next_answer(self, method: str, params: Dict[str, Any]) -> Optional[Answer]:
        queue = self.answers.get(method)
        if not queue:
            return False, {"code": "INVALID_REQUEST", "message": f"unknown method {method}"}
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        if callable(item):
            item = item(params)
        if item is None:
            return None
        if isinstance(item, _Error):
            return False, item.error
        return True, item

    def __enter__(self) -> FakeGateway:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class _Error:
    def __init__(self, error: Dict[str, Any]):
        self.error = error


def error(code: str, message: str, **extra: Any) -> _Error:
    return _Error(dict(extra, code=code, message=message))


class _Handler(socketserver.StreamRequestHandler):
    server: FakeGateway

    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            head += chunk
        lines = head.decode("latin-1").split("\r\n")
        headers = {
            k.strip().lower(): v.strip()
            for k, _, v in (line.partition(":") for line in lines[1:] if line)
        }
        if headers.get("upgrade", "").lower() != "websocket" or self.server.plain_http:
            ok = lines[0].startswith("GET /readyz ")
            body = (b'{"ready":%s}' % (b"true" if self.server.ready else b"false")) if ok \
                else b"not found"
            status = ("200 OK" if self.server.ready else "503 Service Unavailable") if ok \
                else "404 Not Found"
            self.request.sendall(
                f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            return
        accept = base64.b64encode(
            hashlib.sha1((headers["sec-websocket-key"] + GUID).encode()).digest()
        ).decode()
        self.request.sendall(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            ).encode()
        )
        self.send(
            {"type": "event", "event": "connect.challenge", "payload": {"nonce": "n", "ts": 1}}
        )
        connect = self.recv()
        if connect is None:
            return
        self.server.connects.append(connect["params"])
        if self.server.starting > 0:
            self.server.starting -= 1
            self.reply(
                connect,
                False,
                {
                    "code": "UNAVAILABLE",
                    "retryable": True,
                    "retryAfterMs": 20,
                    "message": "gateway starting; retry shortly",
                },
            )
            return
        given = (connect["params"].get("auth") or {}).get("token")
        if self.server.token is not None and given != self.server.token:
            self.reply(
                connect,
                False,
                {"code": "INVALID_REQUEST", "message": "unauthorized: gateway token mismatch"},
            )
            self.frame(0x8, struct.pack("!H", 1008) + b"unauthorized")
            return
        hello = {
            "type": "hello-ok",
            "protocol": 4,
            "server": {"version": self.server.version, "connId": "c1"},
            "auth": {"role": "operator", "scopes": connect["params"]["scopes"]},
        }
        if self.server.lists_methods:
            hello["features"] = {"methods": sorted(self.server.answers), "events": []}
        self.reply(connect, True, hello)
        while True:
            req = self.recv()
            if req is None:
                return
            self.server.calls.append((req["method"], req.get("params") or {}))
            answer = self.server.next_answer(req["method"], req.get("params") or {})
            if answer is None:
                continue  # a gateway that never answers this one
            if self.server.chatty:
                self.send({"type": "event", "event": "tick", "payload": {"ts": 2}})
                self.frame(0x9, b"ping")
            self.reply(req, *answer)

    def reply(self, req: Dict[str, Any], ok: bool, body: Dict[str, Any]) -> None:
        frame = {"type": "res", "id": req["id"], "ok": ok}
        frame["payload" if ok else "error"] = body
        self.send(frame)

    def send(self, obj: Dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        if self.server.fragment and len(data) > 10:
            third = len(data) // 3
            self.frame(0x1, data[:third], fin=False)
            self.frame(0x0, data[third : 2 * third], fin=False)
            self.frame(0x0, data[2 * third :])
        else:
            self.frame(0x1, data)

    def frame(self, opcode: int, data: bytes, fin: bool = True) -> None:
        n = len(data)
        head = bytes([(0x80 if fin else 0) | opcode])
        if n < 126:
            head += bytes([n])
        elif n < 65536:
            head += bytes([126]) + struct.pack("!H", n)
        else:
            head += bytes([127]) + struct.pack("!Q", n)
        self.request.sendall(head + data)

    def recv(self) -> Optional[Dict[str, Any]]:
        """The next text message from the client (pongs skipped); None once it closes."""
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return None
            opcode, n = head[0] & 0x0F, head[1] & 0x7F
            if n == 126:
                n = struct.unpack("!H", self.rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self.rfile.read(8))[0]
            if not head[1] & 0x80:
                return None  # RFC 6455: a client frame must be masked; the server closes
            mask = self.rfile.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if opcode == 0x8:
                return None
            if opcode == 0x1:
                return json.loads(data)
