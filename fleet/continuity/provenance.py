"""Where a run's input came from: OpenClaw's `inputProvenance`, as far as continuity needs it.

When a subagent ends, OpenClaw 2026.9.6 delivers its announce by running the requester session
once more (the *announce turn*), and once every child of a batch has settled it may run it again
(the *settle wake*). Such runs report a background completion; their input is an internal event,
not something the user asked. Their `before_prompt_build` ctx says so in `inputProvenance`, e.g.
`{kind: "inter_session", sourceSessionKey: <child>, sourceChannel: "internal", sourceTool:
"subagent_announce"}`; their `agent_end` ctx does not carry the field, so the plugin remembers
the run id (`fleet.plugins.memory_continuity.announceturn`). A persisted user message may carry
the same object as `provenance`. Which tools count is OpenClaw's own rule
(`isCompletionReportInputProvenance`). Our gateway passes the same fields in the same places.
"""

from __future__ import annotations

from typing import Any, Dict

INTER_SESSION = "inter_session"
INTERNAL_CHANNEL = "internal"
ANNOUNCE_TOOL = "subagent_announce"
# Source tools of runs that only report a finished background task (OpenClaw 2026.9.6).
COMPLETION_TOOLS = frozenset({ANNOUNCE_TOOL, "subagent_settle", "agent_harness_task",
                              "image_generate", "music_generate", "video_generate"})


def announce(child_key: str) -> Dict[str, str]:
    """The `inputProvenance` of the requester's run that delivers `child_key`'s announce."""
    return {"kind": INTER_SESSION, "sourceSessionKey": child_key,
            "sourceChannel": INTERNAL_CHANNEL, "sourceTool": ANNOUNCE_TOOL}


def is_completion_report(provenance: Any) -> bool:
    """True for the provenance of a run that reports a finished child or background task (tool
    names compared as OpenClaw does: trimmed, any case)."""
    if not isinstance(provenance, dict) or provenance.get("kind") != INTER_SESSION:
        return False
    tool = provenance.get("sourceTool")
    return isinstance(tool, str) and tool.strip().lower() in COMPLETION_TOOLS
