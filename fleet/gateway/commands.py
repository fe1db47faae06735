"""Plugin slash commands (`/mc ...`), dispatched by name like OpenClaw's registerCommand."""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Callable, Dict, List, Optional

log = logging.getLogger("fleet.gateway.commands")

CommandHandler = Callable[[Dict[str, Any]], Any]
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")  # fullmatch: "$" would accept "x\n"


class CommandError(ValueError):
    """Unknown command, bad name or a handler failure, worded for the person who typed it."""


class CommandRegistry:
    """Command name -> handler; one owner per name."""

    def __init__(self, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self._commands: Dict[str, Dict[str, Any]] = {}

    def register(
        self, name: str, handler: CommandHandler, description: str = "", plugin_id: str = "?"
    ) -> None:
        """Add a command; a name owned by another plugin is refused."""
        name = name.lstrip("/").lower()
        if not _NAME.fullmatch(name):
            raise CommandError(f"[{plugin_id}] invalid command name {name!r}: use [a-z0-9_-]")
        if not callable(handler):
            raise CommandError(f"[{plugin_id}] handler for /{name} is not callable")
        owner = self._commands.get(name)
        if owner and owner["plugin"] != plugin_id:
            raise CommandError(f"[{plugin_id}] /{name} is already registered by {owner['plugin']}")
        self._commands[name] = {"handler": handler, "description": description, "plugin": plugin_id}

    def names(self) -> List[Dict[str, str]]:
        return [
            {"name": n, "plugin": c["plugin"], "description": c["description"]}
            for n, c in sorted(self._commands.items())
        ]

    def dispatch(self, line: str, base_ctx: Dict[str, Any]) -> Dict[str, Any]:
        """Run `/name args`; returns {"command", "plugin", "text"}.

        A handler's `{"text", "isError": true}` raises CommandError with that text.
        """
        text = (line or "").strip()
        if not text.startswith("/"):
            raise CommandError(
                f"not a command: {text!r} (commands start with '/', e.g. '/mc help')"
            )
        name, _, args = text[1:].partition(" ")
        name = name.lower()
        entry = self._commands.get(name)
        if entry is None:
            known = ", ".join("/" + n for n in sorted(self._commands)) or "none"
            raise CommandError(f"unknown command /{name} (known: {known})")
        ctx = dict(base_ctx)
        ctx["args"] = args.strip()
        result = self._run(entry, ctx, name)
        if isinstance(result, str):
            out: Optional[str] = result
        elif isinstance(result, dict):
            out = result.get("text")
        else:
            out = None
        if not isinstance(out, str):
            raise CommandError(f"/{name} ({entry['plugin']}) returned no text")
        if isinstance(result, dict) and result.get("isError") is True:
            # OpenClaw's reply payload marks a failed command with `isError`; the control op
            # says so with ok: false, carrying the reply the person would have seen.
            raise CommandError(out)
        return {"command": name, "plugin": entry["plugin"], "text": out}

    def _run(self, entry: Dict[str, Any], ctx: Dict[str, Any], name: str) -> Any:
        box: Dict[str, Any] = {}

        def target() -> None:
            try:
                box["result"] = entry["handler"](ctx)
            except BaseException as exc:
                box["error"] = exc

        worker = threading.Thread(target=target, name=f"command-{name}", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        if worker.is_alive():
            raise CommandError(f"/{name} ({entry['plugin']}) timed out after {self.timeout_s:g}s")
        if "error" in box:
            exc = box["error"]
            log.error("/%s failed", name, exc_info=exc)
            raise CommandError(f"/{name} ({entry['plugin']}) failed: {type(exc).__name__}: {exc}")
        return box.get("result")
