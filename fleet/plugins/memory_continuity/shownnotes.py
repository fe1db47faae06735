"""Which recovery notes each run's prompt showed its model, from `before_prompt_build` to the
run's `agent_end`.

Why: a checkpoint replaces the session's Unsurfaced Results, and a child's note may leave them
only once the parent's model has seen it. A note's time against the run's start cannot tell
that. The hooks reach the plugin late under load (an `agent_end` may be handled seconds after
the run ended, and a note is stamped before its write waits for the parent's lock), so a note
written just after the prompt was built looked older than the run and was dropped unseen. And
the recovery block shows Unsurfaced Results only up to its budget, so a parent with several
children never saw the later notes at all.

So `note` records, at `before_prompt_build`, the notes the injected block holds whole, by run
id (by session key when the ctx has no run id), and `take` hands them to that run's
`agent_end`, which drops only those. A run with no record (its worker restarted between the two
hooks) drops none: a note may then be shown twice, never lost. The memory is bounded.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, FrozenSet, Mapping

from fleet.continuity import paths
from fleet.continuity.snapshot import format_field

from . import notes

MAX_RUNS = 512

_lock = threading.Lock()
_shown: OrderedDict[str, FrozenSet[str]] = OrderedDict()


def _key(ctx: Mapping[str, Any]) -> str:
    run = ctx.get("runId")
    if isinstance(run, str) and run:
        return "run:" + run
    try:
        return "session:" + paths.check_session_key(ctx.get("sessionKey")).normalized
    except ValueError:
        return ""


def whole_in(note: str, block: str) -> bool:
    """Whether recovery block `block` holds note `note` whole, as the block renders a section
    (lines after the first indented): a note cut by the section's budget was not seen."""
    return format_field("", note)[2:] in block


def note(ctx: Mapping[str, Any], section: str, block: str) -> None:
    """At `before_prompt_build`: the notes of `section` that the injected `block` shows."""
    key = _key(ctx)
    if not key:
        return
    seen = frozenset(n for n in notes.note_blocks(section) if whole_in(n, block))
    with _lock:
        _shown[key] = seen
        _shown.move_to_end(key)
        while len(_shown) > MAX_RUNS:
            _shown.popitem(last=False)


def take(ctx: Mapping[str, Any]) -> FrozenSet[str]:
    """At `agent_end`: the notes this run's prompt showed (forgotten here: one answer per run)."""
    key = _key(ctx)
    if not key:
        return frozenset()
    with _lock:
        return _shown.pop(key, frozenset())
