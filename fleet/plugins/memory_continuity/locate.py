"""Which workspace and which state file a hook call is about.

The hook contexts differ (agent ctx has `workspaceDir`, session and subagent ctx do not), so the
plugin falls back to OpenClaw's own workspace resolution from the agent id or session key, through
`fleet.continuity.paths` and the gateway's config, never by guessing directory names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Tuple

from fleet.continuity import paths
from fleet.continuity.paths import SessionKey


def session_key_of(ctx: Mapping[str, Any]) -> Optional[str]:
    key = ctx.get("sessionKey") or ctx.get("SessionKey")
    return key if isinstance(key, str) and key.strip() else None


class Locator:
    """Resolves workspaces from the api's OpenClaw config and state dir."""

    def __init__(self, api: Any):
        self._api = api

    @property
    def state_dir(self) -> Path:
        return Path(self._api.state_dir)

    def config(self) -> Mapping[str, Any]:
        cfg = getattr(self._api, "openclaw_config", None)
        return cfg if isinstance(cfg, Mapping) else {}

    def agent_workspace(self, agent_id: str) -> Path:
        """Workspace of `agent_id` (raises `InvalidAgentId` for an unsafe id)."""
        return paths.resolve_agent_workspace(agent_id, self.config(), self.state_dir)

    def session(self, ctx: Mapping[str, Any]) -> Tuple[Optional[Path], Optional[SessionKey]]:
        """(workspace, parsed key) of the session a hook ctx describes; workspace None if unknown.

        Raises `InvalidAgentId` for a session key or agent id that is not safe as a path part.
        """
        raw_key = session_key_of(ctx)
        key = None
        if raw_key:
            try:
                key = paths.check_session_key(raw_key)
            except paths.InvalidAgentId:
                raise
            except ValueError:
                key = None  # not an `agent:` key (legacy/global): use workspaceDir / agentId
        ws = ctx.get("workspaceDir")
        if isinstance(ws, str) and ws.strip():
            return Path(ws).expanduser(), key
        agent = ctx.get("agentId")
        if isinstance(agent, str) and agent.strip():
            return self.agent_workspace(agent), key
        if key is not None:
            return self.agent_workspace(key.agent_id), key
        return None, key

    def session_file_for_key(
        self, key: SessionKey, workspace_hint: Optional[Path] = None,
        hint_agent: Optional[str] = None,
    ) -> Path:
        """State file of another session (a parent): its agent's workspace, per-child if needed.

        `workspace_hint` is used when the key's agent is `hint_agent` (the ctx's own workspace is
        the real one for its agent, even if the config says otherwise).
        """
        if workspace_hint is not None and hint_agent == key.agent_id:
            ws = workspace_hint
        else:
            ws = self.agent_workspace(key.agent_id)
        return paths.session_state_file(ws, key)
