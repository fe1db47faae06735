"""Which agents `/mc` shows, and where their memory lives, resolved as OpenClaw resolves them.

Why: the original `/mc` guessed `workspace/main` and `workspaces/<name>` and so missed every
agent a real OpenClaw config places elsewhere. Here agents come from the OpenClaw config (and
the state dir's `agents/` sessions) through `fleet.continuity.paths`, and a name typed by a
person is validated before it becomes part of a path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, NamedTuple, Optional

from fleet.continuity import paths

MC_PLUGIN_ID = "memory-continuity"


class AgentNotFound(LookupError):
    """A typed agent name that is not a known agent (or not a valid id)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def reply(self) -> str:
        return f'Agent "{self.name}" not found.'


class Agent(NamedTuple):
    """One agent and its workspace."""

    id: str
    workspace: Path

    @property
    def memory(self) -> Path:
        return self.workspace / "memory"

    @property
    def state_file(self) -> Path:
        return paths.state_file(self.workspace)

    def child_state_files(self) -> List[Path]:
        """Per-child state files `memory/subagents/<child_id>/CURRENT_STATE.md`, sorted by id."""
        return paths.child_state_files(self.workspace)


class Agents:
    """The state dir, the OpenClaw config read fresh from its file (`$OPENCLAW_CONFIG_PATH`,
    else `<state>/openclaw.json`: OpenClaw's own rule), and agents."""

    def __init__(self, state_dir: Path, config: Optional[Mapping[str, Any]] = None) -> None:
        self.state_dir = Path(state_dir)
        self.config_path = paths.resolve_config_path(state_dir=self.state_dir)
        if config is None:
            config = paths.load_config(self.config_path)
        self.config: Dict[str, Any] = dict(config)

    @classmethod
    def from_ctx(cls, ctx: Mapping[str, Any]) -> Agents:
        """From a command ctx: `stateDir` (else OpenClaw's default) and the config file there.

        The file is the truth (it is what `/mc settings` edits); `ctx["config"]` is only used
        when the file does not exist, or for a self-test's command (`selfTest: true`, set by
        fleet/gateway/selftest.py, never by a client): its scratch is all it may read, even
        where `$OPENCLAW_CONFIG_PATH` names the host's config.
        """
        raw = ctx.get("stateDir")
        state_dir = Path(raw) if raw else paths.resolve_state_dir()
        fallback = ctx.get("config")
        if ctx.get("selfTest") is True and isinstance(fallback, Mapping):
            return cls(state_dir, fallback)
        if paths.resolve_config_path(state_dir=state_dir).exists():
            return cls(state_dir)
        return cls(state_dir, fallback if isinstance(fallback, Mapping) else {})

    def mc_config(self) -> Dict[str, Any]:
        """`plugins.entries["memory-continuity"].config` ({} when absent or malformed)."""
        plugins = self.config.get("plugins")
        entries = plugins.get("entries") if isinstance(plugins, Mapping) else None
        entry = entries.get(MC_PLUGIN_ID) if isinstance(entries, Mapping) else None
        cfg = entry.get("config") if isinstance(entry, Mapping) else None
        return dict(cfg) if isinstance(cfg, Mapping) else {}

    @property
    def default_id(self) -> str:
        return paths.default_agent_id(self.config)

    def _agent(self, agent_id: str) -> Agent:
        ws = paths.resolve_agent_workspace(agent_id, self.config, self.state_dir)
        return Agent(agent_id, ws)

    def all(self) -> List[Agent]:
        """Every known agent (default first, then config order, then session dirs)."""
        out = []
        for aid in paths.list_agents(self.config, self.state_dir):
            try:
                out.append(self._agent(aid))
            except paths.InvalidAgentId:
                continue
        return out

    def with_memory(self) -> List[Agent]:
        """Known agents whose workspace has a `memory/` directory."""
        return [a for a in self.all() if a.memory.is_dir()]

    def get(self, name: Optional[str]) -> Agent:
        """The named agent (default agent when empty); `AgentNotFound` for unknown or bad ids."""
        if not name:
            return self._agent(self.default_id)
        try:
            aid = paths.validate_agent_id(name)
        except paths.InvalidAgentId:
            raise AgentNotFound(name) from None
        if aid in paths.list_agents(self.config, self.state_dir):
            return self._agent(aid)
        raise AgentNotFound(name)

    def is_agent(self, name: str) -> bool:
        """Whether `name` names a known agent."""
        try:
            self.get(name)
        except AgentNotFound:
            return False
        return bool(name)

    def mc_archive_cap(self) -> int:
        """`maxArchiveCount` of the memory-continuity config (0/invalid -> 20)."""
        value = self.mc_config().get("maxArchiveCount")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            return 20
        return int(value)
