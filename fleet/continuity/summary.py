"""Daily and weekly summaries (`memory/summaries/{daily,weekly}/`) built from the session logs.

Why: summaries are what related-history injection and `/mc summary`/`recall` read; they are
written once (never rewritten) for a finished day or ISO week.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from pathlib import Path
from typing import Callable, List, Optional

from fleet.continuity import sessionlog, store
from fleet.continuity.paths import memory_dir

SUMMARIES_DIR = "summaries"
WEEKLY_TOPICS_MAX = 20

_DAILY_NAME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}\.md$")
_WEEKLY_NAME_RE = re.compile(r"^\d{4}-W\d{2}\.md$")
_SESSIONS_RE = re.compile(r"^\*\*(?:Total sessions|Sessions):\*\*\s*(\d+)", re.M)


def daily_dir(workspace: Path) -> Path:
    """`<workspace>/memory/summaries/daily`."""
    return memory_dir(workspace) / SUMMARIES_DIR / "daily"


def weekly_dir(workspace: Path) -> Path:
    """`<workspace>/memory/summaries/weekly`."""
    return memory_dir(workspace) / SUMMARIES_DIR / "weekly"


def week_label(day: date) -> str:
    """ISO week label `YYYY-Www` of `day` (ISO year, so 2024-12-30 is `2025-W01`)."""
    iso = day.isocalendar()
    return f"{iso[0]:04d}-W{iso[1]:02d}"


def _list(directory: Path, pattern: re.Pattern[str]) -> List[Path]:
    try:
        found = [p for p in directory.iterdir() if pattern.match(p.name) and p.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(found, key=lambda p: p.name, reverse=True)


def list_daily(workspace: Path) -> List[Path]:
    """Daily summary files, newest first."""
    return _list(daily_dir(workspace), _DAILY_NAME_RE)


def list_weekly(workspace: Path) -> List[Path]:
    """Weekly summary files, newest first."""
    return _list(weekly_dir(workspace), _WEEKLY_NAME_RE)


def session_count(text: str) -> int:
    """The `**Sessions:**` / `**Total sessions:**` number of a summary (0 if absent)."""
    m = _SESSIONS_RE.search(text or "")
    return int(m.group(1)) if m else 0


def _topics(entries: List[sessionlog.SessionEntry]) -> List[str]:
    return [e.topic for e in entries if e.topic and e.topic != sessionlog.NO_TOPIC]


def render_daily(day: date, entries: List[sessionlog.SessionEntry]) -> str:
    """The daily summary text of `day` (sessions = real entries, not the file header)."""
    users = sum(e.users for e in entries)
    assistants = sum(e.assistants for e in entries)
    tokens = sum(e.tokens for e in entries)
    lines = [
        f"# Daily Summary \u2014 {day.isoformat()}",
        "",
        f"**Sessions:** {len(entries)}",
        f"**Messages:** {users} user / {assistants} assistant",
        f"**Est. tokens:** ~{tokens}",
        "",
        "## Topics",
    ]
    lines += [f"{i}. {topic}" for i, topic in enumerate(_topics(entries), 1)]
    return "\n".join(lines) + "\n\n"


def write_daily(workspace: Path, day: date) -> Optional[Path]:
    """Write the summary of `day` if its session log exists and the summary does not."""
    log = sessionlog.log_path(workspace, day)
    target = daily_dir(workspace) / f"{day.isoformat()}.md"
    if target.exists() or not log.is_file():
        return None
    entries = sessionlog.read_entries(log)
    return _write_once(target, lambda: render_daily(day, entries))


def render_weekly(monday: date, per_day: List[List[sessionlog.SessionEntry]]) -> str:
    """The weekly summary of the ISO week starting at `monday` (one entry list per day)."""
    entries = [e for day in per_day for e in day]
    seen = set()
    topics = []
    for topic in _topics(entries):
        key = topic.lower()[:50]
        if key in seen:
            continue
        seen.add(key)
        topics.append(topic)
    topics = topics[:WEEKLY_TOPICS_MAX]
    sunday = monday + timedelta(days=6)
    lines = [
        f"# Weekly Summary \u2014 {week_label(monday)}",
        f"> {monday.isoformat()} to {sunday.isoformat()}",
        "",
        f"**Active days:** {sum(1 for day in per_day if day)}/7",
        f"**Total sessions:** {len(entries)}",
        f"**Total messages:** {sum(e.users for e in entries)} user / "
        f"{sum(e.assistants for e in entries)} assistant",
        f"**Est. total tokens:** ~{sum(e.tokens for e in entries)}",
        "",
        "## Key Topics",
    ]
    lines += [f"- {topic}" for topic in topics]
    return "\n".join(lines) + "\n\n"


def write_weekly(workspace: Path, today: date) -> Optional[Path]:
    """On a Monday, summarise the previous ISO week (Mon-Sun) once, if it had sessions."""
    if today.weekday() != 0:
        return None
    monday = today - timedelta(days=7)
    target = weekly_dir(workspace) / f"{week_label(monday)}.md"
    if target.exists():
        return None
    per_day = [
        sessionlog.read_entries(sessionlog.log_path(workspace, monday + timedelta(days=i)))
        for i in range(7)
    ]
    if not any(per_day):
        return None
    return _write_once(target, lambda: render_weekly(monday, per_day))


def _write_once(target: Path, render: Callable[[], str]) -> Optional[Path]:
    """Write a summary unless it exists: summaries are never rewritten, and two runs ending
    together must not both write it (checked again under the lock)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with store.locked(target):
        if target.exists():
            return None
        store.atomic_write(target, render())
    return target
