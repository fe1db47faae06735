"""What a subagent's latest run leaves for its parent: `<child dir>/HANDOFF.json`.

Why a record of its own: the child's checkpoint keeps its *last* assistant text, which may be a
step on the way ("Let me search.") or a silent token, and `subagent_ended` carries no text at
all. So when a child's run ends (`agent_end`), the plugin records what the announce will pick
from the same messages (`fleet.continuity.childresult.select_output`), for a normal end and for
a timeout, and recovery merges exactly that pick. A run that ends paused (after
`sessions_yield` or a compaction) records "waiting": nothing final yet. The next run replaces
the record, so the parent's note carries the answer the child really finished with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

from fleet.continuity import store
from fleet.continuity.childresult import select_output

NAME = "HANDOFF.json"
VERSION = 1
OUTCOMES = ("ok", "timeout")
READ_LIMIT = 8 * 1024 * 1024


def path(child_dir: Path) -> Path:
    return Path(child_dir) / NAME


def build(messages: List[Any], task: str, now_iso: str) -> Dict[str, Any]:
    """The record for a run that ended with `messages` (the session's history)."""
    record: Dict[str, Any] = {"version": VERSION, "updatedAt": now_iso, "task": task}
    for outcome in OUTCOMES:
        choice = select_output(messages, outcome)
        record[outcome] = {"state": choice["state"], "text": choice["text"]}
    return record


def write(child_dir: Path, record: Dict[str, Any]) -> Path:
    target = path(child_dir)
    with store.locked(target):
        store.atomic_write(target, json.dumps(record, ensure_ascii=False, indent=1) + "\n")
    return target


def read(child_dir: Path) -> Optional[Dict[str, Any]]:
    """The record, or None when there is none (or it is not one of ours)."""
    text = store.read_text(path(child_dir), max_bytes=READ_LIMIT)
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get("version") == VERSION else None


def pick(record: Dict[str, Any], outcome: str) -> Dict[str, Any]:
    """`{"state", "text"}` the announce carries for `outcome` (ok / timeout)."""
    choice = record.get(outcome)
    if not isinstance(choice, dict) or not isinstance(choice.get("state"), str):
        return {"state": "empty", "text": None}
    text = choice.get("text")
    return {"state": choice["state"], "text": text if isinstance(text, str) else None}
