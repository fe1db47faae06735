"""Per-day session logs (`memory/sessions/YYYY-MM-DD.md`): one entry per agent run.

Why: the log is the raw material of the daily/weekly summaries, the tag index, related-history
injection and `/mc sessions`/`recall`, so writing and reading its format live together here.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from pathlib import Path
from typing import Any, Iterable, List, NamedTuple, Tuple

from fleet.continuity import store
from fleet.continuity.paths import memory_dir

SESSIONS_DIR = "sessions"
TOPIC_MAX = 120
NO_TOPIC = "(no topic)"

_DATE_FILE_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.md$")
_ENTRY_SPLIT_RE = re.compile(r"^### ", re.M)
_TOPIC_RE = re.compile(r"^- \*\*Topic:\*\*[ \t]*(.*)$", re.M)
_MESSAGES_RE = re.compile(r"^- \*\*Messages:\*\*\s*(\d+) user / (\d+) assistant", re.M)
_TOKENS_RE = re.compile(r"^- \*\*Est\. tokens:\*\*\s*~(\d+)", re.M)
_TIME_RE = re.compile(r"^(\d{2}:\d{2})")


class SessionEntry(NamedTuple):
    """One `### HH:MM` entry of a session log."""

    time: str
    topic: str
    users: int
    assistants: int
    tokens: int
    text: str


def sessions_dir(workspace: Path) -> Path:
    """`<workspace>/memory/sessions`."""
    return memory_dir(workspace) / SESSIONS_DIR


def log_path(workspace: Path, day: date) -> Path:
    """The session log file of `day`."""
    return sessions_dir(workspace) / f"{day.isoformat()}.md"


def list_logs(workspace: Path) -> List[Path]:
    """Session log files (named by a date), newest first."""
    directory = sessions_dir(workspace)
    try:
        names = [p for p in directory.iterdir() if _DATE_FILE_RE.match(p.name) and p.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(names, key=lambda p: p.name, reverse=True)


def parse_entries(text: str) -> List[SessionEntry]:
    """The `### ` entries of a log text (the file header is not an entry)."""
    entries = []
    chunks = _ENTRY_SPLIT_RE.split(text)
    for chunk in chunks[1:]:
        time_m = _TIME_RE.match(chunk)
        topic_m = _TOPIC_RE.search(chunk)
        msg_m = _MESSAGES_RE.search(chunk)
        tok_m = _TOKENS_RE.search(chunk)
        entries.append(SessionEntry(
            time=time_m.group(1) if time_m else "",
            topic=topic_m.group(1).strip() if topic_m else "",
            users=int(msg_m.group(1)) if msg_m else 0,
            assistants=int(msg_m.group(2)) if msg_m else 0,
            tokens=int(tok_m.group(1)) if tok_m else 0,
            text="### " + chunk,
        ))
    return entries


def read_entries(path: Path) -> List[SessionEntry]:
    """Entries of one log file ([] when missing)."""
    text = store.read_text(path)
    return parse_entries(text) if text else []


def topic_of(user_texts: Iterable[str]) -> str:
    """First cleaned user text longer than 10 chars: its first line, at most 120 chars."""
    for text in user_texts:
        cleaned = text.strip()
        if len(cleaned) > 10:
            first = cleaned.split("\n", 1)[0].strip()
            return first[:TOPIC_MAX] or NO_TOPIC
    return NO_TOPIC


def format_entry(now: datetime, topic: str, users: int, assistants: int, tokens: int) -> str:
    """One entry exactly as the original plugin writes it (with its trailing blank line)."""
    return (
        f"### {now.strftime('%H:%M')}\n"
        f"- **Topic:** {topic}\n"
        f"- **Messages:** {users} user / {assistants} assistant\n"
        f"- **Est. tokens:** ~{tokens}\n"
        "\n"
    )


def header(day: date) -> str:
    """First lines of a new log file."""
    return f"# Session Log \u2014 {day.isoformat()}\n\n"


def append_entry(workspace: Path, now: datetime, entry: str) -> Path:
    """Append `entry` to the log of `now`'s day under the file lock (atomic rewrite)."""
    path = log_path(workspace, now.date())
    path.parent.mkdir(parents=True, exist_ok=True)
    with store.locked(path):
        old = store.read_text(path)
        if not old:
            old = header(now.date())
        elif not old.endswith("\n"):
            old += "\n"
        store.atomic_write(path, old + entry)
    return path


def count_roles(messages: Iterable[Any]) -> Tuple[int, int]:
    """(user, assistant) message counts."""
    users = assistants = 0
    for msg in messages:
        role = msg.get("role") if isinstance(msg, dict) else None
        if role == "user":
            users += 1
        elif role == "assistant":
            assistants += 1
    return users, assistants
