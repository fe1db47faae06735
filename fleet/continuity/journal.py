"""The journal of agent runs: what `agent_end` records besides the checkpoint itself.

Why: one entry point (`record_run`) keeps the original plugin's order (session log + tag index,
daily summary of yesterday, weekly summary on Mondays, archive decay) and its config switches in
one place, and the message helpers here are shared with state extraction.

Deliberately absent: the original plugin's ">500 files in memory/" cleanup, which deleted users'
own notes. The journal never deletes a file it did not write.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional

from fleet.continuity import archive, origin, paths, sessionlog, summary, tagindex
from fleet.continuity.origin import message_text
from fleet.continuity.tokens import estimate_tokens

DEFAULT_DECAY_DAYS = 30
DAILY_BACKFILL_DAYS = 7


class RunRecord:
    """What `record_run` wrote (None / empty when a step was skipped or disabled); filled in
    step by step as the run is journaled."""

    __slots__ = ("session_log", "topic", "tags", "daily", "weekly", "backfilled", "decayed")

    def __init__(self) -> None:
        self.session_log: Optional[Path] = None
        self.topic: Optional[str] = None
        self.tags: List[str] = []
        self.daily: Optional[Path] = None
        self.weekly: Optional[Path] = None
        self.backfilled: List[Path] = []
        self.decayed: List[Path] = []


def user_texts(messages: Iterable[Any]) -> List[str]:
    """What was asked in each user message, non-empty, in order: the user's own words or a
    child's task, OpenClaw's envelopes and metadata taken off. Turns OpenClaw made on its own
    (a child's announce, a message routed from another session) are not the user's and are left
    out (fleet.continuity.origin)."""
    return [found.words for found in origin.user_origins(list(messages or []))
            if found.kind in (origin.USER, origin.SUBAGENT_TASK) and found.words]


def run_tokens(messages: Iterable[Any]) -> int:
    """Token estimate of a run: every message's text joined by spaces (tool results included)."""
    texts = [message_text(msg) for msg in messages or []]
    return estimate_tokens(" ".join(t for t in texts if t))


def _enabled(config: Mapping[str, Any], key: str) -> bool:
    return config.get(key) is not False


def _decay_days(config: Mapping[str, Any]) -> float:
    value = config.get("archiveDecayDays")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return DEFAULT_DECAY_DAYS
    return value


def adopt_legacy_child_journal(child: Path) -> List[Path]:
    """Move a subagent's journal from `<child>/memory/` (where older releases put it, `memory/`
    twice in the path) into `<child>/` itself (`paths.memory_dir`); the moved files' new paths.

    Nothing is lost or overwritten: each file is hard-linked to its new name (which fails if the
    name is taken) before the old name is removed, and a taken name gets a `.moved-N` suffix.
    Emptied old directories are removed; anything that could not move stays where it was.
    """
    child = Path(child)
    old = child / paths.MEMORY_DIR
    if not paths.is_child_dir(child) or old.is_symlink() or not old.is_dir():
        return []
    moved: List[Path] = []
    for here, dirs, files in os.walk(str(old), topdown=False):
        rel = Path(here).relative_to(old)
        for name in sorted(files):
            src = Path(here) / name
            target_dir = child / rel
            target_dir.mkdir(parents=True, exist_ok=True)
            target = target_dir / name
            for n in range(1, 1000):
                try:
                    os.link(str(src), str(target), follow_symlinks=False)
                except FileExistsError:
                    target = target_dir / f"{Path(name).stem}.moved-{n}{Path(name).suffix}"
                    continue
                os.unlink(str(src))
                moved.append(target)
                break
        for name in dirs:
            try:
                os.rmdir(str(Path(here) / name))
            except OSError:
                pass
    try:
        old.rmdir()
    except OSError:
        pass
    return moved


def record_run(
    workspace: Path, messages: List[Dict[str, Any]], config: Optional[Mapping[str, Any]],
    now: Optional[datetime] = None,
) -> RunRecord:
    """Journal one finished agent run in `<workspace>/memory/`.

    Session log entry and tag index (unless `sessionLogging` is false), yesterday's daily summary
    (plus any day of the last week whose log has no summary yet: the original plugin skipped a
    day when no run happened the day after) and, on Mondays, last ISO week's summary (unless
    `summaryEnabled` is false), then archive decay (`archiveDecayDays`, <= 0 disables).
    Nothing happens for an empty run.
    """
    record = RunRecord()
    if not messages:
        return record
    config = config or {}
    workspace = Path(workspace)
    local = archive.local_now(now)
    if _enabled(config, "sessionLogging"):
        users, assistants = sessionlog.count_roles(messages)
        topic = sessionlog.topic_of(user_texts(messages))
        entry = sessionlog.format_entry(local, topic, users, assistants, run_tokens(messages))
        record.session_log = sessionlog.append_entry(workspace, local, entry)
        record.topic = topic
        record.tags = tagindex.update(workspace, topic, local.date())
    if _enabled(config, "summaryEnabled"):
        # Yesterday first (the original plugin's rule), then any recent day a quiet day left
        # unsummarised.
        for back in range(1, DAILY_BACKFILL_DAYS + 1):
            written = summary.write_daily(workspace, local.date() - timedelta(days=back))
            if back == 1:
                record.daily = written
            elif written is not None:
                record.backfilled.append(written)
        record.weekly = summary.write_weekly(workspace, local.date())
    record.decayed = archive.decay_archives(workspace, _decay_days(config), local)
    return record
