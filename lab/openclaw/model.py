#!/usr/bin/env python3
"""A scripted OpenAI-compatible model for real OpenClaw gateways in the sandbox and the tests.

OpenClaw's agents talk to a provider over `POST /v1/chat/completions` (streamed as server-sent
events, or not). This server answers from a script instead of a model, so agent turns are
deterministic and every request OpenClaw sends is kept as one JSON line in the request log, where
tests read what really reached the model (the injected recovery context, a child's seed).

The reply to a request is decided from its messages, first match wins:
1. a heartbeat turn (OpenClaw's heartbeat prompt) -> `NO_REPLY`, OpenClaw's silent token;
2. a subagent's run (its first user message carries OpenClaw's `[Subagent Task]`, or only its
   `[Subagent Context]` where the release keeps the task in the system prompt, as 2026.5.x
   does): the task's `[[reply: TEXT]]` directive (from that message, else from the system
   prompt), else `CHILD-DONE`;
3. the latest user message holding `[[spawn: TASK | reply: CHILD-TEXT | label: L]]` (options
   optional) has no tool result after it but OpenClaw's steering skip (a message arriving
   mid-run makes OpenClaw 2026.9.x answer pending calls "Skipped to process an incoming
   message.", and a model makes the call again) -> a call of `sessions_spawn` whose task is TASK
   followed by `[[reply: CHILD-TEXT]]` (so the child answers CHILD-TEXT, rule 2), label L
   (default `child`), mode `run`; made directly when OpenClaw offers `sessions_spawn`, else
   through the Tool Search bridge (`tool_call` with `{"id": "sessions_spawn", "args": {...}}`),
   which is how 2026.9.x offers deferred tools;
4. the last user message holds `[[reply: TEXT]]` -> TEXT;
5. a rule of the `--script` file whose `match` is in the last user message -> its `reply`;
6. otherwise `OK <n>` (n counts requests).

Standard library only and one file, runnable on its own (`python3 model.py --port P --log F`),
so it can be copied to any host with python3 >= 3.9. `--port 0` picks a free port; the first
stdout line is JSON `{"port": P, "pid": PID}` once it listens. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

MODEL_ID = "fleet-scripted"
SERVICE = "fleet scripted model"  # what its /health names, so a starter knows its own
MAX_BODY = 32 * 1024 * 1024  # OpenClaw sends whole transcripts; anything larger is refused
HEARTBEAT_MARKERS = ("heartbeat monitor", "Read HEARTBEAT.md", "HEARTBEAT_OK")
SUBAGENT_TASK = "[Subagent Task]"
SUBAGENT_CONTEXT = "[Subagent Context]"
INTERNAL_CONTEXT = "BEGIN_OPENCLAW_INTERNAL_CONTEXT"
STEERING_SKIP = "Skipped to process an incoming message."
_DIRECTIVE = r"\[\[{}:\s*(.*?)\s*\]\]"

Reply = Tuple[str, Any]  # ("text", str) or ("tool", {"name": ..., "arguments": json str})


def text_of(content: Any) -> str:
    """The text of a message's content (a string or a list of typed parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def directive(name: str, text: str) -> Optional[str]:
    """The value of the last `[[name: value]]` in text, or None."""
    found = re.findall(_DIRECTIVE.format(re.escape(name)), text, re.S)
    return found[-1] if found else None


def spawn_options(value: str) -> Tuple[str, str]:
    """(task, label) from a spawn directive's value `TASK | reply: TEXT | label: L`."""
    task, *options = (part.strip() for part in value.split("|"))
    named = {}
    for option in options:
        key, _, text = option.partition(":")
        named[key.strip()] = text.strip()
    if named.get("reply"):
        task = f"{task} [[reply: {named['reply']}]]"
    return task, named.get("label") or "child"


class Script:
    """Decides replies; thread-safe (the server handles requests on threads)."""

    def __init__(self, rules: Optional[List[Dict[str, str]]] = None) -> None:
        self.rules = list(rules or [])
        self.count = 0
        self.lock = threading.Lock()

    @classmethod
    def load(cls, path: str) -> Script:
        """Rules from a JSON file: `[{"match": "substring", "reply": "text"}, ...]`."""
        with open(path, encoding="utf-8") as fh:
            rules = json.load(fh)
        ok = isinstance(rules, list) and all(
            isinstance(r, dict) and isinstance(r.get("match"), str)
            and isinstance(r.get("reply"), str) for r in rules)
        if not ok:
            raise ValueError(f"{path}: expected a JSON list of "
                             '{"match": "<substring>", "reply": "<text>"} objects')
        return cls(rules)

    def next_index(self) -> int:
        with self.lock:
            self.count += 1
            return self.count

    def decide(self, body: Dict[str, Any], index: int) -> Reply:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"
                 and INTERNAL_CONTEXT not in text_of(m.get("content"))]
        last_user = text_of(messages[users[-1]].get("content")) if users else ""
        if any(marker in last_user for marker in HEARTBEAT_MARKERS):
            return ("text", "NO_REPLY")
        first_user = text_of(messages[users[0]].get("content")) if users else ""
        if SUBAGENT_TASK in first_user or SUBAGENT_CONTEXT in first_user:
            system = "\n".join(text_of(m.get("content")) for m in messages
                               if m.get("role") in ("system", "developer"))
            return ("text", directive("reply", first_user) or directive("reply", system)
                    or "CHILD-DONE")
        spawn = self._pending_spawn(messages, users)
        if spawn is not None:
            return ("tool", self._spawn_call(body, *spawn_options(spawn)))
        reply = directive("reply", last_user)
        if reply is not None:
            return ("text", reply)
        for rule in self.rules:
            if rule["match"] in last_user:
                return ("text", rule["reply"])
        return ("text", f"OK {index}")

    @staticmethod
    def _pending_spawn(messages: List[Dict[str, Any]], users: List[int]) -> Optional[str]:
        """The spawn directive of the latest user message that has one, unless a call made for
        it ran (a tool result other than the steering skip follows it)."""
        for i in reversed(users):
            spawn = directive("spawn", text_of(messages[i].get("content")))
            if spawn is None:
                continue
            ran = any(m.get("role") == "tool" and text_of(m.get("content")) != STEERING_SKIP
                      for m in messages[i + 1:])
            return None if ran else spawn
        return None

    @staticmethod
    def _spawn_call(body: Dict[str, Any], task: str, label: str) -> Dict[str, str]:
        args = {"task": task, "label": label, "mode": "run"}
        offered = [str((t.get("function") or {}).get("name")) for t in body.get("tools") or []
                   if isinstance(t, dict)]
        if "sessions_spawn" in offered or "tool_call" not in offered:
            return {"name": "sessions_spawn", "arguments": json.dumps(args)}
        return {"name": "tool_call",
                "arguments": json.dumps({"id": "sessions_spawn", "args": args})}


class RequestLog:
    """Appends one JSON line per request; a line is written whole under a lock."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        self.lock = threading.Lock()

    def append(self, record: Dict[str, Any]) -> None:
        if not self.path:
            return
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self.lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fleet-scripted-model/1"
    timeout = 60  # a client that stops sending mid-request frees its thread

    def log_message(self, *args: Any) -> None:  # the request log is the record, not stderr
        pass

    def _send_json(self, code: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            return self._send_json(200, {"object": "list", "data": [
                {"id": MODEL_ID, "object": "model", "owned_by": "fleet"}]})
        if self.path.rstrip("/") == "/health":
            return self._send_json(200, {"ok": True, "service": SERVICE, "pid": os.getpid(),
                                         "requests": self.server.script.count})
        return self._send_json(404, {"error": {"message": f"not found: {self.path}"}})

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            return self._send_json(413, {"error": {"message": "bad or too large Content-Length"}})
        raw = self.rfile.read(length) if length else b""
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._send_json(404, {"error": {"message": f"not found: {self.path}"}})
        try:
            body = json.loads(raw.decode("utf-8") or "{}")
            if not isinstance(body, dict):
                raise ValueError("the body is not a JSON object")
        except (UnicodeDecodeError, ValueError) as exc:
            return self._send_json(400, {"error": {"message": f"invalid JSON body: {exc}"}})
        script: Script = self.server.script
        index = script.next_index()
        try:
            kind, payload = script.decide(body, index)
        except Exception as exc:  # a script bug answers this request with an error, nothing more
            kind, payload = "text", f"SCRIPT-ERROR {type(exc).__name__}: {exc}"
        self.server.request_log.append({"t": time.time(), "idx": index, "path": self.path,
                                        "stream": bool(body.get("stream")), "reply_kind": kind,
                                        "reply": payload, "body": body})
        self._answer(body, index, kind, payload)

    def _answer(self, body: Dict[str, Any], index: int, kind: str, payload: Any) -> None:
        cid = f"chatcmpl-fleet-{index}"
        created = int(time.time())
        model = str(body.get("model") or MODEL_ID)
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
        if kind == "tool":
            call = {"id": f"call_fleet_{index}", "type": "function", "function": payload}
            message: Dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": payload}
            finish = "stop"
        if not body.get("stream"):
            return self._send_json(200, {
                "id": cid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
        if kind == "tool":
            delta: Dict[str, Any] = {"tool_calls": [{"index": 0, **call}]}
        else:
            delta = {"content": payload}
        chunks = [
            {"index": 0, "delta": {"role": "assistant"}, "finish_reason": None},
            {"index": 0, "delta": delta, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": finish},
        ]
        for choice in chunks:
            self._event({**base, "choices": [choice]})
        self._event({**base, "choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _event(self, obj: Dict[str, Any]) -> None:
        self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
        self.wfile.flush()


class ModelServer(ThreadingHTTPServer):
    """The HTTP server with its script and request log; `serve_forever` in any thread."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int = 0, log_path: Optional[str] = None,
                 script: Optional[Script] = None, host: str = "127.0.0.1") -> None:
        super().__init__((host, port), Handler)
        self.script = script or Script()
        self.request_log = RequestLog(log_path)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-stream is normal (OpenClaw aborts runs); never a traceback.
        exc = sys.exc_info()[1]
        if not isinstance(exc, (BrokenPipeError, ConnectionResetError, TimeoutError)):
            super().handle_error(request, client_address)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--log", default=None, help="request log, one JSON line per request")
    parser.add_argument("--script", default=None,
                        help='JSON rules [{"match": "...", "reply": "..."}] (optional)')
    args = parser.parse_args(argv)
    try:
        script = Script.load(args.script) if args.script else Script()
        server = ModelServer(args.port, args.log, script)
    except (OSError, ValueError) as exc:
        print(f"scripted model: {exc}", file=sys.stderr)
        return 2
    # SIGTERM ends serve_forever from another thread (shutdown() would deadlock in the handler).
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(json.dumps({"port": server.port, "pid": os.getpid()}), flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
