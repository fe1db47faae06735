"""Sessions: who they belong to, where their transcript is, and how they relate.

The index of each agent's sessions lives in `<state>/agents/<agentId>/sessions/sessions.json`
(written temp + fsync + rename), so sessions, children and pending announces survive a gateway
restart: a deploy in the middle of a parent/child run loses nothing.

Every change of one record rewrites its agent's whole index, so the store keeps each record's
JSON text as written: a write serialises (and checks) only the changed record and joins the rest,
instead of re-encoding every record of the agent on every session op (a burst of turns and
children otherwise churns thousands of short-lived objects per op, and the freed memory
stays with the process). A finished session (closed, or a child whose end is settled: its
`subagent_ended` fired and no announce is held) is kept only as that text, the same bytes as on
disk, and parsed again when asked for: only open work is held as live records.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Set

from fleet.continuity import ids, regularfile, strictjson
from fleet.continuity.atomicfile import atomic_write
from fleet.continuity.paths import validate_agent_id
from fleet.gateway.layout import Layout
from fleet.gateway.messages import now_ms
from fleet.gateway.transcript import Transcript

# the session index of one agent: ~200 bytes a session; far more than any gateway keeps
INDEX_MAX_BYTES = 64 * regularfile.MIB


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
    """`data` as sorted, indented JSON, replaced atomically (fleet.continuity.atomicfile)."""
    text = strictjson.dumps(data, indent=1, sort_keys=True, ensure_ascii=False)
    atomic_write(path, text + "\n")


def record_text(rec: Dict[str, Any]) -> str:
    """One record as the index stores it (strict JSON, keys sorted, one line)."""
    return strictjson.dumps(rec, sort_keys=True, ensure_ascii=False)


def index_text(texts: Dict[str, str]) -> str:
    """An agent's index from its records' texts: a JSON object sorted by session key. Joined in
    one pass from the texts themselves (no per-record copy: the index is rewritten on every
    session op, and its records are ~2 KB each)."""
    if not texts:
        return "{}\n"
    parts = ["{\n"]
    for key in sorted(texts):
        parts += (" ", json.dumps(key, ensure_ascii=False), ": ", texts[key], ",\n")
    parts[-1] = "\n}\n"
    return "".join(parts)


def finished(rec: Dict[str, Any]) -> bool:
    """Closed, or a child whose end is settled (`subagent_ended` fired, no announce held):
    nothing will change it but an explicit later request."""
    if rec.get("closedAt"):
        return True
    return bool(rec.get("endedHookAt")) and (rec.get("announce") or {}).get("state") != "pending"


class SessionStore:
    """Session records by key, persisted per agent."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.lock = threading.RLock()
        self._sessions: Dict[str, Dict[str, Any]] = {}  # unfinished sessions, as live records
        self._texts: Dict[str, str] = {}  # every session: its record's text in the index
        self._agents: Dict[str, str] = {}  # every session: its agent
        self._closed: Set[str] = set()  # the keys of closed sessions
        self._load()

    def _load(self) -> None:
        agents_dir = self.layout.agents_dir
        if not agents_dir.is_dir():
            return
        for index in sorted(agents_dir.glob("*/sessions/sessions.json")):
            try:
                data = json.loads(regularfile.read_text(index, INDEX_MAX_BYTES, follow=False))
            except (OSError, ValueError):
                continue  # a broken index must not stop the gateway; transcripts stay on disk
            if isinstance(data, dict):
                for key, rec in data.items():
                    if isinstance(rec, dict) and rec.get("sessionId"):
                        try:
                            self._keep(key, rec, record_text(rec))
                        except ValueError:
                            continue  # not writable again (e.g. NaN): as a broken record

    def _keep(self, key: str, rec: Dict[str, Any], text: str) -> None:
        """Hold `rec` as written: live while open, only as its text once finished."""
        self._texts[key] = text
        self._agents[key] = str(rec.get("agentId"))
        if rec.get("closedAt"):
            self._closed.add(key)
        else:
            self._closed.discard(key)
        if finished(rec):
            self._sessions.pop(key, None)
        else:
            self._sessions[key] = rec

    def _save(self, agent_id: str, key: str, rec: Dict[str, Any]) -> str:
        """Persist an agent's index with `rec` in place of `key` (not yet in memory: the
        in-memory record changes only after this write succeeded); returns `rec`'s text."""
        text = record_text(rec)
        mine = {k: t for k, t in self._texts.items() if self._agents.get(k) == agent_id}
        mine[key] = text
        atomic_write(self.layout.session_index(agent_id), index_text(mine))
        return text

    def get(self, key: Any, open_only: bool = False) -> Dict[str, Any]:
        key = normalize_key(key)
        rec = self.find(key)
        if rec is None:
            raise SessionError(f"unknown session {key!r}: start it with session.start first")
        if open_only and rec.get("closedAt"):
            raise SessionError(f"session {key!r} is closed; start a new one with session.start")
        return rec

    def find(self, key: str) -> Optional[Dict[str, Any]]:
        """The record of `key` (a finished one parsed from its stored text), or None."""
        rec = self._sessions.get(key)
        if rec is None and key in self._texts:
            rec = json.loads(self._texts[key])
        return rec

    def create(self, key: str, agent_id: str, workspace: Path, **extra: Any) -> Dict[str, Any]:
        """A new session record with a fresh session id and an empty transcript."""
        session_id = ids.uuid4()
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
        self._keep(key, rec, self._save(agent_id, key, rec))
        return rec

    def update(self, rec: Dict[str, Any], **changes: Any) -> None:
        """Apply `changes` to `rec` once they are on disk; a failed write changes nothing."""
        key = rec["sessionKey"]
        text = self._save(rec["agentId"], key, dict(rec, **changes))
        rec.update(changes)
        self._keep(key, rec, text)

    def transcript(self, rec: Dict[str, Any]) -> Transcript:
        return Transcript(rec["transcript"])

    def children(self, parent_key: str) -> List[Dict[str, Any]]:
        return [r for r in self.all() if r.get("requesterSessionKey") == parent_key]

    def all(self, closed: bool = True) -> List[Dict[str, Any]]:
        """Every session (without `closed`: every one not closed), in the order they were
        first stored."""
        out = []
        for key in self._texts:
            if not closed and key in self._closed:
                continue
            rec = self.find(key)
            if rec is not None:
                out.append(rec)
        return out


def public(rec: Dict[str, Any]) -> Dict[str, Any]:
    """The fields a client sees for a session."""
    keys = (
        "sessionKey", "sessionId", "agentId", "workspaceDir", "transcript", "createdAt",
        "closedAt", "requesterSessionKey", "runId", "task", "label", "kind", "ended",
        "announce", "endedHookAt",
    )
    return {k: rec.get(k) for k in keys if rec.get(k) is not None}
