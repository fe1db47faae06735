"""Where things live, resolved as OpenClaw resolves them, and session keys.

OpenClaw's rules (state dir, config path, agent workspaces, `agent:<id>:...` session keys) are
summarised in docs/continuity.md, "What the gateway and the plugin take from OpenClaw".

Every agent id and child id that becomes part of a path is validated here first, so a hostile
session key can never make the plugin read or write outside the state dir's workspaces.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, List, Mapping, NamedTuple, Optional

from fleet.continuity import regularfile, strictjson

MEMORY_DIR = "memory"
SUBAGENTS_DIR = "subagents"
STATE_NAME = "CURRENT_STATE.md"
STATE_FILE = Path(MEMORY_DIR) / STATE_NAME
UNSURFACED_ARCHIVE = "unsurfaced_archive.md"
DEFAULT_AGENT_ID = "main"
CONFIG_NAME = "openclaw.json"
# OpenClaw writes a few KB (agents, models, plugins); a thousand times that is not a config it
# wrote, and parsing and rewriting 150 MB took minutes and a GiB of memory.
CONFIG_MAX_BYTES = 4 * regularfile.MIB
# Always `fullmatch`: with `match`, "$" also accepts a trailing newline ("evil\n").
_ID_RE = re.compile(r"[a-z0-9_-]{1,128}")


class InvalidAgentId(ValueError):
    """An agent or child id that is empty, too long or could escape a directory."""


class ConfigError(ValueError):
    """The OpenClaw config file is unusable; the message names the file, what is wrong and the
    fix."""


def _env(env: Optional[Mapping[str, str]]) -> Mapping[str, str]:
    return os.environ if env is None else env


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("OPENCLAW_HOME") or env.get("HOME")
    return Path(home).expanduser() if home else Path.home()


def _expand(path: str, env: Mapping[str, str], base: Path) -> Path:
    """`~` expanded against the effective home; relative paths anchored at `base`."""
    if path == "~" or path.startswith("~/"):
        p = Path(str(_home(env)) + path[1:])
    else:
        p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def resolve_state_dir(env: Optional[Mapping[str, str]] = None) -> Path:
    """`$OPENCLAW_STATE_DIR`, else `<$OPENCLAW_HOME or $HOME>/.openclaw`."""
    e = _env(env)
    explicit = e.get("OPENCLAW_STATE_DIR", "").strip()
    if explicit:
        return _expand(explicit, e, Path.cwd())
    return _home(e) / ".openclaw"


def resolve_config_path(
    env: Optional[Mapping[str, str]] = None, state_dir: Optional[Path] = None
) -> Path:
    """`$OPENCLAW_CONFIG_PATH`, else `<state>/openclaw.json`."""
    e = _env(env)
    explicit = e.get("OPENCLAW_CONFIG_PATH", "").strip()
    if explicit:
        return _expand(explicit, e, Path.cwd())
    return Path(state_dir if state_dir is not None else resolve_state_dir(e)) / CONFIG_NAME


def config_write_target(path: Path) -> Path:
    """The file a writer of the config at `path` replaces, and locks (`<target>.lock`): the path
    itself, or the file a symlink there points to. A user may keep openclaw.json elsewhere and
    link it; replacing the link with a file would cut it from theirs."""
    return Path(os.path.realpath(str(path)))


def load_config(path: Path) -> dict:
    """The OpenClaw config as a dict; a missing file is `{}`, unreadable JSON is a `ConfigError`.
    Read as a regular file (a symlink to one is followed: a user may link their config) of at
    most CONFIG_MAX_BYTES, never waited on."""
    p = Path(path)
    try:
        data_bytes = regularfile.read_bytes(p, CONFIG_MAX_BYTES)
        if data_bytes is None:
            return {}
        raw = data_bytes.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{p}: cannot read OpenClaw config ({exc}); fix or remove the file"
        ) from exc
    try:
        data = strictjson.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise ConfigError(
            f"{p}: invalid JSON: {exc}; fix the syntax (OpenClaw reads the same file)"
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a JSON object, got {type(data).__name__}")
    return data


def validate_agent_id(s: Any) -> str:
    """Normalised (trimmed, lowercase) id made of `[a-z0-9_-]` only, else `InvalidAgentId`."""
    if not isinstance(s, str):
        raise InvalidAgentId(f"agent id must be a string, got {type(s).__name__}")
    norm = s.strip().lower()
    if not _ID_RE.fullmatch(norm):
        raise InvalidAgentId(
            f"invalid agent id {s!r}: use 1-128 characters from a-z, 0-9, '_' and '-' "
            "(no '/', '..', ':' or control characters)"
        )
    return norm


def _agents_list(config: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    agents = config.get("agents") if isinstance(config, Mapping) else None
    entries = agents.get("list") if isinstance(agents, Mapping) else None
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, Mapping)]


def _entry_id(entry: Mapping[str, Any]) -> Optional[str]:
    try:
        return validate_agent_id(entry.get("id"))
    except InvalidAgentId:
        return None


def _defaults_workspace(config: Mapping[str, Any]) -> Optional[str]:
    agents = config.get("agents") if isinstance(config, Mapping) else None
    defaults = agents.get("defaults") if isinstance(agents, Mapping) else None
    ws = defaults.get("workspace") if isinstance(defaults, Mapping) else None
    return ws if isinstance(ws, str) and ws.strip() else None


def default_agent_id(config: Mapping[str, Any]) -> str:
    """The entry with `default: true`, else the first entry, else `main` (OpenClaw's rule)."""
    entries = _agents_list(config)
    for entry in entries:
        if entry.get("default") is True and _entry_id(entry):
            return _entry_id(entry)  # type: ignore[return-value]
    for entry in entries:
        if _entry_id(entry):
            return _entry_id(entry)  # type: ignore[return-value]
    return DEFAULT_AGENT_ID


def resolve_agent_workspace(
    agent_id: str,
    config: Mapping[str, Any],
    state_dir: Path,
    env: Optional[Mapping[str, str]] = None,
) -> Path:
    """The agent's workspace: its list entry's `workspace`, else (default agent)
    `agents.defaults.workspace` or `<state>/workspace`, else `<defaults.workspace>/<id>`, else
    `<state>/workspace-<id>`. `~` is expanded; relative paths are taken from the state dir.

    Deviation (docs/architecture.md): the default agent's fallback is `<state>/workspace`.
    """
    aid = validate_agent_id(agent_id)
    e = _env(env)
    state = Path(state_dir)
    config = config if isinstance(config, Mapping) else {}
    for entry in _agents_list(config):
        if _entry_id(entry) == aid:
            ws = entry.get("workspace")
            if isinstance(ws, str) and ws.strip():
                return _expand(ws.strip(), e, state)
            break
    defaults_ws = _defaults_workspace(config)
    if aid == default_agent_id(config):
        if defaults_ws:
            return _expand(defaults_ws.strip(), e, state)
        profile = e.get("OPENCLAW_PROFILE", "").strip().lower()
        if profile and profile != "default" and _ID_RE.fullmatch(profile):
            return state / f"workspace-{profile}"
        return state / "workspace"
    if defaults_ws:
        return _expand(defaults_ws.strip(), e, state) / aid
    return state / f"workspace-{aid}"


def list_agents(config: Mapping[str, Any], state_dir: Path) -> List[str]:
    """Known agents: the default agent, then `agents.list` order, then any `<state>/agents/<id>`
    directory OpenClaw created for sessions (valid ids only, no duplicates)."""
    config = config if isinstance(config, Mapping) else {}
    out = [default_agent_id(config)]
    for entry in _agents_list(config):
        aid = _entry_id(entry)
        if aid and aid not in out:
            out.append(aid)
    agents_dir = Path(state_dir) / "agents"
    try:
        extra = sorted(p.name for p in agents_dir.iterdir() if p.is_dir())
    except OSError:
        extra = []
    for name in extra:
        if _ID_RE.fullmatch(name) and name not in out:
            out.append(name)
    return out


class SessionKey(NamedTuple):
    """A parsed `agent:<id>:<rest>` key (normalised lowercase, empty parts dropped)."""

    raw: str
    agent_id: str
    rest: str
    is_subagent: bool
    depth: int
    child_id: Optional[str]

    @property
    def normalized(self) -> str:
        return f"agent:{self.agent_id}:{self.rest}"

    @property
    def parent_key(self) -> Optional[str]:
        """The key this one was spawned from, by dropping its last `subagent:<id>` (None at top).

        The target agent of a spawn is in the key, the requester's is not: prefer the requester
        session key OpenClaw passes in the hook context when there is one.
        """
        if not self.is_subagent:
            return None
        parts = self.rest.split(":")
        for i in range(len(parts) - 2, -1, -1):
            if parts[i] == "subagent":
                remaining = parts[:i]
                if not remaining:
                    return f"agent:{self.agent_id}:main"
                return f"agent:{self.agent_id}:" + ":".join(remaining)
        return None


def check_session_key(key: Any) -> SessionKey:
    """Parse a session key or raise: `ValueError` for a non-agent key, `InvalidAgentId` for an
    agent id or child id that is not safe as a directory name."""
    if not isinstance(key, str):
        raise ValueError(f"session key must be a string, got {type(key).__name__}")
    parts = [p for p in key.strip().lower().split(":") if p]
    if len(parts) < 3 or parts[0] != "agent":
        raise ValueError(f"not an agent session key: {key!r} (expected agent:<id>:<rest>)")
    if not _ID_RE.fullmatch(parts[1]):  # raw: a newline or space inside a key is no id
        raise InvalidAgentId(
            f"invalid agent id {parts[1]!r} in session key {key!r}: use a-z, 0-9, '_', '-'"
        )
    agent_id = validate_agent_id(parts[1])
    rest_parts = parts[2:]
    rest = ":".join(rest_parts)
    is_subagent = rest_parts[0] == "subagent" and len(rest_parts) > 1
    depth = sum(
        1 for i, p in enumerate(rest_parts[:-1]) if p == "subagent"
    )
    for i, part in enumerate(rest_parts[:-1]):  # every subagent id on the path, not just the last
        if part == "subagent" and not _ID_RE.fullmatch(rest_parts[i + 1]):
            raise InvalidAgentId(
                f"invalid subagent id {rest_parts[i + 1]!r} in session key {key!r}: "
                "use a-z, 0-9, '_', '-'"
            )
    child_id = None
    if is_subagent:
        for i in range(len(rest_parts) - 2, -1, -1):
            if rest_parts[i] == "subagent":
                child_id = rest_parts[i + 1]
                break
        if child_id is None or not _ID_RE.fullmatch(child_id):
            raise InvalidAgentId(
                f"invalid subagent id {child_id!r} in session key {key!r}: use a-z, 0-9, '_', '-'"
            )
    return SessionKey(key, agent_id, rest, is_subagent, depth, child_id)


def parse_session_key(key: Any) -> Optional[SessionKey]:
    """Like `check_session_key` but None for anything not a safe agent session key."""
    try:
        return check_session_key(key)
    except ValueError:
        return None


def state_file(workspace: Path) -> Path:
    """`<workspace>/memory/CURRENT_STATE.md`."""
    return Path(workspace) / STATE_FILE


def child_dir(workspace: Path, child_id: str) -> Path:
    """`<workspace>/memory/subagents/<child_id>` (child id validated): everything of one subagent
    session, its state file, archives and journal, so a same-agent child never touches its
    parent's files."""
    return Path(workspace) / MEMORY_DIR / SUBAGENTS_DIR / validate_agent_id(child_id)


def child_state_file(workspace: Path, child_id: str) -> Path:
    """`<workspace>/memory/subagents/<child_id>/CURRENT_STATE.md` (child id validated)."""
    return child_dir(workspace, child_id) / STATE_NAME


def child_state_files(workspace: Path) -> List[Path]:
    """The state files of `workspace`'s children that exist, sorted by child id: one per
    `memory/subagents/<child_id>/` directory whose name is a valid, normalised child id."""
    root = Path(workspace) / MEMORY_DIR / SUBAGENTS_DIR
    try:
        dirs = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return []
    out = []
    for d in dirs:
        try:
            path = child_state_file(workspace, d.name)
        except InvalidAgentId:
            continue
        if path.parent == d and path.is_file():
            out.append(path)
    return out


def is_child_dir(root: Path) -> bool:
    """Whether `root` is a subagent's own directory (`child_dir`)."""
    root = Path(root)
    return (root.parent.name == SUBAGENTS_DIR and root.parent.parent.name == MEMORY_DIR
            and bool(_ID_RE.match(root.name)))


def memory_dir(root: Path) -> Path:
    """Where a journal root keeps its files (archives, session logs, summaries, tags, unsurfaced
    archive): `<workspace>/memory` for an agent's workspace; a subagent's own directory
    (`child_dir`) is its memory directory itself, with no second `memory/` inside."""
    root = Path(root)
    return root if is_child_dir(root) else root / MEMORY_DIR


def session_state_file(workspace: Path, key: Optional[SessionKey]) -> Path:
    """A session's own state file: the per-child file for a subagent session, else the agent's."""
    if key is not None and key.is_subagent and key.child_id:
        return child_state_file(workspace, key.child_id)
    return state_file(workspace)
