"""`subagent_spawned`: remember which session asked for each child, persisted; `llm_input`:
remember a child's task where OpenClaw gives it only in the child's system prompt.

Why: OpenClaw names a child's requester only in the subagent hooks (`ctx.requesterSessionKey` of
`subagent_spawned` / `subagent_ended`); the child's own `before_prompt_build` ctx has its key,
agent and workspace but not its parent, and a child key encodes its target agent, not the
requester (a child of `agent:main:telegram:x` is `agent:main:subagent:<id>`). `subagent_spawned`
fires before the child's first prompt build, so the record is there when the seed needs it, and
it survives gateway restarts.

OpenClaw 2026.5.x gives a child its task only in its system prompt (`## Your Role`); the child's
first message says "Your assigned task is in the system prompt". No hook but `llm_input` (fired
before each model call, with the system prompt) shows that prompt to a plugin, so the child's
first `llm_input` records the task beside its requester, where its checkpoint and the note its
parent gets read it (`task_of`). Releases that put the task in the message need nothing here.

File: `<state>/memory-continuity/requesters.json`, `{"children": {childKey: {"requester",
"agentId", "at", "task"?}}}`, the newest `MAX_CHILDREN` kept, read-modify-write under the file's
lock.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from fleet.continuity import origin, paths, store
from fleet.continuity.document import to_iso
from fleet.continuity.statelayout import StateLayout

from . import clock
from .locate import Locator

MAX_CHILDREN = 2000


@functools.lru_cache(maxsize=8)
def record_path(state_dir: Path) -> Path:
    """The same Path object for a state dir every time: every spawn and every child's prompt
    build reads it, and a new Path interns its parts again (see tempfiles.temp_path)."""
    return StateLayout(state_dir).requesters


def _load(text: Optional[str]) -> Dict[str, Dict[str, Any]]:
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    children = data.get("children") if isinstance(data, dict) else None
    if not isinstance(children, dict):
        return {}
    return {k: v for k, v in children.items() if isinstance(k, str) and isinstance(v, dict)}


def _field(state_dir: Path, child_key: str, name: str) -> Optional[str]:
    entry = _load(store.read_text(record_path(state_dir))).get(child_key)
    raw = entry.get(name) if entry else None
    return raw if isinstance(raw, str) and raw else None


def requester_of(state_dir: Path, child_key: str) -> Optional[str]:
    """The requester session key recorded for `child_key` (normalised), or None."""
    return _field(state_dir, child_key, "requester")


def task_of(state_dir: Path, child_key: str) -> str:
    """The task recorded from `child_key`'s system prompt (normalised key), "" when none."""
    return _field(state_dir, child_key, "task") or ""


def _put(state_dir: Path, child: str, fields: Mapping[str, str]) -> None:
    """Merge `fields` into `child`'s entry (made the newest), under the file's lock."""

    def put(current: Optional[str]) -> str:
        children = _load(current)
        entry = children.pop(child, {})
        entry.update(fields)
        children[child] = entry  # newest last: the cap drops the oldest
        return _dump(dict(list(children.items())[-MAX_CHILDREN:]))

    path = record_path(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    store.update(path, put)


def _dump(children: Dict[str, Dict[str, Any]]) -> str:
    return json.dumps({"children": children}, indent=0, sort_keys=False) + "\n"


def forget(state_dir: Path, child_key: str) -> None:
    """Drop `child_key`'s entry (the plugin's self-test's child: selftest.py), under the lock;
    nothing is written when there is none."""
    path = record_path(state_dir)
    if not path.exists():
        return

    def drop(current: Optional[str]) -> Optional[str]:
        children = _load(current)
        if children.pop(child_key, None) is None:
            return None
        return _dump(children)

    store.update(path, drop)


def remember(api: Any, locator: Locator, event: Mapping[str, Any], ctx: Mapping[str, Any]) -> None:
    """The hook body: record child -> requester (both validated session keys)."""
    log = api.logger
    try:
        child = paths.check_session_key(event.get("childSessionKey") or ctx.get("childSessionKey"))
        requester = paths.check_session_key(ctx.get("requesterSessionKey"))
    except ValueError as exc:
        log.warn(f"subagent_spawned: not recorded: {exc}")
        return
    _put(locator.state_dir, child.normalized, {"requester": requester.normalized,
                                                "agentId": child.agent_id,
                                                "at": to_iso(clock.now())})
    log.info(f"subagent_spawned: {child.normalized} requested by {requester.normalized}")


def learn_task(api: Any, locator: Locator, event: Mapping[str, Any],
               ctx: Mapping[str, Any]) -> None:
    """The `llm_input` body: a child whose task is only in its system prompt gets it recorded
    (once: later model calls of the child find it there)."""
    try:
        key = paths.check_session_key(ctx.get("sessionKey"))
    except ValueError:
        return
    if not key.is_subagent or origin.of_text(event.get("prompt")).words:
        return  # a parent's run, or the task is in the child's message already
    if task_of(locator.state_dir, key.normalized):
        return
    task = origin.role_task(event.get("systemPrompt"))
    if task:
        _put(locator.state_dir, key.normalized, {"task": task})
        api.logger.info(f"llm_input: task of {key.normalized} recorded from its system prompt")
