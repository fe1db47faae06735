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
  instructions, and from 2026.5.3 the file itself (`BOOTSTRAP.md contents for this bootstrap
  turn:`, `[BEGIN BOOTSTRAP.md]` ... `[END BOOTSTRAP.md]`) and a paragraph "Follow the
  BOOTSTRAP.md instructions above now. ...";
- a timestamp envelope first on the message: `[Fri 2026-12-04 01:15 UTC] ` (what OpenClaw's
  `agent` and `chat.send` add), or a channel's own `[... 2026-12-04 01:15 ...] `;
- the inter-session header of a message routed from another session or tool, a line of its own
  (first, or last from 2026.7.x): `[Inter-session message] sourceSession=<key> sourceChannel=<c>
  sourceTool=<t> isUser=false`, followed by OpenClaw's line "This content was routed by
  OpenClaw from another session or internal tool. ...";
- the line `[Queued user message that arrived while the previous turn was still active]` first
  in a run's input, where OpenClaw put a message that got no run of its own (a user's, or an
  inter-session one) before the run's own input;
- a task completion event in plain text (from 2026.7.x): `A background task completed. ...`, its
  `source:` / `session_key:` / ... lines, the child's result (`Child result ...:` then a
  `<prompt-data>` block, or `<<<BEGIN_UNTRUSTED_CHILD_RESULT>>>` ... on older releases), stats,
  and a closing `Instruction:` (or `Action:`) paragraph; several are separated by `---`.

Which of these make a whole turn OpenClaw's rather than the user's is fleet/continuity/origin.py's
question; this module only takes them off.

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
BOOTSTRAP_FILE_HEAD = "BOOTSTRAP.md contents for this bootstrap turn:"
BOOTSTRAP_FILE_END = "[END BOOTSTRAP.md]"
BOOTSTRAP_FOLLOW = "Follow the BOOTSTRAP.md instructions above now."
INTER_SESSION = "[Inter-session message]"
QUEUED = "[Queued user message that arrived while the previous turn was still active]"
INTER_SESSION_NOTE = "This content was routed by OpenClaw from another session or internal tool."
PLAIN_EVENT = "A background task completed."
_EVENT_CLOSERS = ("Instruction:", "Action:")
_RESULT_BLOCKS = (("<prompt-data>", "</prompt-data>"),
                  ("<<<BEGIN_UNTRUSTED_CHILD_RESULT>>>", LEGACY_RESULT_END))
_HEADER_LINE = re.compile(r"^[ \t]*" + re.escape(INTER_SESSION)
                          + r"((?:[ \t]+[A-Za-z]+=[^ \t\n]*)*)[ \t]*$", re.M)
_STAMP_PREFIX = r"(?:\[[^\]\n]*\d{4}-\d{2}-\d{2} \d{2}:\d{2}[^\]\n]*\][ \t]*)?"
_PLAIN_EVENT_LINE = re.compile(r"^" + _STAMP_PREFIX + re.escape(PLAIN_EVENT) + r"[^\n]*$", re.M)

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
        text = _strip_queued(text)
        text = _TIMESTAMP.sub("", text, count=1).strip()
        text = _strip_metadata(strip_internal_context(text))
        text = _strip_plain_events(_strip_inter_session(text))
        if text == before:
            return text


def inter_session_header(text: str):
    """The fields of a message's inter-session header line (`{"sourceSession": ...,
    "sourceTool": ..., "isUser": "false"}`), None when it has none."""
    found = _HEADER_LINE.search(text or "")
    if found is None:
        return None
    fields = {}
    for pair in found.group(1).split():
        key, _, value = pair.partition("=")
        fields.setdefault(key, value)
    return fields


def has_completion_event(text: str) -> bool:
    """Whether `text` holds a task completion event in either form (the runtime-context
    `[Internal task completion event]`, or a plain `A background task completed.` line)."""
    return isinstance(text, str) and (LEGACY_EVENT in text
                                      or _PLAIN_EVENT_LINE.search(text) is not None)


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
    """Without a leading `[Bootstrap pending]` paragraph, and the BOOTSTRAP.md contents and the
    "Follow ..." paragraph that may come after it."""
    if not text.startswith(BOOTSTRAP + "\n") and text != BOOTSTRAP:
        return text
    cut = text.find("\n\n")
    text = "" if cut == -1 else text[cut + 2:]
    if text.startswith(BOOTSTRAP_FILE_HEAD):
        end = _marker_at(text, BOOTSTRAP_FILE_END, 0)
        text = "" if end == -1 else text[end + len(BOOTSTRAP_FILE_END):].lstrip()
    if text.startswith(BOOTSTRAP_FOLLOW):
        cut = text.find("\n\n")
        text = "" if cut == -1 else text[cut + 2:]
    return text


def is_queued(text: str) -> bool:
    """Whether `text` starts with OpenClaw's queued-message line: a message that had no run of
    its own, put before the run's own input."""
    return isinstance(text, str) and text.lstrip().startswith(QUEUED + "\n")


def _strip_queued(text: str) -> str:
    """Without a leading queued-message line (the message after it stays)."""
    return text[len(QUEUED):].lstrip() if is_queued(text) else text


def _join(before: str, after: str) -> str:
    before, after = before.rstrip(), after.lstrip()
    return f"{before}\n\n{after}" if before and after else before + after


def _strip_inter_session(text: str) -> str:
    """Without the inter-session header lines (and OpenClaw's explanation after each)."""
    while True:
        found = _HEADER_LINE.search(text)
        if found is None:
            return text
        end = found.end()
        rest = text[end:].lstrip("\n")
        if rest.startswith(INTER_SESSION_NOTE):
            cut = rest.find("\n")
            rest = "" if cut == -1 else rest[cut + 1:]
        text = _join(text[:found.start()], rest)


def _strip_plain_events(text: str) -> str:
    """Without plain task completion events (`A background task completed.` ... its closing
    `Instruction:` paragraph), and the `---` lines between several."""
    while True:
        found = _PLAIN_EVENT_LINE.search(text)
        if found is None:
            return text
        end = _plain_event_end(text, found.end())
        rest = text[end:].lstrip()
        while rest.startswith("---\n") or rest == "---":
            rest = rest[3:].lstrip()
        text = _join(text[:found.start()], rest)


def _plain_event_end(text: str, start: int) -> int:
    """Where the event that starts before `start` ends: after the paragraph that follows its
    `Instruction:` / `Action:` line, past its result block (the child's text is data and may
    hold anything); the end of the text when it has no such line."""
    cursor = start
    for opener, closer in _RESULT_BLOCKS:
        head = text.find(opener, start)
        if head != -1:
            tail = text.find(closer, head + len(opener))
            cursor = max(cursor, len(text) if tail == -1 else tail + len(closer))
    closer_at = -1
    for word in _EVENT_CLOSERS:
        found = re.compile(r"^" + re.escape(word) + r"[ \t]*$", re.M).search(text, cursor)
        if found is not None and (closer_at == -1 or found.start() < closer_at):
            closer_at = found.start()
    if closer_at == -1:
        return len(text)
    body = text.find("\n", closer_at)
    if body == -1:
        return len(text)
    cut = text.find("\n\n", body + 1)
    return len(text) if cut == -1 else cut
