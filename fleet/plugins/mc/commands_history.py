"""`/mc history [agent]`, `restore <N> [agent]`, `clear [agent]`: archives and replacing state.

Why together: restore and clear replace a checkpoint, so both keep the replaced state first
(archive, and `CURRENT_STATE.md.bak` for restore) under the state file's lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from fleet.continuity import archive, document, store
from fleet.plugins.mc.agents import Agents
from fleet.plugins.mc.textfmt import RULE, truncate

MAX_ROWS = 20
RESTORE_USAGE = "Usage: /mc restore <N> [agent]\nN = archive number from /mc history"


def _stamp(path: Path) -> str:
    return path.stem.replace("_", " ")


def _objective(path: Path, limit: int) -> str:
    text = store.read_text(path)
    if text is None:
        return "?"
    return truncate(document.StateDocument.parse(text).get("Objective"), limit)


def cmd_history(agents: Agents, args: str) -> str:
    """The agent's archives, newest first, numbered for `/mc restore`."""
    agent = agents.get(args or None)
    directory = archive.archive_dir(agent.workspace)
    if not directory.is_dir():
        return f'No archive for "{agent.id}".'
    files = archive.list_archives(agent.workspace)
    if not files:
        return f'No archived sessions for "{agent.id}".'
    lines = [
        f"Session Archive: {agent.id} ({len(files)} entries)",
        RULE,
        f"{'#':>3} {'Timestamp':<20} Objective",
        "\u2500" * 60,
    ]
    for i, path in enumerate(files[:MAX_ROWS], 1):
        lines.append(f"{i:>3} {_stamp(path):<20} {_objective(path, 35)}")
    if len(files) > MAX_ROWS:
        lines += ["", f"  ... and {len(files) - MAX_ROWS} more"]
    return "\n".join(lines).rstrip()


def _split(args: str) -> List[str]:
    return args.split() if args else []


def cmd_restore(agents: Agents, args: str) -> str:
    """Put archive #N back as the current state; the replaced state goes to `.bak` and is also
    archived, so a second restore never loses the first one's backup."""
    parts = _split(args)
    try:
        index = int(parts[0]) if parts else 0
    except ValueError:
        index = 0
    if index < 1 or len(parts) > 2:
        return RESTORE_USAGE
    agent = agents.get(parts[1] if len(parts) > 1 else None)
    path = agent.state_file
    with store.locked(path):
        files = archive.list_archives(agent.workspace)
        if not files:
            return f'No archive for "{agent.id}".'
        if index > len(files):
            return f"Only {len(files)} archives available."
        chosen = files[index - 1]
        content = store.read_text(chosen)
        if content is None:
            return f"Failed to read archive {chosen.name}."
        current = store.read_text(path)
        kept: Optional[Path] = None
        if current is not None:
            store.atomic_write(path.with_name(path.name + ".bak"), current)
            if current != content:
                kept = archive.archive_state(agent.workspace, current, agents.mc_archive_cap())
        store.atomic_write(path, content)
    lines = [f"\u2713 Restored archive #{index} ({chosen.stem})"]
    if current is not None:
        lines.append("  Previous state backed up to CURRENT_STATE.md.bak")
    if kept is not None:
        lines.append(f"  and archived as {kept.stem}.")
    return "\n".join(lines)


def cmd_clear(agents: Agents, args: str) -> str:
    """Reset the agent's state to the template after archiving the current one."""
    agent = agents.get(args or None)
    path = agent.state_file
    with store.locked(path):
        current = store.read_text(path)
        if current is not None:
            archive.archive_state(agent.workspace, current, agents.mc_archive_cap())
        store.atomic_write(path, document.template())
    reply = f'\u2713 State cleared for "{agent.id}"'
    if current is not None:
        reply += "\n  Previous state archived."
    return reply
