"""Where the gateway keeps things inside an OpenClaw state dir.

One place names every path (socket, pidfile, ready file, log, extensions, transcripts) so the
daemon, the control server and the client can never disagree about them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from fleet.continuity import paths, private


class ConfigError(ValueError):
    """A config or manifest file is unusable; the message names the file, key and fix."""


def resolve_state_dir(env: Optional[Mapping[str, str]] = None) -> Path:
    """The state dir as OpenClaw resolves it (OPENCLAW_STATE_DIR, OPENCLAW_HOME, ~)."""
    return Path(paths.resolve_state_dir(env))


class Layout:
    """Paths of one state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(os.path.abspath(str(state_dir)))

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"

    @property
    def socket(self) -> Path:
        return self.run_dir / "gateway.sock"

    @property
    def pidfile(self) -> Path:
        return self.run_dir / "gateway.pid"

    @property
    def ready_file(self) -> Path:
        """`ready.json`: written once by a ready gateway, removed when it stops (see daemon)."""
        return self.run_dir / "ready.json"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def log(self) -> Path:
        return self.log_dir / "gateway.log"

    @property
    def extensions(self) -> Path:
        return self.state_dir / "extensions"

    @property
    def config_path(self) -> Path:
        return Path(paths.resolve_config_path(None, self.state_dir))

    def sessions_dir(self, agent_id: str) -> Path:
        return self.state_dir / "agents" / validate_agent_id(agent_id) / "sessions"

    def transcript(self, agent_id: str, session_id: str) -> Path:
        return self.sessions_dir(agent_id) / f"{session_id}.jsonl"

    def session_index(self, agent_id: str) -> Path:
        return self.sessions_dir(agent_id) / "sessions.json"

    def ensure(self) -> None:
        for d in (self.run_dir, self.log_dir):
            private.make_dir(d)
        self.extensions.mkdir(parents=True, exist_ok=True)


def validate_agent_id(agent_id: str) -> str:
    """An agent id safe to use as a directory name (OpenClaw ids are lower case)."""
    return paths.validate_agent_id(agent_id)


def load_config(path: Path) -> Dict[str, Any]:
    """The OpenClaw config as a dict; missing file -> {}; broken file -> ConfigError."""
    try:
        return paths.load_config(path)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def agent_workspace(agent_id: str, config: Dict[str, Any], state_dir: Path) -> Path:
    """An agent's workspace, resolved as OpenClaw does (see docs/architecture.md)."""
    return Path(paths.resolve_agent_workspace(agent_id, config, state_dir))


def default_agent(config: Dict[str, Any]) -> str:
    """The default agent id: the `default: true` entry, else the first, else `main`."""
    return paths.default_agent_id(config)


def plugin_dirs(layout: Layout) -> List[Path]:
    """Every `<state>/extensions/<id>` holding a manifest, sorted by name (symlinks followed)."""
    if not layout.extensions.is_dir():
        return []
    found = []
    for child in sorted(layout.extensions.iterdir()):
        if child.name.startswith("."):
            continue
        if (child / "openclaw.plugin.json").is_file():
            found.append(child)
    return found
