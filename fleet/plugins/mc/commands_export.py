"""`/mc export [agent|all] [--from D] [--to D] [--tag #t]`: one Markdown file of an agent's memory.

Why: a person can take state, archives, session logs and summaries elsewhere in one file. Exports
go to `<state>/exports/` under a new name each time (never overwriting an earlier export).
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Iterable, List, Optional, Tuple

from fleet.continuity import archive, document, sessionlog, store, summary
from fleet.plugins.mc.agents import Agent, Agents

USAGE = "Usage: /mc export [agent|all] [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--tag #tag]"


class _Filters:
    def __init__(self, start: Optional[date], end: Optional[date], tag: Optional[str]) -> None:
        self.start, self.end, self.tag = start, end, tag

    def _span(self, name: str) -> Optional[Tuple[date, date]]:
        stem = name[:-3] if name.endswith(".md") else name
        try:
            if len(stem) >= 10 and stem[4] == "-" and stem[7] == "-":
                day = date.fromisoformat(stem[:10])
                return day, day
            if len(stem) == 8 and stem[4:6] == "-W":
                monday = date.fromisocalendar(int(stem[:4]), int(stem[6:]), 1)
                return monday, monday + timedelta(days=6)
        except ValueError:
            return None
        return None

    def keep(self, name: str, text: str) -> bool:
        span = self._span(name)
        if span is not None:
            if self.start and span[1] < self.start:
                return False
            if self.end and span[0] > self.end:
                return False
        return not self.tag or self.tag in text.lower()

    def describe(self) -> str:
        parts = []
        if self.start:
            parts.append(f"from {self.start.isoformat()}")
        if self.end:
            parts.append(f"to {self.end.isoformat()}")
        if self.tag:
            parts.append(f"tag {self.tag}")
        return ", ".join(parts)


def _parse_args(args: str) -> Tuple[Optional[str], _Filters]:
    tokens = (args or "").split()
    target: Optional[str] = None
    start = end = None
    tag = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in ("--from", "--to", "--tag"):
            if i + 1 >= len(tokens):
                raise ValueError(f"{token} needs a value")
            value = tokens[i + 1]
            if token == "--tag":
                tag = value.lower() if value.startswith("#") else "#" + value.lower()
            else:
                try:
                    day = date.fromisoformat(value)
                except ValueError:
                    raise ValueError(f"{token} {value}: not a date (use YYYY-MM-DD)") from None
                if token == "--from":
                    start = day
                else:
                    end = day
            i += 2
            continue
        if token.startswith("-") or target is not None:
            raise ValueError(f"unexpected argument {token!r}")
        target = token
        i += 1
    return target, _Filters(start, end, tag)


def _block(title: str, files: Iterable[Path], filters: _Filters) -> List[str]:
    chosen = []
    for path in files:
        text = store.read_text(path)
        if text is not None and filters.keep(path.name, text):
            chosen.append((path.stem, text))
    if not chosen:
        return []
    out = [f"## {title} ({len(chosen)})", ""]
    for stem, text in chosen:
        out += [f"### {stem}", "", text.rstrip("\n"), ""]
    return out


def _agent_section(agent: Agent, filters: _Filters) -> List[str]:
    ws = agent.workspace
    out = ["---", f"# Agent: {agent.id}", ""]
    state = store.read_text(agent.state_file)
    if state is not None and (not filters.tag or filters.tag in state.lower()):
        out += ["## Current State", "", state.rstrip("\n"), ""]
    out += _block("Archives", archive.list_archives(ws), filters)
    out += _block("Session Logs", sessionlog.list_logs(ws), filters)
    out += _block("Daily Summaries", summary.list_daily(ws), filters)
    out += _block("Weekly Summaries", summary.list_weekly(ws), filters)
    return out


def cmd_export(agents: Agents, args: str) -> str:
    """Write the export file and say where it is and how big it is."""
    try:
        target, filters = _parse_args(args)
    except ValueError as exc:
        return f"{exc}\n{USAGE}"
    if target is None or target == "all":
        chosen = agents.with_memory()
        if not chosen:
            return "No agents with memory found."
    else:
        chosen = [agents.get(target)]
    now = archive.local_now()
    lines = ["# Memory Continuity Export", f"> Exported: {document.iso_now()}"]
    if filters.describe():
        lines.append(f"> Filters: {filters.describe()}")
    lines.append("")
    for agent in chosen:
        lines += _agent_section(agent, filters)
    content = "\n".join(lines).rstrip("\n") + "\n"
    directory = agents.state_dir / "exports"
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"mc-export-{now.strftime('%Y-%m-%d_%H-%M')}"
    with store.locked(directory / ".export"):
        path = archive.free_name(directory, stem)
        store.atomic_write(path, content)
    size = len(content.encode("utf-8")) / 1024
    return f"\u2713 Exported to:\n  {path}\n  {len(chosen)} agent(s), {size:.1f} KB"
