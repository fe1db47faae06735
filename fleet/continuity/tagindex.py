"""The tag index `memory/tags.md`: for every `#tag` seen in a session topic, the dates it occurred.

Why: `/mc tags` and tag-filtered exports read it. Headers are matched exactly (`## #foo` is not
`## #foobar`, the original plugin's substring lookup confused them).
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import List, NamedTuple

from fleet.continuity import store
from fleet.continuity.paths import memory_dir

TAGS_FILE = "tags.md"
HEADER = "# Tag Index\n\n"

_TAG_RE = re.compile(r"#([\w-]+)")
_DATE_LINE_RE = re.compile(r"^- (\d{4}-\d{2}-\d{2})\s*$")


class TagRow(NamedTuple):
    """One tag section: the tag and its dates in file order (newest first)."""

    tag: str
    dates: List[str]


def tags_path(workspace: Path) -> Path:
    """`<workspace>/memory/tags.md`."""
    return memory_dir(workspace) / TAGS_FILE


def extract_tags(text: str) -> List[str]:
    """Lowercased `#tags` (Unicode letters, digits, `_`, `-`) in order, without duplicates."""
    seen = []
    for m in _TAG_RE.finditer(text or ""):
        tag = "#" + m.group(1).lower()
        if tag not in seen:
            seen.append(tag)
    return seen


def add_dates(text: str, tags: List[str], day: date) -> str:
    """`text` (a tags.md) with `day` recorded under each tag; unchanged where already present."""
    lines = (text or HEADER).split("\n")
    stamp = f"- {day.isoformat()}"
    for tag in tags:
        head = f"## {tag}"
        idx = next((i for i, line in enumerate(lines) if line.rstrip() == head), None)
        if idx is None:
            while lines and lines[-1] == "":
                lines.pop()
            lines += ["", head, stamp, ""]
            continue
        end = idx + 1
        while end < len(lines) and not lines[end].startswith("## "):
            end += 1
        if any(line.strip() == stamp for line in lines[idx + 1:end]):
            continue
        lines.insert(idx + 1, stamp)
    out = "\n".join(lines)
    return out if out.endswith("\n") else out + "\n"


def update(workspace: Path, topic: str, day: date) -> List[str]:
    """Record the tags of `topic` for `day` in the index (locked, atomic). Returns the tags."""
    tags = extract_tags(topic)
    if not tags:
        return []
    path = tags_path(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    with store.locked(path):
        old = store.read_text(path)
        new = add_dates(old or HEADER, tags, day)
        if new != old:
            store.atomic_write(path, new)
    return tags


def parse(text: str) -> List[TagRow]:
    """Tag sections of a tags.md (only `## #tag` headers; the `# Tag Index` title is not a tag)."""
    rows: List[TagRow] = []
    current = None
    for line in (text or "").split("\n"):
        if line.startswith("## "):
            name = line[3:].strip()
            current = TagRow(name, []) if name.startswith("#") else None
            if current is not None:
                rows.append(current)
            continue
        m = _DATE_LINE_RE.match(line)
        if current is not None and m:
            current.dates.append(m.group(1))
    return rows
