"""Where a turn came from: the user, or OpenClaw itself; and the user's words in it.

OpenClaw runs a session not only for what its user typed. When a subagent ends, it delivers
the child's result by running the requester session once more (an *announce turn*), may run it
again once every child has settled (a *settle wake*), routes messages between sessions, and
restarts interrupted work on its own. The continuity state must follow the user: such a turn
never becomes a session's Objective, its topic or a tag, and a child's Objective is its task,
not the envelope around it.

Every release in the supported range says where a turn came from, each in its own way, so this
module reads everything a release may provide, most authoritative first:

1. run provenance: `inputProvenance` in the hook ctx (2026.9.x), `provenance` on a persisted
   message (2026.5.x and later, from the run after the one that added it): `kind`
   `external_user` | `inter_session` | `internal_system`, with `sourceTool` (OpenClaw's own
   rule, `isCompletionReportInputProvenance`: `subagent_announce`, `subagent_settle` and the
   agent-mediated tools report a completion);
2. the run id of an announce run, `announce:v1:<child session key>:<child run id>`
   (2026.5.x to 2026.9.x);
3. the inter-session header OpenClaw writes into the text, a line of its own:
   `[Inter-session message] sourceSession=<key> sourceChannel=<c> sourceTool=<t> isUser=false`,
   first in the prompt (2026.5.x to 2026.9.x), last paragraph of the persisted message (from
   2026.7.x);
4. the completion event itself: `[Internal task completion event]` (in a runtime-context block,
   2026.4.x to 2026.6.x), `A background task completed. ...` followed by `source:` /
   `session_key:` lines (from 2026.7.x), and the settle wake's `[Subagent Context] Every
   subagent spawned from this session has now settled` (2026.9.x);
5. a message OpenClaw queued before a run's own input (`[Queued user message that arrived while
   the previous turn was still active]`, 2026.4.x to 2026.6.x; seen on 2026.5.2 with a child's
   announce queued before the user's next message): the user's when the user's words remain
   once OpenClaw's additions are off, whatever the queued part says;
6. a subagent's first message, OpenClaw's `[Subagent Context]` envelope around its task
   (fleet/continuity/subagenttask.py); on 2026.5.x the task is only in the child's system
   prompt (`## Your Role`), which `role_task` reads.

What remains, with OpenClaw's additions taken off (fleet/continuity/envelope.py), is the user's.
The texts real gateways of every release produced are kept as a corpus in the tests
(tests/corpus/openclaw/), so a release that writes something new is a failing test, not a
polluted state file. Standard library only.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, NamedTuple, Optional

from fleet.continuity import envelope, subagenttask

USER = "user"  # the user's own turn
SUBAGENT_TASK = "subagent_task"  # a child's assignment
COMPLETION = "completion"  # a finished child or background task reported back
INTER_SESSION = "inter_session"  # routed from another session or tool, not the user
INTERNAL = "internal"  # OpenClaw's own (restart recovery, status refresh, ...)

ANNOUNCE_RUN_PREFIX = "announce:"
ANNOUNCE_TOOL = "subagent_announce"
# Source tools of runs that only report a finished child or background task (OpenClaw's
# isCompletionReportInputProvenance, compared as it does: trimmed, any case).
COMPLETION_TOOLS = frozenset({ANNOUNCE_TOOL, "subagent_settle", "agent_harness_task",
                              "image_generate", "music_generate", "video_generate"})
_KINDS = {"external_user": USER, "inter_session": INTER_SESSION, "internal_system": INTERNAL}
SETTLE_MARKER = "Every subagent spawned from this session has now settled"
# A subagent's system prompt only (`role_task`): compiled on first use (re's own cache), not by
# every process that imports this module.
_ROLE = r"(?ms)^## Your Role[ \t]*\n(.*?)(?=^## |\Z)"
_ROLE_FENCED = r"(?ms)^```[^\n]*\n(.*?)\n```[ \t]*$"
_ROLE_LINE = r"(?m)^- You were created to handle:[ \t]*(.*?)[ \t]*$"


class Origin(NamedTuple):
    """One turn's origin. `evidence` says what told it (for logs and the corpus tests);
    `words` are the user's words (USER), the task (SUBAGENT_TASK, "" when the release keeps it
    in the system prompt) or the routed text (INTER_SESSION), else ""."""

    kind: str
    evidence: str
    words: str = ""
    source_session: str = ""
    source_tool: str = ""

    @property
    def is_user(self) -> bool:
        return self.kind == USER


def _clean(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def of_provenance(provenance: Any, text: str = "") -> Optional[Origin]:
    """The origin run provenance states, None when `provenance` is not one OpenClaw writes."""
    if not isinstance(provenance, Mapping):
        return None
    kind = _KINDS.get(_clean(provenance.get("kind")))
    if kind is None:
        return None
    tool = _clean(provenance.get("sourceTool"))
    source = _clean(provenance.get("sourceSessionKey"))
    if kind == USER:
        return _of_text_alone(text, "provenance")
    if kind == INTER_SESSION and tool.lower() in COMPLETION_TOOLS:
        kind = COMPLETION
    words = envelope.user_words(text) if kind == INTER_SESSION else ""
    return Origin(kind, "provenance", words, source, tool)


def of_text(text: Any, provenance: Any = None) -> Origin:
    """The origin of one message: its provenance when it has one, else what its text says."""
    text = text if isinstance(text, str) else ""
    return of_provenance(provenance, text) or _of_text_alone(text, "text")


def _of_text_alone(text: str, evidence: str) -> Origin:
    if envelope.is_queued(text):
        words = envelope.user_words(text)
        if words and not words.startswith(subagenttask.CONTEXT):
            return Origin(USER, "queued message", words)
    header = envelope.inter_session_header(text)
    if header is not None and header.get("isUser", "").lower() == "false":
        tool = header.get("sourceTool", "")
        source = header.get("sourceSession", "")
        if tool.lower() in COMPLETION_TOOLS:
            return Origin(COMPLETION, "inter-session header", "", source, tool)
        return Origin(INTER_SESSION, "inter-session header", envelope.user_words(text),
                      source, tool)
    words = envelope.user_words(text)
    if words.startswith(subagenttask.CONTEXT):
        if SETTLE_MARKER in words.split("\n\n", 1)[0]:
            return Origin(COMPLETION, "settle wake")
        return Origin(SUBAGENT_TASK, "subagent envelope", subagenttask.task_of(words))
    if not words and envelope.has_completion_event(text):
        return Origin(COMPLETION, "completion event")
    return Origin(USER, evidence, words)


def of_message(message: Any) -> Origin:
    """The origin of a transcript message (its `provenance`, else its text)."""
    if not isinstance(message, Mapping):
        return Origin(USER, "text")
    return of_text(message_text(message), message.get("provenance"))


def of_run(ctx: Mapping[str, Any], text: Optional[str] = None,
           message: Optional[Mapping[str, Any]] = None) -> Origin:
    """The origin of a run, from its hook ctx and its input: the prompt (`text`, at
    `before_prompt_build`) or its last user message (`message`, at `agent_end`)."""
    stated = of_provenance(ctx.get("inputProvenance"), text or "")
    if stated is not None:
        return stated
    run = _clean(ctx.get("runId"))
    if run.startswith(ANNOUNCE_RUN_PREFIX):
        # announce:v1:<child session key>:<child run id>
        body = run[len(ANNOUNCE_RUN_PREFIX):].split(":", 1)[-1]
        return Origin(COMPLETION, "announce run id", "", body.rsplit(":", 1)[0],
                      ANNOUNCE_TOOL)
    if message is not None:
        return of_message(message)
    return of_text(text or "")


def announce_provenance(child_key: str) -> Dict[str, str]:
    """The provenance OpenClaw 2026.9.x gives the requester's run that delivers `child_key`'s
    announce (our gateway passes the same)."""
    return {"kind": "inter_session", "sourceSessionKey": child_key, "sourceChannel": "internal",
            "sourceTool": ANNOUNCE_TOOL}


def role_task(system_prompt: Any) -> str:
    """The task a subagent's system prompt gives it under `## Your Role` ("" when none): where
    OpenClaw 2026.5.x puts it instead of the child's first message."""
    if not isinstance(system_prompt, str):
        return ""
    found = re.search(_ROLE, system_prompt.replace("\r\n", "\n"))
    if found is None:
        return ""
    role = found.group(1)
    fenced = re.search(_ROLE_FENCED, role)
    if fenced is not None:
        return fenced.group(1).strip()
    line = re.search(_ROLE_LINE, role)
    task = line.group(1).strip() if line else ""
    return "" if task == "{{TASK_DESCRIPTION}}" else task


def message_text(msg: Any) -> str:
    """Text of a message: string content, or its `text` blocks joined by newlines."""
    if not isinstance(msg, Mapping):
        return ""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(block["text"] for block in content
                         if isinstance(block, Mapping) and block.get("type") == "text"
                         and isinstance(block.get("text"), str))
    return ""


def last_user(messages: Any) -> Optional[Mapping[str, Any]]:
    """The last message with role user, None when there is none."""
    for msg in reversed(messages if isinstance(messages, list) else []):
        if isinstance(msg, Mapping) and msg.get("role") == "user":
            return msg
    return None


def user_origins(messages: Any) -> List[Origin]:
    """The origin of each user message, in order."""
    return [of_message(msg) for msg in (messages if isinstance(messages, list) else [])
            if isinstance(msg, Mapping) and msg.get("role") == "user"]
