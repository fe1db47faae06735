"""Session transcripts: one JSONL file per session, appended and fsynced line by line.

A line is `{"type": "session", ...}` (header), `{"type": "message", "message": {...}}` or
`{"type": "compaction", ..., "message": <marker>}`. Appending whole lines with fsync means a crash
or kill -9 loses at most the line being written, and a torn last line is skipped on read.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

_locks: Dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(str(path), threading.Lock())


def iso_now(ts: Optional[float] = None) -> str:
    """JS `toISOString()` format: milliseconds and a `Z`."""
    ts = time.time() if ts is None else ts
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


class Transcript:
    """The JSONL transcript of one session."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def create(self, session_id: str, session_key: str, cwd: str) -> None:
        """Write the header line once; an existing transcript is kept as it is."""
        if self.path.exists():
            return
        header = {
            "type": "session",
            "version": 1,
            "id": session_id,
            "sessionKey": session_key,
            "timestamp": iso_now(),
            "cwd": cwd,
        }
        self._append_lines([header])

    def append(self, messages: Iterable[Dict[str, Any]]) -> int:
        """Append messages (a compaction marker becomes a `compaction` line); returns the count."""
        lines = []
        for msg in messages:
            entry: Dict[str, Any] = {
                "type": "message",
                "id": uuid.uuid4().hex[:8],
                "timestamp": iso_now(),
                "message": msg,
            }
            marker = msg.get("__openclaw") if isinstance(msg, dict) else None
            if isinstance(marker, dict) and marker.get("kind") == "compaction":
                entry["type"] = "compaction"
                entry["tokensBefore"] = marker.get("tokensBefore")
                entry["fromHook"] = True
            lines.append(entry)
        self._append_lines(lines)
        return len(lines)

    def _append_lines(self, lines: List[Dict[str, Any]]) -> None:
        if not lines:
            return
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _lock_for(self.path):
            fd = os.open(str(self.path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)

    def entries(self) -> List[Dict[str, Any]]:
        """Every parseable line; a torn last line (crash mid-write) is skipped."""
        try:
            raw = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        out = []
        for line in raw.splitlines():
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(item, dict):
                out.append(item)
        return out

    def messages(self) -> List[Dict[str, Any]]:
        """The session's messages in order (compaction markers included)."""
        return [
            e["message"]
            for e in self.entries()
            if e.get("type") in ("message", "compaction") and isinstance(e.get("message"), dict)
        ]
