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
fleet/continuity/origin.py's. The memory is bounded.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, List, Mapping

from fleet.continuity import origin

MAX_RUNS = 512

_lock = threading.Lock()
_runs: OrderedDict[str, origin.Origin] = OrderedDict()


def _run_id(ctx: Mapping[str, Any]) -> str:
    run = ctx.get("runId")
    return run if isinstance(run, str) else ""


def note(ctx: Mapping[str, Any], prompt: Any) -> origin.Origin:
    """At `before_prompt_build`: the run's origin, remembered for its `agent_end`."""
    found = origin.of_run(ctx, text=prompt if isinstance(prompt, str) else "")
    run = _run_id(ctx)
    if run and not (found.is_user and not found.words):  # an empty prompt tells nothing
        with _lock:
            _runs[run] = found
            _runs.move_to_end(run)
            while len(_runs) > MAX_RUNS:
                _runs.popitem(last=False)
    return found


def at_end(ctx: Mapping[str, Any], messages: List[Any]) -> origin.Origin:
    """At `agent_end`: the run's origin (forgets the run: one answer per run)."""
    run = _run_id(ctx)
    with _lock:
        noted = _runs.pop(run, None) if run else None
    return noted or origin.of_run(ctx, message=origin.last_user(messages) or {})
