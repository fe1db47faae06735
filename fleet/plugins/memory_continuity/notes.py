"""Recovery notes in a parent's `## Unsurfaced Results`: format, append, bounded, archived.

The original plugin rewrote the section from its first line plus the new note (earlier notes
were lost).
Here notes are appended to the whole section; past the budget the oldest whole notes move to
`memory/unsurfaced_archive.md` and one line says how many moved, so nothing is ever dropped.
Child text is data: it is neutralised and indented, so it can never start a note, a heading or a
`> Last updated:` line in the parent.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional, Tuple

from fleet.continuity import paths, store
from fleet.continuity.document import is_meaningful, neutralize
from fleet.continuity.tokens import estimate_tokens, truncate_tokens

SECTION_BUDGET = 500
TASK_CHARS = 120
RESULT_BUDGET = 200
ARCHIVE_NAME = paths.UNSURFACED_ARCHIVE
ARCHIVE_HEADER = "# Unsurfaced Results Archive\n\n"

# Read only where notes are kept (a child's end, a trim): compiled on first use (re's own
# cache), not when the gateway loads the plugin.
_BLOCK_START_RE = r"^\[[^\]\n]+\] "
_NOTE_HEAD_RE = r'^\[([^\]\n]+)\] Subagent "'
_MOVED_RE = r"^\[[^\]\n]+\] (\d+) older note\(s\) moved to memory/" + re.escape(ARCHIVE_NAME) + r"$"


def format_note(
    now_iso: str,
    child_agent: str,
    child_key: str,
    objective: str,
    result: str,
    partial: bool = False,
    child_file: Optional[str] = None,
) -> str:
    """`[<iso>] Subagent "<id>" completed.` + indented Session/Task/Result lines (the original's
    format, plus the Session line)."""
    status = "timed out (partial result)." if partial else "completed."
    lines = [f'[{now_iso}] Subagent "{child_agent}" {status}', f"  Session: {child_key}"]
    task = neutralize(objective).strip().split("\n")[0][:TASK_CHARS]
    if task:
        lines.append(f"  Task: {task}")
    short = truncate_tokens(result, RESULT_BUDGET)
    body = neutralize(short).strip("\n").split("\n")
    lines.append(f"  Result: {body[0]}")
    lines.extend(f"    {line}" if line.strip() else "" for line in body[1:])
    if short != result and child_file:
        lines.append(f"  Full result: {child_file}")
    return "\n".join(line.rstrip() for line in lines)


def split_blocks(section: str) -> List[str]:
    """Notes (each from its `[timestamp] ` line), with any leading free text as one block."""
    blocks: List[List[str]] = []
    for line in section.split("\n"):
        if re.match(_BLOCK_START_RE, line) or not blocks:
            blocks.append([line])
        else:
            blocks[-1].append(line)
    return ["\n".join(b).strip("\n") for b in blocks if "\n".join(b).strip()]


def note_blocks(section: str) -> List[str]:
    """The recovery notes in `section` (blocks that start with a note's head line), in order."""
    return [block for block in split_blocks(section) if re.match(_NOTE_HEAD_RE, block)]


def merge(existing: str, note: str) -> str:
    """Existing section (if meaningful) followed by the note."""
    if is_meaningful(existing):
        return existing.rstrip("\n") + "\n" + note
    return note


def cap(section: str, now_iso: str, budget: int = SECTION_BUDGET) -> Tuple[str, List[str]]:
    """(kept section, oldest blocks to archive) so the section stays within `budget` tokens.

    The newest note always stays. The previous "moved" line is replaced by one with the total.
    """
    if estimate_tokens(section) <= budget:
        return section, []
    blocks = split_blocks(section)
    moved_before = 0
    notes = []
    for block in blocks:
        m = re.match(_MOVED_RE, block)
        if m:
            moved_before += int(m.group(1))
        else:
            notes.append(block)
    moved: List[str] = []

    def render(kept: List[str]) -> str:
        total = moved_before + len(moved)
        if not total:
            return "\n".join(kept)
        head = f"[{now_iso}] {total} older note(s) moved to memory/{ARCHIVE_NAME}"
        return "\n".join([head] + kept)

    while len(notes) > 1 and estimate_tokens(render(notes)) > budget:
        moved.append(notes.pop(0))
    return render(notes), moved


def archive_path(memory_dir: Path) -> Path:
    return Path(memory_dir) / ARCHIVE_NAME


def append_archive(memory_dir: Path, blocks: List[str]) -> None:
    """Append whole notes to `<memory>/unsurfaced_archive.md` (locked, atomic)."""
    if not blocks:
        return
    addition = "".join(block + "\n\n" for block in blocks)

    def add(current: Optional[str]) -> str:
        base = current if current else ARCHIVE_HEADER
        if not base.endswith("\n"):
            base += "\n"
        return base + addition

    store.update(archive_path(memory_dir), add)
