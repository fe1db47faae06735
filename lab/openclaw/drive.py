"""Driving one sandbox OpenClaw host as its user would: agent turns, chat commands, and what the
gateway and the scripted model saw. Shared by the real-OpenClaw tests and the compat matrix.

Turns go through the gateway's own `agent` and `agent.wait` RPCs (what `openclaw agent` sends),
not the CLI: two `openclaw agent` processes at once on 2026.4.24 race on its bundled plugins'
runtime root (one fails with ENOTEMPTY). `/mc` goes through `chat.send`, as a chat app sends it
(`openclaw agent --message "/mc"` would hand it to the model instead).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from fleet.continuity import snapshot
from fleet.deploy.inventory import Host
from fleet.installer.openclawgw import OpenclawManager, RpcError
from lab.openclaw import sandbox

MAIN_SESSION = "agent:main:main"
PLUGIN_IDS = ("memory-continuity", "mc")


class TurnFailed(AssertionError):
    """An agent turn did not end `ok` (its `agent.wait` answer says how)."""


class Driver:
    """One sandbox OpenClaw host (already resolved by `sandbox.resolve`)."""

    def __init__(self, host: Host) -> None:
        self.host = host

    @property
    def state(self) -> Path:
        return Path(self.host.state_dir)

    @property
    def memory(self) -> Path:
        return self.state / "workspace" / "memory"

    def manager(self) -> OpenclawManager:
        return OpenclawManager(self.state, dict(self.host.manager_options))

    def loaded(self) -> dict:
        """{plugin id: version} of the fleet plugins whose worker answers in the running gateway
        (each plugin's own `<id>.ready`: every OpenClaw release has it)."""
        out = {}
        for plugin_id in PLUGIN_IDS:
            try:
                out[plugin_id] = self.manager().call(f"{plugin_id}.ready", timeout=120)["version"]
            except RpcError:
                pass
        return out

    def agent(self, message: str, timeout: float = 600) -> str:
        """One turn of agent `main` in its main session, to its end; its run id."""
        manager = self.manager()
        run = manager.call("agent", {"message": message, "agentId": "main",
                                     "sessionKey": MAIN_SESSION,
                                     "idempotencyKey": uuid.uuid4().hex}, timeout=120)
        end = manager.call("agent.wait", {"runId": run["runId"], "timeoutMs": int(timeout * 1000)},
                           timeout=timeout + 30)
        if end.get("status") != "ok" and not _spawn_fenced(message, end):
            raise TurnFailed(f"agent turn {message[:60]!r} ended {end}")
        return str(run["runId"])

    def chat(self, message: str) -> None:
        """`message` sent to the main session as a chat app sends it (plugin commands run)."""
        self.manager().call("chat.send", {"sessionKey": MAIN_SESSION, "message": message,
                                          "idempotencyKey": uuid.uuid4().hex}, timeout=300)

    def history_text(self, limit: int = 10) -> str:
        answer = self.manager().call("chat.history", {"sessionKey": MAIN_SESSION,
                                                      "limit": limit}, timeout=120)
        return json.dumps(answer, ensure_ascii=False)

    def requests(self) -> list[dict]:
        """Every request the host's scripted model received, in order."""
        path = sandbox.model_files(self.host)["log"]
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# OpenClaw 2026.6.x fences a run's session file: when a child ends so fast (our scripted model
# answers at once) that its completion is written to the parent's session while the parent's run
# has its prompt lock released, the parent run ends with this error (seen once in CI, on
# 2026.6.6, after the spawn's tool call).
SESSION_TAKEOVER = "EmbeddedAttemptSessionTakeoverError"


def _spawn_fenced(message: str, end: dict) -> bool:
    """A spawning turn OpenClaw ended with SESSION_TAKEOVER: it counts as sent, and the test
    checks what it needs of it (the child's request, the completion), failing by name if the
    spawn never went out."""
    return "[[spawn:" in message and SESSION_TAKEOVER in str(end.get("error") or "")


def texts(request: dict) -> str:
    """Every message text of one logged model request."""
    out = []
    for message in request["body"].get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    return "\n".join(out)


def is_child_request(request: dict) -> bool:
    """A subagent's model request: its first user message carries OpenClaw's subagent
    envelope (`[Subagent Task]`, or only `[Subagent Context]` on releases that keep the task in
    the system prompt)."""
    users = [m for m in request["body"].get("messages") or [] if m.get("role") == "user"]
    first = texts({"body": {"messages": users[:1]}})
    return "[Subagent Task]" in first or "[Subagent Context]" in first


def is_completion_turn(request: dict) -> bool:
    """A parent's model request on a child's completion event (both forms OpenClaw writes)."""
    text = texts(request)
    return not is_child_request(request) and (
        "A background task completed" in text or "[Internal task completion event]" in text)


def completion_steered_in(request: dict) -> bool:
    """Whether a completion turn (`is_completion_turn`) is the spawning run going on: OpenClaw
    put the child's completion event into the parent's run that is still active, right after
    the `sessions_spawn` tool result (2026.8.2 did when the child ended before the parent's next
    model request), so no announce run of its own follows."""
    messages = request["body"].get("messages") or []
    return (len(messages) >= 2 and messages[-2].get("role") == "tool"
            and messages[-1].get("role") == "user" and is_completion_turn(
                {"body": {"messages": messages[-1:]}}))


def recovery_block(request: dict) -> str:
    """The continuity recovery block the plugin put into one logged model request, or ""."""
    text = texts(request)
    if snapshot.BEGIN not in text:
        return ""
    return text.split(snapshot.BEGIN, 1)[1].split(snapshot.END, 1)[0]


LOG_TAIL = 2 << 20  # bytes of the gateway log a failure's story reads


def children_story(driver: Driver, since: int = 0, log_lines: int = 40) -> str:
    """What happened to the parent's children since model request `since`, for a test's
    failure message: which requests the scripted model got (parent, child, completion), each
    child's state file and the parent's Unsurfaced Results, and the gateway log's lines about
    subagents and the plugins. Tells a child that never ran from a result that was lost."""
    out = ["model requests:"]
    for n, request in enumerate(driver.requests()[since:], since):
        kind = ("child" if is_child_request(request) else
                "completion (steered in)" if completion_steered_in(request) else
                "completion" if is_completion_turn(request) else "parent")
        users = [m for m in request["body"].get("messages") or [] if m.get("role") == "user"]
        last = texts({"body": {"messages": users[-1:]}}).replace("\n", " ")
        out.append(f"  #{n} {kind}: {last[:160]!r}")
    for path in sorted(driver.memory.glob("subagents/*/CURRENT_STATE.md")):
        out.append(f"child {path.parent.name}:\n{_indent(path.read_text()[-1500:])}")
    parent = driver.memory / "CURRENT_STATE.md"
    if parent.exists():
        text = parent.read_text()
        notes = text.split("## Unsurfaced Results", 1)[1] if "## Unsurfaced Results" in text else ""
        out.append(f"parent's Unsurfaced Results:\n{_indent(notes[:3000])}")
    log = driver.state / "logs" / "openclaw.log"
    if log.is_file():
        with open(log, "rb") as fh:  # its last LOG_TAIL bytes: a long test's log is large
            fh.seek(max(0, log.stat().st_size - LOG_TAIL))
            tail = fh.read(LOG_TAIL).decode("utf-8", "replace")
        lines = [line for line in tail.splitlines()
                 if any(w in line.lower() for w in ("subagent", "continuity", "spawn", "error"))]
        out.append(f"gateway log, last {log_lines} lines on subagents, plugins, errors:\n"
                   + _indent("\n".join(line[:400] for line in lines[-log_lines:])))
    return "\n".join(out)


def _told(explain: Callable[[], str]) -> str:
    """`explain()`, or why it could not tell: the timeout is what the test reports."""
    try:
        return explain()
    except Exception as exc:  # noqa: BLE001  (a story that fails must not hide the timeout)
        return f"(no account of the state: {type(exc).__name__}: {exc})"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def wait_for(what: str, check: Callable[[], Any], timeout: float = 300,
             every: float = 2.0, tolerate: tuple = (),
             explain: Callable[[], str] | None = None) -> Any:
    """`check()`'s first truthy value; an AssertionError naming `what` after `timeout`, with
    `explain()`'s account of the state when given. An exception of a type in `tolerate` (a
    gateway restarting: `RpcError`) counts as "not yet"."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        try:
            value = check()
        except tolerate as exc:
            value, last = None, f" (last: {exc})"
        if value:
            return value
        if time.monotonic() > deadline:
            story = f"\n{_told(explain)}" if explain else ""
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what}{last}{story}")
        time.sleep(every)
