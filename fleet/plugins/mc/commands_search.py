"""`/mc search <keyword> [agent]` (literal substring) and `/mc recall <topic>` (word overlap).

Why together: both read the same journal sources (state, archives, session logs, summaries) across
agents; search finds lines, recall ranks past work by how many topic words it shares.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, NamedTuple, Tuple

from fleet.continuity import archive, document, paths, sessionlog, store, summary
from fleet.plugins.mc.agents import Agent, Agents
from fleet.plugins.mc.textfmt import RULE, truncate

SEARCH_USAGE = (
    "Usage: /mc search <keyword> [agent]\n"
    "Searches state (subagents' too), archives, unsurfaced results, session logs and summaries."
)
RECALL_USAGE = "Usage: /mc recall <topic>\nFinds past sessions, summaries and archives on a topic."
GROUPS = ("State", "Unsurfaced", "Archive", "Session", "Daily", "Weekly")
PER_GROUP = 5

_NON_WORD_RE = re.compile(r"[^A-Za-z0-9_\u4e00-\u9fff\u3400-\u4dbf-]+")


class Hit(NamedTuple):
    """Lines of one file that mention the searched text."""

    group: str
    agent: str
    source: str
    lines: List[str]


def _matching_lines(text: str, needle: str, limit: int) -> List[str]:
    found = [line.strip() for line in text.split("\n") if needle in line.lower()]
    return [line for line in found if line][:limit]


def _sources(agent: Agent) -> List[Tuple[str, str, Path, int]]:
    """(group, source label, file, lines to show) in the original `/mc` order and limits."""
    ws = agent.workspace
    out = [("State", "CURRENT_STATE", agent.state_file, 3)]
    # Subagents' own state files, and the recovery notes a full section moved to an archive
    # (the agent's and each subagent's): results live there too.
    children = agent.child_state_files()
    out += [("State", f"subagents/{p.parent.name}/CURRENT_STATE", p, 3) for p in children]
    unsurfaced = [("unsurfaced_archive", agent.memory)]
    unsurfaced += [(f"subagents/{p.parent.name}/unsurfaced_archive", p.parent) for p in children]
    out += [("Unsurfaced", label, d / paths.UNSURFACED_ARCHIVE, 2) for label, d in unsurfaced]
    out += [("Archive", p.stem, p, 2) for p in archive.list_archives(ws)[:30]]
    out += [("Session", p.stem, p, 2) for p in sessionlog.list_logs(ws)[:14]]
    out += [("Daily", p.stem, p, 2) for p in summary.list_daily(ws)[:10]]
    out += [("Weekly", p.stem, p, 2) for p in summary.list_weekly(ws)[:10]]
    return out


def cmd_search(agents: Agents, args: str) -> str:
    """Case-insensitive literal search, grouped by source kind, at most 5 entries per group."""
    parts = (args or "").split()
    if not parts:
        return SEARCH_USAGE
    scope = agents.with_memory()
    if len(parts) > 1 and agents.is_agent(parts[-1]):
        scope = [agents.get(parts.pop())]
    keyword = " ".join(parts)
    needle = keyword.lower()
    hits: List[Hit] = []
    for agent in scope:
        for group, label, path, limit in _sources(agent):
            text = store.read_text(path)
            if text and needle in text.lower():
                lines = _matching_lines(text, needle, limit)
                hits.append(Hit(group, agent.id, label, lines))
    if not hits:
        return f'No matches for "{keyword}".'
    out = [f'Search: "{keyword}" ({len(hits)} hits)', RULE]
    for group in GROUPS:
        members = [h for h in hits if h.group == group]
        if not members:
            continue
        out.append(f"[{group}]")
        for hit in members[:PER_GROUP]:
            out.append(f"  {hit.agent}/{hit.source}")
            out += [f"    {truncate(line, 75)}" for line in hit.lines]
        if len(members) > PER_GROUP:
            out.append(f"  ... +{len(members) - PER_GROUP} more")
        out.append("")
    return "\n".join(out).rstrip()


def topic_words(topic: str) -> List[str]:
    """Distinct lowercase words longer than 2 characters (ASCII word chars, CJK, `-`)."""
    words: List[str] = []
    for word in _NON_WORD_RE.sub(" ", topic or "").split():
        word = word.lower()
        if len(word) > 2 and word not in words:
            words.append(word)
    return words


class Memory:
    """One remembered session, summary or state, scored against the recalled topic."""

    __slots__ = ("agent", "date", "text", "shown", "score")

    def __init__(self, agent: str, date: str, text: str, shown: str) -> None:
        self.agent = agent
        self.date = date
        self.text = text
        self.shown = shown
        self.score = 0


def _topics_lines(text: str) -> str:
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.strip() in ("## Topics", "## Key Topics"):
            body = [x.strip() for x in lines[i + 1:] if x.strip() and not x.startswith("## ")]
            return "; ".join(body[:3])
    return " ".join(x.strip() for x in lines[:3] if x.strip())


def _memories(agent: Agent) -> List[Memory]:
    ws = agent.workspace
    out: List[Memory] = []
    for path in sessionlog.list_logs(ws)[:14]:
        for entry in sessionlog.read_entries(path):
            out.append(Memory(agent.id, f"{path.stem} {entry.time}".strip(), entry.text,
                              entry.topic or entry.text[:80]))
    for path in summary.list_daily(ws)[:14]:
        topics = _topics_lines(store.read_text(path) or "")
        out.append(Memory(agent.id, path.stem, topics, topics))
    for path in archive.list_archives(ws)[:20]:
        text = store.read_text(path) or ""
        objective = document.StateDocument.parse(text).get("Objective").split("\n", 1)[0][:80]
        out.append(Memory(agent.id, path.stem.replace("_", " "), objective, objective))
    return out


def cmd_recall(agents: Agents, args: str, limit: int = 10) -> str:
    """Past work sharing the most topic words, across all agents (top 10)."""
    topic = (args or "").strip()
    words = topic_words(topic)
    if not words:
        return RECALL_USAGE
    # The original required 2 shared words, so a one-word topic could never match anything.
    threshold = min(2, len(words))
    scored: List[Memory] = []
    for agent in agents.with_memory():
        for memory in _memories(agent):
            low = memory.text.lower()
            memory.score = sum(1 for word in words if word in low)
            if memory.score >= threshold:
                scored.append(memory)
    if not scored:
        return f'No memories found for "{topic}".'
    scored.sort(key=lambda m: m.score, reverse=True)
    top = scored[:limit]
    out = [f'Recall: "{topic}" ({len(scored)} matches, showing top {len(top)})', RULE]
    for memory in top:
        out.append(f"[{memory.agent}] {memory.date}  (score: {memory.score})")
        out.append(f"  {truncate(memory.shown, 80)}")
        out.append("")
    return "\n".join(out).rstrip()
