"""Two sandbox OpenClaw hosts in a temp dir, deployed through fleet.deploy.api like the tasks do.

Each host is a real OpenClaw gateway (the pinned toolchain) with its own state dir, HOME, port,
config and scripted model. Tests read what the gateway reports (`plugins.list` through its CLI),
what the scripted model received (its request log) and the files the plugins wrote.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Callable

from source_tree import snapshot

from fleet.deploy import api
from fleet.deploy.inventory import load
from fleet.installer.openclawgw import OpenclawManager, RpcError
from lab.openclaw import sandbox, toolchain

REPO = Path(__file__).resolve().parents[2]
HOSTS = ("oc-a", "oc-b")


def make_tree(dst: Path, bump: str | None = None, throw_at_load: bool = False) -> Path:
    """The repo's sources; memory-continuity at version `bump`, or with an entry that throws
    when OpenClaw loads it."""
    plugin = snapshot(dst, version=bump)
    if throw_at_load:
        entry = plugin / "index.js"
        entry.write_text('throw new Error("broken release: the entry throws at load");\n'
                         + entry.read_text())
    return dst


def build(root: Path, out: Path) -> api.ArtifactRef:
    return api.build_artifact(root, out)


class OpenclawFleet:
    """The two hosts (both on OpenClaw `version`), their inventory, and what a test needs to
    look at them."""

    def __init__(self, root: Path, version: str = toolchain.OPENCLAW_VERSION):
        self.root = root
        self.version = version
        (root / "inventory.yaml").write_text(sandbox.inventory_text(
            HOSTS, "both", ready_s=900, command_s=2400,
            options={name: {"openclaw_version": version} for name in HOSTS}))
        self.inventory = load(root / "inventory.yaml")
        self.hosts = {h.name: h for h in sandbox.resolve(self.inventory.select("both"))}
        sandbox.prepare(list(self.hosts.values()))
        self.events: list = []

    def deploy(self, artifact, **kw) -> dict:
        results = api.deploy(list(self.hosts.values()), artifact,
                             lambda *e: self.events.append(e), **kw)
        return {r.host: r for r in results}

    def status(self) -> dict:
        results = api.status(list(self.hosts.values()), lambda *e: None)
        return {r.host: r for r in results}

    def state(self, name: str) -> Path:
        return Path(self.hosts[name].state_dir)

    def manager(self, name: str) -> OpenclawManager:
        return OpenclawManager(self.state(name), dict(self.hosts[name].manager_options))

    def loaded(self, name: str) -> dict:
        """{plugin id: version} of the fleet plugins whose worker answers in the running gateway
        (each plugin's own `<id>.ready`: every OpenClaw version has it)."""
        out = {}
        for plugin_id in ("memory-continuity", "mc"):
            try:
                out[plugin_id] = self.manager(name).call(f"{plugin_id}.ready",
                                                         timeout=120)["version"]
            except RpcError:
                pass
        return out

    def gateway_pid(self, name: str) -> int | None:
        return self.manager(name).process.pid()

    def requests(self, name: str) -> list[dict]:
        path = sandbox.model_files(self.hosts[name])["log"]
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def agent(self, name: str, message: str, timeout: float = 600) -> None:
        """One turn of agent `main` in its main session, to its end: the gateway's own `agent`
        and `agent.wait` RPCs (what `openclaw agent` sends). Not the CLI: two `openclaw agent`
        processes at once on 2026.4.24 race on its bundled plugins' runtime root (one fails
        with ENOTEMPTY on `dist/extensions/node_modules/openclaw/plugin-sdk`)."""
        manager = self.manager(name)
        run = manager.call("agent", {"message": message, "agentId": "main",
                                     "sessionKey": "agent:main:main",
                                     "idempotencyKey": uuid.uuid4().hex}, timeout=120)
        end = manager.call("agent.wait", {"runId": run["runId"], "timeoutMs": int(timeout * 1000)},
                           timeout=timeout + 30)
        assert end.get("status") == "ok", end

    def chat(self, name: str, message: str) -> None:
        self.manager(name).call("chat.send", {"sessionKey": "agent:main:main", "message": message,
                                              "idempotencyKey": uuid.uuid4().hex}, timeout=300)

    def history_text(self, name: str, limit: int = 10) -> str:
        answer = self.manager(name).call("chat.history", {"sessionKey": "agent:main:main",
                                                          "limit": limit}, timeout=120)
        return json.dumps(answer, ensure_ascii=False)

    def down(self) -> None:
        sandbox.down(list(self.hosts.values()))


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


def is_completion_turn(request: dict) -> bool:
    """A parent's model request on a child's completion event: 2026.9.6 writes "A background
    task completed ...", 2026.4.24 an `[Internal task completion event]` block."""
    text = texts(request)
    return ("[Subagent Task]" not in text and ("A background task completed" in text
                                               or "[Internal task completion event]" in text))


def wait_for(what: str, check: Callable[[], object], timeout: float = 300,
             every: float = 2.0):
    """`check()`'s first truthy value; an assertion error naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)
