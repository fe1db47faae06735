"""The `api` object a plugin's `register(api)` receives (docs/architecture.md, plugin contract)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from fleet.gateway.commands import CommandRegistry
from fleet.gateway.hooks import HookBus


class PluginLogger:
    """`.info/.warn/.error` prefixed `[<id>]`, as OpenClaw's api.logger."""

    def __init__(self, plugin_id: str) -> None:
        self._prefix = f"[{plugin_id}]"
        self._log = logging.getLogger(f"fleet.gateway.plugin.{plugin_id}")

    def _fmt(self, msg: Any, args: tuple) -> str:
        text = str(msg)
        if args:
            text = " ".join([text] + [str(a) for a in args])
        return f"{self._prefix} {text}"

    def info(self, msg: Any, *args: Any) -> None:
        self._log.info("%s", self._fmt(msg, args))

    def warn(self, msg: Any, *args: Any) -> None:
        self._log.warning("%s", self._fmt(msg, args))

    warning = warn

    def error(self, msg: Any, *args: Any) -> None:
        self._log.error("%s", self._fmt(msg, args))

    def debug(self, msg: Any, *args: Any) -> None:
        self._log.debug("%s", self._fmt(msg, args))


class PluginApi:
    """What one plugin may touch: its identity, config, logger, hooks and commands."""

    def __init__(
        self,
        plugin_id: str,
        version: str,
        state_dir: Path,
        config_source: Callable[[], Dict[str, Any]],
        plugin_config_source: Callable[[], Dict[str, Any]],
        hooks: HookBus,
        commands: CommandRegistry,
        root_dir: Optional[Path] = None,
    ) -> None:
        self.id = plugin_id
        self.version = version
        self.state_dir = Path(state_dir)
        self.root_dir = root_dir
        self.logger = PluginLogger(plugin_id)
        self._config_source = config_source
        self._plugin_config_source = plugin_config_source
        self._hooks = hooks
        self._commands = commands

    @property
    def openclaw_config(self) -> Dict[str, Any]:
        """The whole OpenClaw config as loaded by the gateway."""
        return self._config_source()

    @property
    def plugin_config(self) -> Dict[str, Any]:
        """`plugins.entries.<id>.config`, validated with defaults; fresh on every read."""
        return dict(self._plugin_config_source())

    def on(self, hook_name: str, handler: Callable, priority: Any = 0) -> None:
        """Register a hook handler; `priority` is an int or `{"priority": n, "timeoutMs": n}`."""
        timeout_s = None
        if isinstance(priority, dict):
            if priority.get("timeoutMs") is not None:
                timeout_s = float(priority["timeoutMs"]) / 1000.0
            priority = priority.get("priority", 0)
        self._hooks.register(hook_name, handler, int(priority or 0), self.id, timeout_s)

    def register_command(self, name: str, handler: Callable, description: str = "") -> None:
        """Register `/name`; handler(ctx) -> {"text": str}."""
        self._commands.register(name, handler, description, self.id)
