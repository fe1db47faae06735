"""The gateway service: config, plugins, sessions, subagents, persistent instances, one op table.

`Gateway.handle(request)` is the whole control protocol (docs/architecture.md): a request dict in,
`{"ok": bool, "result" | "error"}` out. Transport (the unix socket) lives in control.py.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import fleet
from fleet.continuity import private, regularfile, tempfiles
from fleet.continuity.paths import ConfigError, default_agent_id, load_config
from fleet.continuity.statelayout import StateLayout
from fleet.gateway import selftest as plugin_selftest
from fleet.gateway.agents import Agents
from fleet.gateway.commands import CommandError, CommandRegistry
from fleet.gateway.hooks import HookBus
from fleet.gateway.layout import Layout
from fleet.gateway.loader import PluginHost
from fleet.gateway.messages import ScriptError
from fleet.gateway.persistent import PersistentError, PersistentManager
from fleet.gateway.sessions import SessionError, SessionStore, public
from fleet.gateway.subagents import Subagents
from fleet.gateway.supervisor import IllegalTransition

log = logging.getLogger("fleet.gateway.service")
CLIENT_ERRORS = (
    SessionError, ScriptError, PersistentError, IllegalTransition, CommandError, ConfigError,
    ValueError, TypeError, KeyError,
)


def release_root() -> Path:
    """The directory holding the `fleet` package this process runs (a release dir when deployed)."""
    return Path(fleet.__file__).resolve().parent.parent


def _running_release() -> Tuple[Path, Optional[str]]:
    """The release this process runs from and the version its manifest names (None outside a
    release, e.g. in a checkout)."""
    root = release_root()
    try:
        manifest = json.loads(regularfile.read_text(root / StateLayout.MANIFEST))
        return root, manifest.get("version")
    except (OSError, ValueError, AttributeError):
        return root, None


class Gateway:
    """Everything the control socket exposes."""

    def __init__(self, layout: Layout, hook_timeout_s: float = 10.0) -> None:
        self.layout = layout
        self.started_at = time.time()
        private.secure_state_dir(layout.state_dir)
        for stale in tempfiles.sweep_state_dir(layout.state_dir):
            log.info("removed %s (temp file of a writer that died mid-write)", stale)
        self.config: Dict[str, Any] = load_config(layout.config_path)
        self._config_sig = self._signature()
        self._config_lock = threading.RLock()
        self.hooks = HookBus(hook_timeout_s)
        self.commands = CommandRegistry()
        self.plugins = PluginHost(layout, self.current_config, self.hooks, self.commands)
        self.hooks.prompt_policy = self.plugins.allows_prompt_injection
        self.agents = Agents(
            SessionStore(layout),
            self.hooks,
            self.current_config,
            lambda: default_agent_id(self.current_config()),
        )
        self.subagents = Subagents(self.agents, self.hooks)
        self.persistent = PersistentManager(self.agents)
        self.release = _running_release()
        self.shutdown_requested = threading.Event()
        self.on_shutdown: Optional[Callable[[], None]] = None
        self.ops: Dict[str, Callable[[Dict[str, Any]], Any]] = {
            "health": self.health,
            "session.start": self.agents.start,
            "session.turn": self.agents.turn,
            "session.messages": self.agents.append,
            "session.close": self.agents.close,
            "sessions": self.sessions,
            "subagent.spawn": self.subagents.spawn,
            "subagent.end": self.subagents.end,
            "transcript": self.agents.transcript,
            "persistent.invoke": self.persistent.invoke,
            "persistent.status": self.persistent.status,
            "persistent.cancel": self.persistent.cancel,
            "command": self.command,
            "commands": lambda args: {"commands": self.commands.names()},
            "selftest": self.selftest,
            "stats": self.stats,
            "shutdown": self.shutdown,
        }

    def _signature(self) -> Optional[tuple]:
        try:
            st = os.stat(str(self.layout.config_path))
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def current_config(self) -> Dict[str, Any]:
        """The OpenClaw config, re-read when the file changed (e.g. by `/mc settings`).

        A change that does not parse is logged and ignored: the last good config stays in force.
        """
        sig = self._signature()
        if sig == self._config_sig:
            return self.config
        with self._config_lock:
            if sig == self._config_sig:
                return self.config
            self._config_sig = sig
            try:
                self.config = load_config(self.layout.config_path)
            except ConfigError as exc:
                log.error("config change ignored: %s", exc)
                return self.config
            log.info("config reloaded from %s", self.layout.config_path)
            self.plugins.refresh_configs()
            return self.config

    def load_plugins(self) -> None:
        self.plugins.load_all()

    def handle(self, request: Any) -> Dict[str, Any]:
        """One request -> one response; never raises."""
        if not isinstance(request, dict) or not isinstance(request.get("op"), str):
            return {"ok": False, "error": 'request must be a JSON object with "op", e.g. '
                                          '{"op": "health"}'}
        op = request["op"]
        fn = self.ops.get(op)
        if fn is None:
            return {"ok": False, "error": f"unknown op {op!r}; ops: {', '.join(sorted(self.ops))}"}
        args = {k: v for k, v in request.items() if k != "op"}
        try:
            return {"ok": True, "result": fn(args)}
        except CLIENT_ERRORS as exc:
            msg = str(exc) if not isinstance(exc, KeyError) else f"missing or unknown key {exc}"
            return {"ok": False, "error": f"{op}: {msg}"}
        except Exception as exc:  # a bug must answer the client, not kill the connection
            log.exception("op %s failed", op)
            return {"ok": False, "error": f"{op}: internal error: {type(exc).__name__}: {exc}"}

    def health(self, args: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """From memory only: every file read here would be one more wait for the interpreter
        lock while a plugin's hook holds it, and the code a process runs cannot change."""
        root, manifest_version = self.release
        error = self.plugins.ready_error()
        return {
            "pid": os.getpid(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at)),
            "uptime_s": round(time.time() - self.started_at, 3),
            "versions": self.plugins.versions(),
            "plugins": self.plugins.health(),
            "ready": error is None,
            "error": error,
            "release": root.name,
            "releaseRoot": str(root),
            "releaseVersion": manifest_version,
            "stateDir": str(self.layout.state_dir),
            "commands": [c["name"] for c in self.commands.names()],
            "hooks": self.hooks.summary(),
        }

    def sessions(self, args: Dict[str, Any]) -> Dict[str, Any]:
        with self.agents.store.lock:
            recs = [public(r) for r in self.agents.store.all(closed=bool(args.get("all")))]
        if not args.get("all"):
            recs = [r for r in recs if not r.get("closedAt")]
        return {"sessions": sorted(recs, key=lambda r: r.get("createdAt") or 0)}

    def command(self, args: Dict[str, Any]) -> Dict[str, Any]:
        line = args.get("command") or args.get("text") or args.get("line")
        if not isinstance(line, str):
            raise CommandError('command needs "command": "/mc help"')
        ctx: Dict[str, Any] = {"stateDir": str(self.layout.state_dir),
                               "config": self.current_config()}
        if args.get("sessionKey"):
            ctx["sessionKey"] = str(args["sessionKey"]).strip().lower()
        return self.commands.dispatch(line, ctx)

    def selftest(self, args: Dict[str, Any]) -> Dict[str, Any]:
        """Each loaded plugin's self-test (fleet/gateway/selftest.py), through this gateway's
        hook bus and command registry: `{"ok": every one passed, "plugins": {id: answer}}`.
        Takes no arguments: the scratch is this host's own."""
        answers = {}
        for rec in self.plugins.records.values():
            if rec.loaded:
                answers[rec.id] = plugin_selftest.run(
                    rec.id, rec.version, rec.module, self.layout.state_dir, self.hooks,
                    self.commands, self.plugins.fresh_config(rec),
                    self.plugins.allows_prompt_injection(rec.id))
        return {"ok": all(a["ok"] for a in answers.values()), "plugins": answers}

    def stats(self, args: Dict[str, Any]) -> Dict[str, Any]:
        """Each loaded plugin's hook calls, errors and timeouts since this gateway started
        (`restarts` is 0: a plugin here lives as long as its gateway; the supervisor counts
        gateway restarts, fleet/installer/supervision.py)."""
        loaded = [rec.id for rec in self.plugins.records.values() if rec.loaded]
        counts = self.hooks.stats(loaded)
        return {"plugins": {pid: dict(counts[pid], restarts=0) for pid in loaded}}

    def shutdown(self, args: Dict[str, Any]) -> Dict[str, Any]:
        self.shutdown_requested.set()
        if self.on_shutdown is not None:
            self.on_shutdown()
        return {"pid": os.getpid(), "stopping": True}
