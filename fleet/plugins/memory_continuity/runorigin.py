"""Where each run came from, remembered from its `before_prompt_build` to its `agent_end`.

Why it matters: a run OpenClaw starts on its own (a child's announce, a settle wake, a message
routed from another session, a restart recovery) must not become the session's checkpoint: its
input would replace the Objective and its reply the Unsurfaced Results, dropping the notes the
children left there a moment before. Only the user's runs (and a child's runs on its task)
checkpoint.

The two hooks see different things: `before_prompt_build` gets the run's own input (the prompt)
and, on OpenClaw 2026.9.x, its provenance in the ctx; `agent_end` gets the whole transcript,
whose last user message may be one OpenClaw steered into a user's run while it went. So `note`
decides at `before_prompt_build` and remembers the answer by run id, and `at_end` uses it;
without one (a worker restarted in between, a run whose prompt hook did not run) `at_end`
decides from the ctx and the last user message. What counts as whose is
fleet/continuity/origin.py's.

The same note keeps what each session's running turn asks (`in_flight`) until its `agent_end`
checkpoints it: a child the turn spawns starts before that (its parent's model is still
answering), and its seed must carry the request it was spawned for, not the one before. The
memory is bounded.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, List, Mapping

from fleet.continuity import origin, paths

MAX_RUNS = 512

_lock = threading.Lock()
_runs: OrderedDict[str, origin.Origin] = OrderedDict()
_asked: OrderedDict[str, tuple] = OrderedDict()  # session key -> (run id, what its turn asks)


def _run_id(ctx: Mapping[str, Any]) -> str:
    run = ctx.get("runId")
    return run if isinstance(run, str) else ""


def note(ctx: Mapping[str, Any], prompt: Any) -> origin.Origin:
    """At `before_prompt_build`: the run's origin, remembered for its `agent_end`."""
    found = origin.of_run(ctx, text=prompt if isinstance(prompt, str) else "")
    run = _run_id(ctx)
    if not run or (found.is_user and not found.words):  # an empty prompt tells nothing
        return found
    session = _session(ctx)
    with _lock:
        _remember(_runs, run, found)
        if session and found.words and found.kind in (origin.USER, origin.SUBAGENT_TASK):
            _remember(_asked, session, (run, found.words))
    return found


def _session(ctx: Mapping[str, Any]) -> str:
    try:
        return paths.check_session_key(ctx.get("sessionKey")).normalized
    except ValueError:
        return ""


def _remember(memory: OrderedDict, key: str, value: Any) -> None:
    memory[key] = value
    memory.move_to_end(key)
    while len(memory) > MAX_RUNS:
        memory.popitem(last=False)


def in_flight(session_key: str) -> str:
    """What the running turn of `session_key` (normalised) asks, "" when it has none or its
    checkpoint already holds it."""
    with _lock:
        found = _asked.get(session_key)
    return found[1] if found else ""


def at_end(ctx: Mapping[str, Any], messages: List[Any]) -> origin.Origin:
    """At `agent_end`: the run's origin (forgets the run: one answer per run)."""
    run = _run_id(ctx)
    session = _session(ctx)
    with _lock:
        noted = _runs.pop(run, None) if run else None
        asked = _asked.get(session) if session else None
        if asked is not None and asked[0] == run:
            del _asked[session]  # its checkpoint holds the request from here on
    return noted or origin.of_run(ctx, message=origin.last_user(messages) or {})
