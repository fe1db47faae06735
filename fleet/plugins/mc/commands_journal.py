"""`/mc sessions [agent] [date]`, `tags [agent]`, `summary [daily|weekly] [date] [agent]`.

Why together: each lists or prints the journal files `fleet.continuity` writes (session logs, tag
index, summaries), using the same readers that wrote them.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from fleet.continuity import sessionlog, store, summary, tagindex
from fleet.plugins.mc.agents import Agents
from fleet.plugins.mc.textfmt import RULE

DAY_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
WEEK_RE = re.compile(r"^\d{4}-W\d{2}$")
SHOW_LINES = 50
LIST_DAYS = 14
LIST_SUMMARIES = 10
LIST_TAGS = 30


def _agent_and_date(args: str) -> Tuple[Optional[str], Optional[str]]:
    """Agent = first token not starting with `-` or a digit; date = first token with a digit."""
    agent_name = date_token = None
    for token in (args or "").split():
        if token[:1].isdigit():
            date_token = date_token or token
        elif token.startswith("-"):
            continue
        elif agent_name is None:
            agent_name = token
    return agent_name, date_token


def cmd_sessions(agents: Agents, args: str) -> str:
    """Days with session logs, or one day's log (its last 50 lines)."""
    agent_name, day = _agent_and_date(args)
    agent = agents.get(agent_name)
    if day is not None:
        if not DAY_RE.fullmatch(day):
            return f"Invalid date: {day} (use YYYY-MM-DD)"
        text = store.read_text(sessionlog.sessions_dir(agent.workspace) / f"{day}.md")
        if text is None:
            return f"No session log for {day}."
        lines = text.rstrip().split("\n")
        if len(lines) > SHOW_LINES:
            omitted = len(lines) - SHOW_LINES
            lines = [f"... ({omitted} earlier lines omitted)"] + lines[-SHOW_LINES:]
        return "\n".join(lines)
    logs = sessionlog.list_logs(agent.workspace)
    if not logs:
        return f'No session logs for "{agent.id}".'
    out = [f"Session Logs: {agent.id} ({len(logs)} days)", RULE]
    for path in logs[:LIST_DAYS]:
        count = len(sessionlog.read_entries(path))
        out.append(f"{path.stem}   {count:>3} session(s)")
    out += ["", "Use /mc sessions <YYYY-MM-DD> to view a specific day."]
    return "\n".join(out)


def cmd_tags(agents: Agents, args: str) -> str:
    """Tags of the agent's session topics, most used first."""
    agent = agents.get(args.strip() or None)
    rows = tagindex.parse(store.read_text(tagindex.tags_path(agent.workspace)) or "")
    if not rows:
        return f'No tags for "{agent.id}".'
    rows = sorted(rows, key=lambda r: len(r.dates), reverse=True)
    out = [f"Tags: {agent.id} ({len(rows)} tags)", RULE]
    for row in rows[:LIST_TAGS]:
        latest = row.dates[0] if row.dates else "-"
        out.append(f"{row.tag:<25} {len(row.dates):>3} days   latest: {latest}")
    if len(rows) > LIST_TAGS:
        out.append(f"  ... and {len(rows) - LIST_TAGS} more")
    return "\n".join(out)


def _summary_args(args: str) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    kind = date_token = agent_name = None
    for token in (args or "").split():
        if token in ("daily", "weekly") and kind is None:
            kind = token
        elif re.match(r"^\d{4}", token) and date_token is None:
            date_token = token
        elif agent_name is None:
            agent_name = token
    return kind, date_token, agent_name


def cmd_summary(agents: Agents, args: str) -> str:
    """List the newest summaries, or print one by date (`YYYY-MM-DD`) or week (`YYYY-Www`)."""
    kind, token, agent_name = _summary_args(args)
    agent = agents.get(agent_name)
    if token is not None:
        weekly = "W" in token or kind == "weekly"
        pattern = WEEK_RE if weekly else DAY_RE
        if not pattern.fullmatch(token):
            return f"Invalid {'week' if weekly else 'date'}: {token} (use YYYY-Www or YYYY-MM-DD)"
        directory = summary.weekly_dir if weekly else summary.daily_dir
        text = store.read_text(directory(agent.workspace) / f"{token}.md")
        if text is None:
            return f"No {'weekly' if weekly else 'daily'} summary for {token}."
        return text.rstrip()
    kinds = [kind] if kind else ["daily", "weekly"]
    out: List[str] = [f"Summaries: {agent.id}", RULE]
    found = False
    for name in kinds:
        files = (summary.list_daily if name == "daily" else summary.list_weekly)(agent.workspace)
        if not files:
            continue
        found = True
        out.append(f"{name.capitalize()}:")
        for path in files[:LIST_SUMMARIES]:
            count = summary.session_count(store.read_text(path) or "")
            out.append(f"  {path.stem}   {count} session(s)")
    if not found:
        return f'No summaries for "{agent.id}".'
    out += ["", "Use /mc summary <YYYY-MM-DD> or /mc summary <YYYY-Www> to view details."]
    return "\n".join(out)
