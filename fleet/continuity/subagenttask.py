"""The envelope OpenClaw puts around a subagent's task, and the task inside it.

A `sessions_spawn` child's first user message is not the task as the parent wrote it:
OpenClaw 2026.9.6 wraps it (`buildSubagentTaskMessage`) as

    [Subagent Context] You are running as a subagent (depth D/M). Complete the current ...
    [Subagent Context] This subagent session is persistent ...      (mode "session" only)
    [Subagent Task]
    <the task>
    Begin. Execute the assigned task to completion.

(paragraphs separated by a blank line). OpenClaw 2026.4.24 writes the last part on one line,
`[Subagent Task]: <the task>`, with no closing paragraph. The child's checkpoint and the note its
parent gets must
name the task, not the wrapper: `unwrap` takes it out, and gives any other text back as it is.
Our gateway wraps a child's task the same way (`wrap`).
"""

from __future__ import annotations

import re

CONTEXT = "[Subagent Context]"
TASK = "[Subagent Task]"
BEGIN = "Begin. Execute the assigned task to completion."
PERSISTENT_NOTE = ("This subagent session is persistent and remains available for thread "
                   "follow-up messages.")
MAX_DEPTH = 5

_TASK_LINE_RE = re.compile(r"^[ \t]*" + re.escape(TASK) + r"(?:[ \t]*$|:[ \t]*)", re.M)
_BEGIN_TAIL_RE = re.compile(r"\n[ \t]*\n[ \t]*" + re.escape(BEGIN) + r"\s*$")


def wrap(task: str, depth: int = 1, max_depth: int = MAX_DEPTH, persistent: bool = False) -> str:
    """The child's first message for `task`, as OpenClaw builds it."""
    parts = [f"{CONTEXT} You are running as a subagent (depth {depth}/{max_depth}). Complete the "
             f"current {TASK}; inherited conversation is background context, not your "
             "assignment."]
    if persistent:
        parts.append(f"{CONTEXT} {PERSISTENT_NOTE}")
    parts += [TASK, task.strip(), BEGIN]
    return "\n\n".join(parts)


def task_of(text: str) -> str:
    """The task inside an envelope; "" when `text` is not one or the envelope holds no task
    (OpenClaw 2026.5.x keeps the task in the child's system prompt and says so: "Your assigned
    task is in the system prompt under **Your Role**"; fleet.continuity.origin.role_task reads
    it there).

    Only a message that starts with `[Subagent Context]` counts, and the task is what follows
    the first `[Subagent Task]` line (or `[Subagent Task]:` on it), without the closing "Begin."
    paragraph; the task's own text may contain anything, even those markers.
    """
    if not isinstance(text, str) or not text.lstrip().startswith(CONTEXT):
        return ""
    found = _TASK_LINE_RE.search(text)
    if found is None:
        return ""
    return _BEGIN_TAIL_RE.sub("", text[found.end():]).strip()


def unwrap(text: str) -> str:
    """The task inside an envelope (`task_of`); `text` unchanged when there is none."""
    return task_of(text) or text
