"""What OpenClaw wraps around the words a user typed, and the words inside.

A user message reaches the plugins with OpenClaw's additions around it. A checkpoint's objective,
a session's topic, a tag must carry the user's words, not these. The forms, as OpenClaw
2026.4.24 and 2026.9.6 write them (their built code in the `openclaw` npm package):

- channel metadata: a `Conversation info (untrusted metadata):` or `Sender (untrusted
  metadata):` block, a fenced JSON block after the label or, unfenced, up to the first blank
  line (Telegram, Discord, ...);
- runtime context OpenClaw gives the model: `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>` ...
  `<<<END_OPENCLAW_INTERNAL_CONTEXT>>>`, each marker on a line of its own, blocks nested, one
  left open running to the end of the text; and its older form, a paragraph headed `OpenClaw
  runtime context (internal):` around `[Internal task completion event]` entries;
- a workspace whose BOOTSTRAP.md is pending: a first paragraph `[Bootstrap pending]` plus its
  instructions;
- a timestamp envelope first on the message: `[Fri 2026-12-04 01:15 UTC] ` (what OpenClaw's
  `agent` and `chat.send` add), or a channel's own `[... 2026-12-04 01:15 ...] `.

A subagent's `[Subagent Context]` envelope around its task is fleet/continuity/subagenttask.py's.
Standard library only.
"""

from __future__ import annotations

import re

BEGIN = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"
END = "<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"
LEGACY_HEADER = ("OpenClaw runtime context (internal):\nThis context is runtime-generated, not "
                 "user-authored. Keep internal details private.\n\n")
LEGACY_EVENT = "[Internal task completion event]"
LEGACY_RESULT_END = "<<<END_UNTRUSTED_CHILD_RESULT>>>"
LEGACY_SEPARATOR = "\n\n---\n\n"
BOOTSTRAP = "[Bootstrap pending]"

_META_LABELS = (r"Conversation info \(untrusted metadata\):", r"Sender \(untrusted metadata\):")
_FENCED_META = [re.compile("^" + label + r"[ \t]*\n```[^\n]*\n[\s\S]*?^```[ \t]*(?:\n|$)\n?",
                           re.M) for label in _META_LABELS]
_PLAIN_META = [re.compile("^" + label + r"[\s\S]*?\n\n", re.M) for label in _META_LABELS]
_TIMESTAMP = re.compile(r"\A\[[^\]\n]*\d{4}-\d{2}-\d{2} \d{2}:\d{2}[^\]\n]*\][ \t]*\n?")


def user_words(text: str) -> str:
    """`text` without OpenClaw's additions (see the module doc), trimmed.

    The additions nest in either order (2026.4.24 puts the timestamp before an internal
    context marker on the same line, a bootstrap paragraph before the timestamp), so each is
    taken off the front in turn until none is left."""
    text = (text or "").replace("\r\n", "\n").strip()
    while True:
        before = text
        text = _strip_bootstrap(text)
        text = _TIMESTAMP.sub("", text, count=1).strip()
        text = _strip_metadata(strip_internal_context(text))
        if text == before:
            return text


def is_completion_report(text: str) -> bool:
    """True for a message that only reports finished background tasks: it holds an
    `[Internal task completion event]` and no words of the user's. (OpenClaw 2026.4.x delivers a
    child's announce so, without telling plugins the run's provenance.)"""
    return isinstance(text, str) and LEGACY_EVENT in text and not user_words(text)


def _strip_metadata(text: str) -> str:
    """Without the channel metadata blocks (the first of each kind), trimmed."""
    for fenced, plain in zip(_FENCED_META, _PLAIN_META):
        stripped = fenced.sub("", text, count=1)
        text = stripped if stripped != text else plain.sub("", text, count=1)
    return text.strip()


def _marker_at(text: str, marker: str, start: int) -> int:
    """Index of `marker` alone on its line at or after `start`, -1 if none."""
    for found in re.finditer("(?:^|\n)" + re.escape(marker) + "(?=\n|$)", text[start:]):
        return start + found.end() - len(marker)
    return -1


def strip_internal_context(text: str) -> str:
    """Without OpenClaw's internal runtime context blocks (both forms)."""
    while True:
        start = _marker_at(text, BEGIN, 0)
        if start == -1:
            break
        cursor, depth, finish = start + len(BEGIN), 1, -1
        while depth:
            nested, end = _marker_at(text, BEGIN, cursor), _marker_at(text, END, cursor)
            if end == -1:
                break
            if nested != -1 and nested < end:
                depth, cursor = depth + 1, nested + len(BEGIN)
                continue
            depth, finish, cursor = depth - 1, end, end + len(END)
        before = text[:start].rstrip()
        if depth:  # never closed: the rest is context too
            text = before
            break
        after = text[finish + len(END):].lstrip()
        text = f"{before}\n\n{after}" if before and after else before + after
    return _strip_legacy_context(text)


def _strip_legacy_context(text: str) -> str:
    searched = 0
    while True:
        head = text.find(LEGACY_HEADER, searched)
        if head == -1:
            return text
        event = head + len(LEGACY_HEADER)
        if not text.startswith(LEGACY_EVENT, event):
            searched = event
            continue
        end = _legacy_event_end(text, event)
        while text.startswith(LEGACY_SEPARATOR + LEGACY_EVENT, end):
            end = _legacy_event_end(text, end + len(LEGACY_SEPARATOR))
        before, after = text[:head].rstrip(), text[end:].lstrip()
        text = f"{before}\n\n{after}" if before and after else before + after
        searched = max(0, len(before) - 1)


def _legacy_event_end(text: str, start: int) -> int:
    """Where one `[Internal task completion event]` ends: after its `Action:` paragraph (or,
    when it lacks the usual parts, at the next blank line)."""
    result_end = text.find(LEGACY_RESULT_END, start)
    action = text.find("\n\nAction:\n", result_end) if result_end != -1 else -1
    if action == -1:
        cut = text.find("\n\n", start + len(LEGACY_EVENT))
        return len(text) if cut == -1 else cut
    following = text.find(LEGACY_SEPARATOR + LEGACY_EVENT, action + 10)
    if following != -1:
        return following
    cut = text.find("\n\n", action + 10)
    return len(text) if cut == -1 else cut


def _strip_bootstrap(text: str) -> str:
    """Without a leading `[Bootstrap pending]` paragraph."""
    if not text.startswith(BOOTSTRAP + "\n") and text != BOOTSTRAP:
        return text
    cut = text.find("\n\n")
    return "" if cut == -1 else text[cut + 2:]
