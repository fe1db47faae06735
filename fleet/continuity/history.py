"""Related history from daily summaries and session logs, with the original plugin's
scoring and block.

Injected at agent start so a resumed task brings back what earlier sessions did on the same topic.
"""

from __future__ import annotations

import heapq
import os
import re
from pathlib import Path
from typing import List, Optional, Tuple

from .paths import memory_dir
from .store import read_text

BEGIN = "=== RELATED HISTORY ==="
END = "=== END RELATED HISTORY ==="
MAX_KEYWORDS = 10
DAILY_FILES = 14
SESSION_FILES = 7

STOPWORDS = frozenset(
    [
        "this", "that", "with", "from", "have", "been", "will", "what", "when", "where", "which",
        "there", "their", "about", "would", "should", "could", "into", "some", "them", "than",
        "then", "these", "those", "just", "also", "more", "other", "after", "before", "none",
    ]
)

_NON_WORD_RE = re.compile(r"[^A-Za-z0-9_\u4e00-\u9fff\u3400-\u4dbf-]")
_DATE_FILE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}\.md$")
_CHUNK_RE = re.compile(r"^### ", re.MULTILINE)
_TOPIC_RE = re.compile(r"^- \*\*Topic:\*\*[ \t]*(.*)$", re.MULTILINE)


def keywords(objective: str) -> List[str]:
    """Up to ten lowercase words longer than three characters, stopwords removed, in order."""
    words = _NON_WORD_RE.sub(" ", objective).split()
    out = []
    for word in words:
        w = word.lower()
        if len(w.encode("utf-16-le")) // 2 > 3 and w not in STOPWORDS:
            out.append(w)
    return out[:MAX_KEYWORDS]


def score(text: str, words: List[str]) -> int:
    """Total case-insensitive occurrences of every keyword (a repeated keyword counts twice)."""
    low = text.lower()
    return sum(low.count(w) for w in words)


def _newest(directory: Path, count: int) -> List[Path]:
    """The `count` newest dated files; plain names (os.listdir), no Path per file: a year of
    history is 365 entries per directory and this runs on every agent start."""
    try:
        names = [n for n in os.listdir(str(directory)) if _DATE_FILE_RE.match(n)]
    except OSError:
        return []
    return [directory / n for n in heapq.nlargest(count, names)]


def _daily_summary_line(text: str) -> str:
    lines = text.replace("\r\n", "\n").split("\n")
    for i, line in enumerate(lines):
        if line.strip() == "## Topics":
            topics = []
            for item in lines[i + 1 :]:
                if item.startswith("## "):
                    break
                if item.strip():
                    topics.append(item.strip())
            if topics:
                return "; ".join(topics[:3])
            break
    return " ".join(line.strip() for line in lines[:3]).strip()


def related_history(workspace: Path, objective: str, max_items: int = 3) -> Optional[str]:
    """The `=== RELATED HISTORY ===` block for `objective`, or None when nothing relates."""
    objective = (objective or "").strip()
    if len(objective) < 10 or max_items <= 0:
        return None
    words = keywords(objective)
    if not words:
        return None
    memory = memory_dir(workspace)
    items: List[Tuple[int, str, str]] = []
    for path in _newest(memory / "summaries" / "daily", DAILY_FILES):
        text = read_text(path)
        if not text:
            continue
        s = score(text, words)
        if s > 0:
            items.append((s, path.name[:-3], _daily_summary_line(text)))
    for path in _newest(memory / "sessions", SESSION_FILES):
        text = read_text(path)
        if not text:
            continue
        chunks = _CHUNK_RE.split(text.replace("\r\n", "\n"))
        for chunk in chunks[1:]:
            s = score(chunk, words)
            if s <= 1:
                continue
            first, _, _body = chunk.partition("\n")
            m = _TOPIC_RE.search(chunk)
            summary = m.group(1).strip() if m else chunk[:80].strip()
            items.append((s, f"{path.name[:-3]} {first.strip()}", summary))
    if not items:
        return None
    items.sort(key=lambda item: -item[0])  # stable: dailies first, newest first on ties
    lines = [BEGIN]
    lines.extend(f"[{date}] {summary}" for _s, date, summary in items[:max_items])
    lines.append(END)
    return "\n".join(lines)
