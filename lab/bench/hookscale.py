"""(§4 of round 2) Continuity at the scale of a long-lived agent, in process (gateway hook bus).

- `before_prompt_build` for the main agent whose workspace holds 10,000 archived states
  (`memory/session_archive/`) and about 5 MB of history (a year of session logs and daily
  summaries), in two shapes: spread over the year (the usual case), and the same year with
  yesterday's session log alone grown to ~1 MB (a day of many short sessions). Before each call
  today's log is rewritten with a full day's entries, as each run's `agent_end` rewrites it
  (so the history cache never serves it). p50 and p99.
- 1,000 children of one parent ending within one second: child i fires `subagent_ended` at
  i/1000 s (as 1,000 `subagent.end` requests arriving over a second would); total time from the
  first end until every end has returned, and markers missing from the parent's state and its
  archive.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from fleet.continuity import history as history_mod
from fleet.continuity import sessionlog, store, summary
from lab.bench import hooks
from lab.bench.report import Section

ARCHIVES = 10_000
HISTORY_BYTES = 5 * 1024 * 1024
BIG_DAY_BYTES = 1024 * 1024
CHILDREN = 1000
SPREAD_S = 1.0


def day_log(day: datetime, sessions: int, salt: int) -> str:
    """One day's session log of `sessions` entries (the original plugin's format)."""
    parts = [sessionlog.header(day.date())]
    for i in range(sessions):
        when = day + timedelta(minutes=(i * 7) % 720)
        topic = f"{hooks.TOPICS[(salt + i) % len(hooks.TOPICS)]} (session {i})"
        parts.append(sessionlog.format_entry(when, topic, 3 + i % 9, 3 + i % 9, 900 + i))
    return "".join(parts)


def _day_bytes(day: datetime, sessions: int, with_summary: bool) -> int:
    text = day_log(day, sessions, 0)
    size = len(text.encode())
    if with_summary:
        entries = sessionlog.parse_entries(text)
        size += len(summary.render_daily(day.date(), entries).encode())
    return size


def sessions_for(target_bytes: int, days: int, with_summary: bool = True) -> int:
    """Entries per day so `days` days of logs (and their daily summaries) come to about
    `target_bytes`."""
    probe = datetime(2026, 1, 1, 9, tzinfo=timezone.utc)
    fixed = _day_bytes(probe, 0, with_summary)
    per_entry = (_day_bytes(probe, 100, with_summary) - fixed) / 100
    return max(1, round((target_bytes / days - fixed) / per_entry))


def write_history(workspace: Path, total_bytes: int = HISTORY_BYTES, days: int = 365,
                  today: datetime | None = None) -> int:
    """About `total_bytes` of session logs over `days` days, plus each day's summary; returns
    the bytes written (logs and summaries). Files are written whole (not entry by entry through
    the locked append, which would take minutes for 5 MB)."""
    today = today or datetime.now(timezone.utc)
    per_day = sessions_for(total_bytes, days)
    logs = sessionlog.sessions_dir(workspace)
    logs.mkdir(parents=True, exist_ok=True)
    written = 0
    for back in range(days, 0, -1):
        day = (today - timedelta(days=back)).replace(hour=9, minute=0, second=0, microsecond=0)
        data = day_log(day, per_day, back).encode()
        sessionlog.log_path(workspace, day.date()).write_bytes(data)
        written += len(data)
        target = summary.write_daily(workspace, day.date())
        written += target.stat().st_size if target else 0
    return written


def grow_day(workspace: Path, day: datetime, size: int = BIG_DAY_BYTES) -> int:
    """Replace `day`'s session log with one of about `size` bytes; returns its size."""
    day = day.replace(hour=9, minute=0, second=0, microsecond=0)
    data = day_log(day, sessions_for(size, 1, with_summary=False), 7).encode()
    sessionlog.log_path(workspace, day.date()).write_bytes(data)
    return len(data)


def write_archives(workspace: Path, count: int = ARCHIVES) -> None:
    """`count` archived states named as `archive.archive_state` names them (one per minute)."""
    directory = workspace / "memory" / "session_archive"
    directory.mkdir(parents=True, exist_ok=True)
    start = datetime(2025, 1, 1, 8, 0)
    body = (workspace / "memory" / "CURRENT_STATE.md").read_text(encoding="utf-8")
    for i in range(count):
        name = (start + timedelta(minutes=i)).strftime("%Y-%m-%d_%H-%M") + ".md"
        (directory / name).write_text(body, encoding="utf-8")


def _prompt_calls(sec: Section, label: str, gateway, ctx: dict, calls: int,
                  per_day: int) -> None:
    """Time `calls` hook calls. Before each (untimed) today's log is replaced by a full day of
    `per_day` entries, different from the last one, as each run's `agent_end` rewrites it: the
    newest log is never the one the last call read."""
    event = {"prompt": "continue", "messages": []}
    merged, errors = gateway.hooks.run_modifying("before_prompt_build", event, ctx)
    text = merged.get("prependSystemContext") or ""
    if errors or "RELATED HISTORY" not in text:
        raise RuntimeError(f"before_prompt_build gave no related history: {errors} {text[:200]}")
    workspace = Path(ctx["workspaceDir"])
    today = datetime.now(timezone.utc).replace(hour=9, minute=0, second=0, microsecond=0)
    log_file = sessionlog.log_path(workspace, today.date())
    for i in range(calls):
        store.atomic_write(log_file, day_log(today, per_day, i))
        t = time.perf_counter()
        gateway.hooks.run_modifying("before_prompt_build", event, ctx)
        sec.add(label, time.perf_counter() - t)


def bench(workdir: Path, calls: int = 1000, reps: int = 3, log=print) -> Section:
    sec = Section("hookscale", "§4 continuity at scale (gateway hook bus, in process)")
    gateway, workspace = hooks.fresh_gateway(workdir, "hookscale")
    hooks._state(workspace / "memory" / "CURRENT_STATE.md", hooks.OBJECTIVE)
    t0 = time.perf_counter()
    today = datetime.now(timezone.utc)
    history = write_history(workspace, today=today)
    write_archives(workspace)
    log(f"  hookscale: wrote {history / 1e6:.1f} MB of history and {ARCHIVES} archives in "
        f"{time.perf_counter() - t0:.1f} s")
    sec.figures["workspace"] = (
        f"{len(list((workspace / 'memory' / 'session_archive').iterdir()))} archived states, "
        f"{history / 1e6:.2f} MB history in "
        f"{len(list(sessionlog.sessions_dir(workspace).glob('*.md')))} session logs + daily "
        "summaries")
    ctx = {"agentId": "main", "sessionKey": "agent:main:main", "sessionId": "s-bench",
           "workspaceDir": str(workspace), "trigger": "user"}
    spread = "before_prompt_build, 5 MB over a year"
    big = "before_prompt_build, 1 MB yesterday"
    per_day = sessions_for(HISTORY_BYTES, 365)
    _prompt_calls(sec, spread, gateway, ctx, calls, per_day)
    uncached = "before_prompt_build, 5 MB, no file cache (as before)"
    keep, history_mod.CACHE_MAX = history_mod.CACHE_MAX, 0
    try:
        _prompt_calls(sec, uncached, gateway, ctx, max(20, calls // 5), per_day)
    finally:
        history_mod.CACHE_MAX = keep
    sec.figures["5 MB: cached / uncached p50"] = sec.ratio(spread, uncached)
    big_day = grow_day(workspace, today - timedelta(days=1))
    sec.figures["yesterday's session log (big-day shape)"] = f"{big_day} bytes"
    _prompt_calls(sec, big, gateway, ctx, calls, per_day)
    for label in (spread, big):
        s = sec.summary(label)
        sec.goal(f"{label}: p50", s["median"], 0.005, "s")
        sec.goal(f"{label}: p99", s.get("p99"), 0.020, "s")
        log(f"  hookscale: {label}: p50 {s['median'] * 1000:.2f} ms, p99 "
            f"{s.get('p99', 0) * 1000:.2f} ms")

    lost_total = 0
    name = f"{CHILDREN} children end within {SPREAD_S:g} s"
    for rep in range(reps):
        total, lost = hooks.children_end(gateway, workspace, CHILDREN, SPREAD_S)
        sec.add(name, total)
        lost_total += lost
        log(f"  hookscale rep {rep + 1}: {name}: {total:.2f} s, {lost} notes lost")
    sec.figures[f"notes lost ({CHILDREN} children, all reps)"] = lost_total
    sec.goal(f"{CHILDREN} children: total time (median)", sec.summary(name)["median"], 2.0, "s")
    sec.goal(f"{CHILDREN} children: notes lost", float(lost_total), 0.0)
    return sec
