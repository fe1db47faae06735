"""Which runs are announce turns: a requester's run that only reports a finished child.

Why it matters: such a run's input is OpenClaw's completion event ("A background task
completed. ...", or the settle wake's "[Subagent Context] Every subagent spawned from this
session has now settled ..."), not the user's request, so its `agent_end` must not become the
session's checkpoint: it would replace the parent's Objective with that text and its Unsurfaced
Results with the reply, dropping the notes the children left there a moment before.

How it is recognised (OpenClaw 2026.9.6, see `fleet.continuity.provenance`): the run's
`before_prompt_build` ctx carries `inputProvenance` with `sourceTool: "subagent_announce"` (or
another completion report's tool, such as the settle wake's `subagent_settle`), its
`agent_end` ctx has the same `runId` but no provenance. So `note_run` remembers the run id at
`before_prompt_build` and `is_announce_run` answers at `agent_end`; an `agent_end` ctx or a last
user message that carries the provenance itself counts too. A worker restarted between the two
hooks forgets the run (the turn is then checkpointed as before); the memory is bounded.

OpenClaw 2026.4.24 tells plugins no provenance: there the run's last user message itself says
it (`fleet.continuity.envelope.is_completion_report`: a completion event, no words of the user's).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, List, Mapping

from fleet.continuity import envelope, journal, provenance

MAX_RUNS = 512

_lock = threading.Lock()
_runs: OrderedDict[str, None] = OrderedDict()


def _run_id(ctx: Mapping[str, Any]) -> str:
    run = ctx.get("runId")
    return run if isinstance(run, str) else ""


def note_run(ctx: Mapping[str, Any]) -> bool:
    """At `before_prompt_build`: remember the run if it is an announce turn; True if it is."""
    if not provenance.is_completion_report(ctx.get("inputProvenance")):
        return False
    run = _run_id(ctx)
    if run:
        with _lock:
            _runs[run] = None
            _runs.move_to_end(run)
            while len(_runs) > MAX_RUNS:
                _runs.popitem(last=False)
    return True


def _last_user(messages: List[Any]) -> Mapping[str, Any]:
    for msg in reversed(messages):
        if isinstance(msg, Mapping) and msg.get("role") == "user":
            return msg
    return {}


def is_announce_run(ctx: Mapping[str, Any], messages: List[Any]) -> bool:
    """At `agent_end`: was this run an announce turn? (Forgets the run id: one answer per run.)"""
    run = _run_id(ctx)
    with _lock:
        noted = bool(run) and run in _runs
        if noted:
            del _runs[run]
    last = _last_user(messages)
    return (noted or provenance.is_completion_report(ctx.get("inputProvenance"))
            or provenance.is_completion_report(last.get("provenance"))
            or envelope.is_completion_report(journal.message_text(last)))
