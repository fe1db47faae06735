"""`/mc state [agent]`, `state --all`, `compact [agent]` and `subagents`: reading the checkpoints.

Why together: each reads CURRENT_STATE.md files through the lossless StateDocument, so sections
are shown whole (the original `/mc` showed only their first line).
"""

from __future__ import annotations

from typing import List, Optional

from fleet.continuity import archive, document, store
from fleet.plugins.mc.agents import Agent, Agents
from fleet.plugins.mc.textfmt import RULE, rel_time, truncate

SHOWN_SECTIONS = ("Objective", "Current Step", "Key Decisions", "Next Action", "Blockers")
SHOWN_LINES = 3


def _doc(text: str) -> document.StateDocument:
    return document.StateDocument.parse(text)


def _value_block(value: str) -> List[str]:
    lines = value.split("\n") if value else []
    if not lines:
        return ["  (empty)"]
    out = ["  " + line.rstrip() for line in lines[:SHOWN_LINES]]
    if len(lines) > SHOWN_LINES:
        out.append(f"  ... +{len(lines) - SHOWN_LINES} more lines")
    return out


def cmd_state(agents: Agents, args: str) -> str:
    """One agent's checkpoint, section by section."""
    agent = agents.get(args or None)
    text = store.read_text(agent.state_file)
    if not text:
        return f'No state file for "{agent.id}".'
    doc = _doc(text)
    lines = [f"State: {agent.id}", f"Updated: {rel_time(doc.last_updated)}", RULE]
    for section in SHOWN_SECTIONS:
        lines.append(f"{section}:")
        lines += _value_block(doc.get(section))
        lines.append("")
    return "\n".join(lines).rstrip()


def cmd_state_all(agents: Agents, args: str = "") -> str:
    """One line per agent with memory: name, age, objective."""
    found = agents.with_memory()
    if not found:
        return "No agents with memory found."
    lines = [f"Memory States ({len(found)} agents)", RULE]
    for agent in found:
        text = store.read_text(agent.state_file)
        if not text:
            lines.append(f"{agent.id:<20} (no state)")
            continue
        doc = _doc(text)
        lines.append(
            f"{agent.id:<20} {rel_time(doc.last_updated):<10} {truncate(doc.get('Objective'), 50)}"
        )
    return "\n".join(lines).rstrip()


def compact_text(text: str) -> List[str]:
    """The original `/mc` compaction: title and timestamp lines, every `## ` heading, the first
    three lines of each section plus any `- ` line; other text outside sections kept."""
    out = []
    in_section = False
    count = 0
    for line in text.split("\n"):
        if line.startswith("# ") or line.startswith("> Last updated"):
            out.append(line)
            in_section = False
        elif line.startswith("## "):
            out.append(line)
            in_section = True
            count = 0
        elif in_section:
            count += 1
            if count <= SHOWN_LINES or line.startswith("- "):
                out.append(line)
        else:
            out.append(line)
    return out


def cmd_compact(agents: Agents, args: str) -> str:
    """Shorten the state file; the full previous version is archived first (nothing is lost)."""
    agent = agents.get(args or None)
    path = agent.state_file
    with store.locked(path):
        text = store.read_text(path)
        if not text:
            return f'No state for "{agent.id}".'
        before = text.split("\n")
        after = compact_text(text)
        archived = None
        if after != before:  # nothing to cut: leave the file (and its timestamp) alone
            doc = _doc("\n".join(after))
            if doc.last_updated is not None:
                doc.touch(document.iso_now())
            archived = archive.archive_state(agent.workspace, text, agents.mc_archive_cap())
            store.atomic_write(path, doc.render())
    reply = f'\u2713 Compacted "{agent.id}" state: {len(before)} \u2192 {len(after)} lines'
    if archived is not None:
        reply += f"\n  Previous state archived as {archived.stem}."
    return reply


def _overview(label: str, text: Optional[str], indent: str) -> List[str]:
    if not text:
        return [f"{indent}[{label}] No state file"]
    doc = _doc(text)
    lines = [
        f"{indent}[{label}] Updated: {doc.last_updated or 'unknown'}",
        f"{indent}  Objective: {truncate(doc.get('Objective') or 'None', 80)}",
    ]
    unsurfaced = doc.get("Unsurfaced Results")
    if document.is_meaningful(unsurfaced):
        lines.append(f"{indent}  Unsurfaced: {truncate(unsurfaced, 80)}")
    return lines


def _child_block(agent: Agent) -> List[str]:
    out = []
    for path in agent.child_state_files():
        out += _overview(path.parent.name, store.read_text(path), "    ")
    return out


def cmd_subagents(agents: Agents, args: str = "") -> str:
    """Every agent's state plus its subagents' own files (`memory/subagents/<id>/`)."""
    found = agents.with_memory()
    if not found:
        return "No agents with memory found."
    lines = ["Subagent State Overview", "\u2550" * 23, ""]
    for agent in found:
        lines += _overview(agent.id, store.read_text(agent.state_file), "")
        children = agent.child_state_files()
        if children:
            lines.append(f"  Subagents ({len(children)}):")
            lines += _child_block(agent)
        lines.append("")
    return "\n".join(lines).rstrip()
