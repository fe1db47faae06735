"""What an agent run leaves behind: the auto-extracted state and the protected tail.

Guards against the original plugin's "recovery death spiral" (a model that ignored the injected
state answered "I don't remember", and that run overwrote the checkpoint): a run checkpoints only
when it has at least one real user message of substance, and never from a poisoned exchange
(login/auth errors), so a trivial or broken run cannot overwrite a meaningful checkpoint. A
subagent's user message is its task, given by its parent: it counts whatever its length (`run
tests` is a task, not chatter), so a child with a short task still leaves the state its parent
recovers.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, List, Mapping, Optional

from fleet.continuity import origin
from fleet.continuity.document import StateDocument
from fleet.continuity.pattern import PatternError, SafePattern, compile_pattern
from fleet.continuity.tokens import truncate_tokens

OBJECTIVE_BUDGET = 300
UNSURFACED_BUDGET = 500
TAIL_BUDGET = 150
MAX_PATTERN_LENGTH = 100

POISON_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"not logged in",
        r"please run /login",
        r"unknown skill",
        r"session expired",
        r"auth.*failed",
        r"error.*timeout",
    )
)


def is_poisoned(text: str) -> bool:
    return any(p.search(text or "") for p in POISON_PATTERNS)


def compile_ignore_patterns(
    patterns: Iterable[Any], warn: Callable[[str], None]
) -> List[SafePattern]:
    """Case-insensitive patterns in the safe (linear-time) language of `fleet.continuity.pattern`;
    too long, invalid or unsupported ones are skipped with a warning saying why."""
    out = []
    for pattern in patterns or []:
        if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_LENGTH:
            warn(f"ignorePatterns: skipping {pattern!r:.60} (not a string of <= 100 characters)")
            continue
        try:
            out.append(compile_pattern(pattern))
        except PatternError as exc:
            warn(f"ignorePatterns: skipping {exc}")
    return out


def assistant_texts(messages: Iterable[Any]) -> List[str]:
    """Text blocks of assistant messages (tool calls and results ignored), non-empty, in order."""
    out = []
    for msg in messages or []:
        if isinstance(msg, Mapping) and msg.get("role") == "assistant":
            text = origin.message_text(msg).strip()
            if text:
                out.append(text)
    return out


def task_texts(messages: Iterable[Any], subagent: bool = False, role_task: str = "") -> List[str]:
    """The user messages a checkpoint may take its objective from (fleet.continuity.origin says
    whose each is): the user's words of substance; for a subagent session every non-empty task
    it was given, whatever its length (the task itself, not the `[Subagent Context]` envelope
    OpenClaw puts around it; `role_task` where the envelope holds none), and messages routed to
    it from another session (its requester's follow-ups). OpenClaw's own turns never count."""
    found = origin.user_origins(list(messages or []))
    if not subagent:
        return [o.words for o in found if o.kind == origin.USER and len(o.words) > 10]
    texts = [o.words or role_task if o.kind == origin.SUBAGENT_TASK else o.words
             for o in found if o.kind in (origin.USER, origin.SUBAGENT_TASK, origin.INTER_SESSION)]
    return [text for text in texts if text]


def extract_state(messages: List[Any], now_iso: str, subagent: bool = False,
                  role_task: str = "") -> Optional[str]:
    """The new CURRENT_STATE.md text for a finished run, or None when the run must not checkpoint.

    Objective = last real user message (<= 300 tokens; for a subagent its last user message of
    any length), Current Step = message count, Unsurfaced Results = last assistant text (<= 500
    tokens), as the original plugin extracts them.
    """
    real = task_texts(messages, subagent, role_task)
    if not real:
        return None
    users = [o.words for o in origin.user_origins(messages) if o.words]
    assistants = assistant_texts(messages)
    last_assistant = assistants[-1] if assistants else ""
    if last_assistant and is_poisoned(last_assistant):
        return None
    if not last_assistant and users and is_poisoned(users[-1]):
        return None
    doc = StateDocument.new(now_iso)
    doc.set("Objective", truncate_tokens(real[-1], OBJECTIVE_BUDGET))
    doc.set("Current Step", f"Conversation ended after {len(messages)} messages")
    doc.set("Key Decisions", "- Auto-extracted from conversation")
    doc.set("Next Action", "Continue from where we left off")
    doc.set("Blockers", "None")
    unsurfaced = truncate_tokens(last_assistant, UNSURFACED_BUDGET) if last_assistant else "None"
    doc.set("Unsurfaced Results", unsurfaced)
    return doc.render()


def protected_tail(messages: List[Any], count: int) -> Optional[str]:
    """The last `count` substantial user/assistant pairs (the original plugin's
    `extractTailMessages`)."""
    if count <= 0 or not messages:
        return None
    pairs = []
    i = len(messages) - 1
    while i >= 0 and len(pairs) < count:
        msg = messages[i]
        if not (isinstance(msg, Mapping) and msg.get("role") == "assistant"):
            i -= 1
            continue
        assistant = origin.message_text(msg)
        j = i - 1
        while j >= 0 and not (
            isinstance(messages[j], Mapping) and messages[j].get("role") == "user"
        ):
            j -= 1
        if j < 0:
            break
        user = origin.message_text(messages[j])
        if not (len(user) < 10 and len(assistant) < 20):
            pairs.append(
                (truncate_tokens(user, TAIL_BUDGET), truncate_tokens(assistant, TAIL_BUDGET))
            )
        i = j - 1
    if not pairs:
        return None
    lines = ["=== RECENT EXCHANGE (protected) ==="]
    for user, assistant in reversed(pairs):
        lines.extend([f"User: {user}", f"Assistant: {assistant}", "---"])
    lines.append("=== END RECENT EXCHANGE ===")
    return "\n".join(lines)
