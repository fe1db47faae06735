"""Sessions: who they belong to, where their transcript is, and how they relate.

The index of each agent's sessions lives in `<state>/agents/<agentId>/sessions/sessions.json`
(written temp + fsync + rename), so sessions, children and pending announces survive a gateway
restart: a deploy in the middle of a parent/child run loses nothing.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from fleet.continuity import strictjson, tempfiles
from fleet.continuity.paths import validate_agent_id
from fleet.gateway.layout import Layout
from fleet.gateway.messages import now_ms
from fleet.gateway.transcript import Transcript


class SessionError(ValueError):
    """Unknown or closed session, or a bad session key; says which key and what to do."""


def normalize_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise SessionError("sessionKey must be a non-empty string such as 'agent:main:main'")
    return key.strip().lower()


def agent_of(key: str) -> str:
    """The agent id of `agent:<id>:<rest>`; refuses keys that are not agent session keys."""
    parts = [p for p in key.split(":") if p]
    if len(parts) < 3 or parts[0] != "agent":
        raise SessionError(f"session key {key!r} is not of the form 'agent:<agentId>:<rest>'")
    try:
        return validate_agent_id(parts[1])
    except ValueError as exc:
        raise SessionError(f"session key {key!r}: {exc}") from exc


def atomic_write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfiles.temp_path(path)
    text = strictjson.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    fd = os.open(str(path.parent), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SessionStore:
    """Session records by key, persisted per agent."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.lock = threading.RLock()
        self._sessions: Dict[str, Dict[str, Any]] = {}
        self._load()

    def _load(self) -> None:
        agents_dir = self.layout.agents_dir
        if not agents_dir.is_dir():
            return
        for index in sorted(agents_dir.glob("*/sessions/sessions.json")):
            try:
                data = json.loads(index.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # a broken index must not stop the gateway; transcripts stay on disk
            if isinstance(data, dict):
                for key, rec in data.items():
                    if isinstance(rec, dict) and rec.get("sessionId"):
                        self._sessions[key] = rec

    def _save(self, agent_id: str, key: Optional[str] = None,
              rec: Optional[Dict[str, Any]] = None) -> None:
        """Persist an agent's index, with `rec` in place of `key` when given (not yet in memory:
        the in-memory record changes only after this write succeeded)."""
        mine = {k: v for k, v in self._sessions.items() if v.get("agentId") == agent_id}
        if key is not None and rec is not None:
            mine[key] = rec
        atomic_write_json(self.layout.session_index(agent_id), mine)

    def get(self, key: Any, open_only: bool = False) -> Dict[str, Any]:
        key = normalize_key(key)
        rec = self._sessions.get(key)
        if rec is None:
            raise SessionError(f"unknown session {key!r}: start it with session.start first")
        if open_only and rec.get("closedAt"):
            raise SessionError(f"session {key!r} is closed; start a new one with session.start")
        return rec

    def find(self, key: str) -> Optional[Dict[str, Any]]:
        return self._sessions.get(key)

    def create(self, key: str, agent_id: str, workspace: Path, **extra: Any) -> Dict[str, Any]:
        """A new session record with a fresh session id and an empty transcript."""
        session_id = str(uuid.uuid4())
        rec: Dict[str, Any] = {
            "sessionKey": key,
            "sessionId": session_id,
            "agentId": agent_id,
            "workspaceDir": str(workspace),
            "transcript": str(self.layout.transcript(agent_id, session_id)),
            "createdAt": now_ms(),
            "closedAt": None,
            "compactions": 0,
        }
        rec.update(extra)
        self.transcript(rec).create(session_id, key, str(workspace))
        self._save(agent_id, key, rec)
        self._sessions[key] = rec
        return rec

    def update(self, rec: Dict[str, Any], **changes: Any) -> None:
        """Apply `changes` to `rec` once they are on disk; a failed write changes nothing."""
        self._save(rec["agentId"], rec["sessionKey"], dict(rec, **changes))
        rec.update(changes)

    def transcript(self, rec: Dict[str, Any]) -> Transcript:
        return Transcript(Path(rec["transcript"]))

    def children(self, parent_key: str) -> List[Dict[str, Any]]:
        return [r for r in self._sessions.values() if r.get("requesterSessionKey") == parent_key]

    def all(self) -> List[Dict[str, Any]]:
        return list(self._sessions.values())


def public(rec: Dict[str, Any]) -> Dict[str, Any]:
    """The fields a client sees for a session."""
    keys = (
        "sessionKey", "sessionId", "agentId", "workspaceDir", "transcript", "createdAt",
        "closedAt", "requesterSessionKey", "runId", "task", "label", "kind", "ended",
        "announce", "endedHookAt",
    )
    return {k: rec.get(k) for k in keys if rec.get(k) is not None}
