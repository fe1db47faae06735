"""`subagent_spawned`: remember which session asked for each child, persisted.

Why: OpenClaw names a child's requester only in the subagent hooks (`ctx.requesterSessionKey` of
`subagent_spawned` / `subagent_ended`); the child's own `before_prompt_build` ctx has its key,
agent and workspace but not its parent, and a child key encodes its target agent, not the
requester (a child of `agent:main:telegram:x` is `agent:main:subagent:<id>`). `subagent_spawned`
fires before the child's first prompt build, so the record is there when the seed needs it, and
it survives gateway restarts.

File: `<state>/memory-continuity/requesters.json`, `{"children": {childKey: {"requester",
"agentId", "at"}}}`, the newest `MAX_CHILDREN` kept, read-modify-write under the file's lock.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from fleet.continuity import paths, store
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


def requester_of(state_dir: Path, child_key: str) -> Optional[str]:
    """The requester session key recorded for `child_key` (normalised), or None."""
    entry = _load(store.read_text(record_path(state_dir))).get(child_key)
    raw = entry.get("requester") if entry else None
    return raw if isinstance(raw, str) and raw else None


def remember(api: Any, locator: Locator, event: Mapping[str, Any], ctx: Mapping[str, Any]) -> None:
    """The hook body: record child -> requester (both validated session keys)."""
    log = api.logger
    try:
        child = paths.check_session_key(event.get("childSessionKey") or ctx.get("childSessionKey"))
        requester = paths.check_session_key(ctx.get("requesterSessionKey"))
    except ValueError as exc:
        log.warn(f"subagent_spawned: not recorded: {exc}")
        return
    entry = {"requester": requester.normalized, "agentId": child.agent_id,
             "at": to_iso(clock.now())}

    def put(current: Optional[str]) -> str:
        children = _load(current)
        children.pop(child.normalized, None)
        children[child.normalized] = entry  # newest last: the cap drops the oldest
        kept = dict(list(children.items())[-MAX_CHILDREN:])
        return json.dumps({"children": kept}, indent=0, sort_keys=False) + "\n"

    path = record_path(locator.state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    store.update(path, put)
    log.info(f"subagent_spawned: {child.normalized} requested by {requester.normalized}")
