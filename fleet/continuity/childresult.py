"""A child's result: what the announce tells its parent, read from the child's messages.

One rule, used by both sides so they agree: the gateway announces what `select_output` picks,
and the memory-continuity plugin records the same pick when the child's run ends, so the note it
later merges into the parent is the text the parent was announced.

The rule is OpenClaw's `subagent-announce-output` with the waiting-for-continuation fix: raw
tool output is never a result; after a `sessions_yield` *or a compaction marker* the child is
waiting and nothing is final until a real assistant turn; text beside tool calls is an
intermediate step; the latest real answer to the latest request wins; a silent token (see
`is_silent`) announces nothing; a timeout still reports partial progress.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, Dict, List, Mapping, Optional

YIELD_TOOL = "sessions_yield"
MAX_FRAGMENTS = 3
TOOL_CALL_TYPES = ("toolCall", "tool_use", "toolUse", "functionCall", "function_call")
ANNOUNCE_SKIP = "ANNOUNCE_SKIP"
_NO_REPLY_RE = re.compile(r"^\s*NO_REPLY(?:\s+NO_REPLY)*\s*$", re.IGNORECASE)


def message_text(msg: Mapping[str, Any]) -> str:
    """Text of a message: string content, or its non-empty text blocks joined by newlines."""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            b.get("text", "")
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        return "\n".join(p for p in parts if p)
    return ""


def tool_calls(msg: Mapping[str, Any]) -> List[Dict[str, Any]]:
    content = msg.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") in TOOL_CALL_TYPES]


def tool_name(block: Mapping[str, Any]) -> str:
    for key in ("name", "toolName", "tool_name", "functionName", "function_name"):
        if isinstance(block.get(key), str):
            return block[key]
    return ""


def is_compaction(msg: Mapping[str, Any]) -> bool:
    marker = msg.get("__openclaw")
    return isinstance(marker, dict) and marker.get("kind") == "compaction"


def _strip_edge_punctuation(text: str) -> str:
    start, end = 0, len(text)
    while start < end and unicodedata.category(text[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(text[end - 1]).startswith("P"):
        end -= 1
    return text[start:end]


def is_silent(text: Optional[str]) -> bool:
    """What the announce treats as "say nothing": exactly `ANNOUNCE_SKIP`, or `NO_REPLY` alone
    (any case, repeated, edge punctuation ignored), as OpenClaw's isAnnounceSkip and
    isSilentReplyText(text, "NO_REPLY") decide."""
    if not isinstance(text, str) or not text.strip():
        return False
    if text.strip() == ANNOUNCE_SKIP:
        return True
    return bool(_NO_REPLY_RE.match(text)
                or _NO_REPLY_RE.match(_strip_edge_punctuation(text.strip())))


class Snapshot:
    """What the summarizer learned walking the child's messages oldest to newest."""

    def __init__(self) -> None:
        self.assistant_text: Optional[str] = None
        self.silent_text: Optional[str] = None
        self.fragments: List[str] = []
        self.tool_calls = 0
        self.waiting = False
        self._prev_yielded = False

    def clear_texts(self) -> None:
        self.assistant_text = None
        self.silent_text = None
        self.fragments = []

    def as_dict(self) -> Dict[str, Any]:
        return {
            "assistantText": self.assistant_text,
            "silentText": self.silent_text,
            "fragments": list(self.fragments),
            "toolCalls": self.tool_calls,
            "waitingForContinuation": self.waiting,
        }


def _yield_result(msg: Mapping[str, Any], prev_yielded: bool) -> bool:
    if tool_name(msg) == YIELD_TOOL:
        return True
    if not prev_yielded:
        return False
    details = msg.get("details")
    if isinstance(details, dict) and details.get("status") == "yielded":
        return True
    try:
        body = json.loads(message_text(msg) or "null")
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("status") == "yielded"


def summarize(messages: List[Any]) -> Snapshot:
    """Walk messages oldest -> newest into a Snapshot."""
    snap = Snapshot()
    for msg in messages or []:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if role == "assistant":
            calls = tool_calls(msg)
            snap.tool_calls += len(calls)
            if any(tool_name(c) == YIELD_TOOL for c in calls):
                snap.clear_texts()
                snap.waiting = True
                snap._prev_yielded = True
                continue
            snap._prev_yielded = False
            snap.waiting = False
            text = message_text(msg).strip()
            if not text:
                continue
            if is_silent(text):
                snap.clear_texts()
                snap.silent_text = text
            elif calls:  # text beside tool calls is an intermediate step, not an answer
                snap.assistant_text = None
                snap.silent_text = None
                snap.fragments.append(text)
            else:
                snap.assistant_text = text
                snap.silent_text = None
                snap.fragments.append(text)
        elif role in ("toolResult", "tool"):
            if _yield_result(msg, snap._prev_yielded):
                snap.clear_texts()
                snap.waiting = True
            # raw tool output is never a source
        elif is_compaction(msg):
            snap.clear_texts()
            snap.waiting = True
        elif role == "user":  # a new request: answers given before it are not its answer
            snap.clear_texts()
    return snap


def partial_progress(snap: Snapshot) -> Optional[str]:
    """For a timed-out child: `[Partial progress: ...]` plus the last assistant fragments."""
    parts: List[str] = []
    if snap.tool_calls > 0:
        parts.append(f"[Partial progress: {snap.tool_calls} tool call(s) executed before timeout]")
    if snap.fragments:
        parts.append("\n\n---\n\n".join(snap.fragments[-MAX_FRAGMENTS:]))
    return "\n\n".join(parts) if parts else None


def select_output(messages: List[Any], outcome: str = "ok") -> Dict[str, Any]:
    """Decide what to announce: {"state": "text"|"silent"|"waiting"|"empty", "text", "snapshot"}.

    `waiting` means the child is paused (yield or compaction) with nothing final yet: the caller
    must hold the announce until a real assistant turn arrives. `empty` means no final answer
    (only tool output or intermediate steps). Intermediate fragments are used only on timeout:
    anything else would announce a half-done step as the child's result.
    """
    snap = summarize(messages)
    if not snap.waiting:
        if snap.silent_text is not None:
            return {"state": "silent", "text": None, "snapshot": snap.as_dict()}
        if snap.assistant_text:
            return {"state": "text", "text": snap.assistant_text, "snapshot": snap.as_dict()}
    progress = partial_progress(snap) if outcome == "timeout" else None
    if progress:
        return {"state": "text", "text": progress, "snapshot": snap.as_dict()}
    state = "waiting" if snap.waiting else "empty"
    return {"state": state, "text": None, "snapshot": snap.as_dict()}
