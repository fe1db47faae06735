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
from typing import Any, Dict, Iterable, Iterator, List, Optional

from fleet.continuity import ids, regularfile

# Appends to one file are serialised by one of a fixed set of locks (chosen by the path), so
# the locks stay bounded however many sessions the gateway has seen (one lock per transcript
# path, kept forever, grew with every session).
_LOCKS = tuple(threading.Lock() for _ in range(64))
_TAIL_BLOCK = 64 * 1024  # `tail` reads the file backwards in blocks of this size

# The keys and small values every message repeats (OpenClaw's message shape, messages.py). A
# turn holds its whole session in memory while its hooks run; `json.loads` makes new copies of
# these strings for every line (its key memo lasts one call), about 40% of a parsed message.
# Messages read through `messages()` share one copy of each instead: equal values, and a
# turn's peak of small objects (which CPython's allocator keeps after a burst) much lower.
_SHARED = {
    word: word
    for word in (
        "role", "content", "timestamp", "type", "text", "id", "name", "arguments",
        "toolCallId", "toolName", "isError", "details", "status", "provenance", "__openclaw",
        "kind", "seq", "tokensBefore", "childSessionKey", "runId", "sourceSessionKey",
        "sourceChannel", "sourceTool", "message", "thinking", "image", "toolCall",
        "toolResult", "tool", "user", "assistant", "system", "compaction", "notification",
        "subagent_announce", "inter_session", "internal", "yielded",
    )
}


def _lock_for(path: str) -> threading.Lock:
    return _LOCKS[hash(path) % len(_LOCKS)]


def _parse(line: str) -> Optional[Dict[str, Any]]:
    """One transcript line as a dict; None for a blank, torn or non-object line."""
    if not line.strip():
        return None
    try:
        item = json.loads(line)
    except json.JSONDecodeError:
        return None
    return item if isinstance(item, dict) else None


def _share(value: Any) -> Any:
    """`value` with the strings of `_SHARED` replaced by their one shared copy (equal value)."""
    kind = type(value)
    if kind is dict:
        return {_SHARED.get(k, k): _share(v) for k, v in value.items()}
    if kind is list:
        return [_share(v) for v in value]
    if kind is str:
        return _SHARED.get(value, value)
    return value


def _last_messages(fh: Any, count: int) -> List[Dict[str, Any]]:
    """Up to `count` messages from the end of the open binary file `fh`, newest first."""
    pos, rest, found = fh.seek(0, os.SEEK_END), b"", []
    while pos > 0 and len(found) < count:
        step = min(_TAIL_BLOCK, pos)
        pos -= step
        fh.seek(pos)
        lines = (fh.read(step) + rest).split(b"\n")
        rest = lines.pop(0) if pos > 0 else b""  # may be cut: completed by the next block
        for raw in reversed(lines):
            item = _parse(raw.decode("utf-8", errors="replace"))
            if item is not None and _is_message(item):
                found.append(item["message"])
                if len(found) == count:
                    break
    return found


def _is_message(entry: Dict[str, Any]) -> bool:
    return entry.get("type") in ("message", "compaction") and isinstance(entry.get("message"),
                                                                          dict)


def iso_now(ts: Optional[float] = None) -> str:
    """JS `toISOString()` format: milliseconds and a `Z`."""
    ts = time.time() if ts is None else ts
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


class Transcript:
    """The JSONL transcript of one session."""

    def __init__(self, path: os.PathLike[str] | str) -> None:
        # A string, not a Path: every session op opens its transcript, and pathlib would intern
        # each session's uuid-named file name again (see tempfiles.temp_path).
        self.path = os.fspath(path)

    def create(self, session_id: str, session_key: str, cwd: str) -> None:
        """Write the header line once; an existing transcript is kept as it is."""
        if os.path.exists(self.path):
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
                "id": ids.uuid4_hex()[:8],
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
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        with _lock_for(self.path):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)

    def entries(self) -> List[Dict[str, Any]]:
        """Every parseable line; a torn last line (crash mid-write) is skipped."""
        return list(self._each())

    def messages(self) -> List[Dict[str, Any]]:
        """The session's messages in order (compaction markers included). Each line's wrapper
        (type, id, timestamp) is dropped as soon as it is read, and the strings every message
        repeats are shared (`_SHARED`): a turn reads its whole session, and only the messages
        are kept."""
        return [_share(e["message"]) for e in self._each() if _is_message(e)]

    def _each(self) -> Iterator[Dict[str, Any]]:
        """The parseable lines, read one at a time (never the whole file as one string)."""
        try:
            fd = regularfile.open_regular(self.path, follow=False)  # never a FIFO or a link
            with open(fd, encoding="utf-8", errors="replace", newline="\n") as fh:
                for line in fh:
                    item = _parse(line)
                    if item is not None:
                        yield item
        except FileNotFoundError:
            return

    def tail(self, count: int) -> List[Dict[str, Any]]:
        """The last `count` messages, as `messages()[-count:]`, reading only the end of the file
        (a client asking for the last few messages of a long session)."""
        if count <= 0:
            return []
        try:
            with open(regularfile.open_regular(self.path, follow=False), "rb") as fh:
                found = _last_messages(fh, count)
        except FileNotFoundError:
            return []
        return found[::-1]
