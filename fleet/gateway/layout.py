"""Where the gateway keeps things inside an OpenClaw state dir.

One place names every path (socket, pidfile, log, extensions, transcripts) so the daemon, the
control server and the client can never disagree about them.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

try:  # the continuity core owns OpenClaw's path rules when it is present
    from fleet.continuity import paths as _paths
except ImportError:  # pragma: no cover - only while the core is not there yet
    _paths = None

_AGENT_ID = re.compile(r"^[a-z0-9_-]{1,64}$")


class ConfigError(ValueError):
    """A config or manifest file is unusable; the message names the file, key and fix."""


def resolve_state_dir(env: Optional[Mapping[str, str]] = None) -> Path:
    """The state dir as OpenClaw resolves it (OPENCLAW_STATE_DIR, OPENCLAW_HOME, ~)."""
    if _paths is not None and hasattr(_paths, "resolve_state_dir"):
        return Path(_paths.resolve_state_dir(env))
    env = os.environ if env is None else env
    if env.get("OPENCLAW_STATE_DIR"):
        return Path(env["OPENCLAW_STATE_DIR"]).expanduser()
    home = env.get("OPENCLAW_HOME") or env.get("HOME") or os.path.expanduser("~")
    return Path(home).expanduser() / ".openclaw"


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
        if _paths is not None and hasattr(_paths, "resolve_config_path"):
            try:
                return Path(_paths.resolve_config_path(None, self.state_dir))
            except TypeError:
                pass
        env_path = os.environ.get("OPENCLAW_CONFIG_PATH")
        return Path(env_path) if env_path else self.state_dir / "openclaw.json"

    def sessions_dir(self, agent_id: str) -> Path:
        return self.state_dir / "agents" / validate_agent_id(agent_id) / "sessions"

    def transcript(self, agent_id: str, session_id: str) -> Path:
        return self.sessions_dir(agent_id) / f"{session_id}.jsonl"

    def session_index(self, agent_id: str) -> Path:
        return self.sessions_dir(agent_id) / "sessions.json"

    def ensure(self) -> None:
        for d in (self.run_dir, self.log_dir, self.extensions):
            d.mkdir(parents=True, exist_ok=True)


def validate_agent_id(agent_id: str) -> str:
    """An agent id safe to use as a directory name (OpenClaw ids are lower case)."""
    if _paths is not None and hasattr(_paths, "validate_agent_id"):
        return _paths.validate_agent_id(agent_id)
    if not isinstance(agent_id, str) or not _AGENT_ID.match(agent_id):
        raise ValueError(
            f"invalid agent id {agent_id!r}: use 1-64 characters from [a-z0-9_-]"
        )
    return agent_id


def load_config(path: Path) -> Dict[str, Any]:
    """The OpenClaw config as a dict; missing file -> {}; broken file -> ConfigError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read OpenClaw config: {exc}") from exc
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; "
            "fix the file or move it away"
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a JSON object")
    return data


def agent_workspace(agent_id: str, config: Dict[str, Any], state_dir: Path) -> Path:
    """An agent's workspace, resolved as OpenClaw does (see docs/architecture.md)."""
    if _paths is not None and hasattr(_paths, "resolve_agent_workspace"):
        return Path(_paths.resolve_agent_workspace(agent_id, config, state_dir))
    agent_id = validate_agent_id(agent_id)
    agents = config.get("agents") if isinstance(config.get("agents"), dict) else {}
    entries = [e for e in agents.get("list") or [] if isinstance(e, dict)]
    for entry in entries:
        if str(entry.get("id", "")).lower() == agent_id and entry.get("workspace"):
            return Path(os.path.expanduser(str(entry["workspace"])))
    defaults = agents.get("defaults") if isinstance(agents.get("defaults"), dict) else {}
    default_id = next((str(e.get("id")).lower() for e in entries if e.get("default")), None)
    if default_id is None:
        default_id = str(entries[0].get("id")).lower() if entries else "main"
    if agent_id == default_id:
        if defaults.get("workspace"):
            return Path(os.path.expanduser(str(defaults["workspace"])))
        return Path(state_dir) / "workspace"
    if defaults.get("workspace"):
        return Path(os.path.expanduser(str(defaults["workspace"]))) / agent_id
    return Path(state_dir) / f"workspace-{agent_id}"


def default_agent(config: Dict[str, Any]) -> str:
    """The default agent id: the `default: true` entry, else the first, else `main`."""
    if _paths is not None and hasattr(_paths, "default_agent_id"):
        return _paths.default_agent_id(config)
    agents = config.get("agents") if isinstance(config.get("agents"), dict) else {}
    entries = [e for e in agents.get("list") or [] if isinstance(e, dict) and e.get("id")]
    for entry in entries:
        if entry.get("default"):
            return str(entry["id"]).lower()
    return str(entries[0]["id"]).lower() if entries else "main"


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
