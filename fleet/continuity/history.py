"""Related history from daily summaries and session logs, with the original plugin's
scoring and block.

Injected at agent start so a resumed task brings back what earlier sessions did on the same topic.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from .paths import memory_dir
from .store import read_text

BEGIN = "=== RELATED HISTORY ==="
END = "=== END RELATED HISTORY ==="
MAX_KEYWORDS = 10
DAILY_FILES = 14
SESSION_FILES = 7
CACHE_MAX = 256  # (file, keywords) pairs: 21 files per agent, a dozen agents; 0: no cache

Item = Tuple[int, str, str]  # (score, date label, summary)
_cache: OrderedDict[tuple, Tuple[tuple, List[Item]]] = OrderedDict()
_cache_lock = threading.Lock()

STOPWORDS = frozenset(
    [
        "this", "that", "with", "from", "have", "been", "will", "what", "when", "where", "which",
        "there", "their", "about", "would", "should", "could", "into", "some", "them", "than",
        "then", "these", "those", "just", "also", "more", "other", "after", "before", "none",
    ]
)

# compiled on first use (re's own cache), not at import: its CJK ranges take ~2 ms to compile
_NON_WORD = r"[^A-Za-z0-9_\u4e00-\u9fff\u3400-\u4dbf-]"
_DATE_FILE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}\.md$")
_CHUNK_RE = re.compile(r"^### ", re.MULTILINE)
_TOPIC_RE = re.compile(r"^- \*\*Topic:\*\*[ \t]*(.*)$", re.MULTILINE)


def keywords(objective: str) -> List[str]:
    """Up to ten lowercase words longer than three characters, stopwords removed, in order."""
    words = re.sub(_NON_WORD, " ", objective).split()
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
        names = os.listdir(str(directory))
    except OSError:
        return []
    names.sort(reverse=True)  # newest first; only the names taken are checked
    found: List[Path] = []
    for name in names:
        if len(found) == count:
            break
        if _DATE_FILE_RE.match(name):
            found.append(directory / name)
    return found


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


def _daily_items(path: Path, text: str, words: List[str]) -> List[Item]:
    s = score(text, words)
    return [(s, path.name[:-3], _daily_summary_line(text))] if s > 0 else []


def _session_items(path: Path, text: str, words: List[str]) -> List[Item]:
    items = []
    chunks = _CHUNK_RE.split(text.replace("\r\n", "\n"))
    for chunk in chunks[1:]:
        s = score(chunk, words)
        if s <= 1:
            continue
        first, _, _body = chunk.partition("\n")
        m = _TOPIC_RE.search(chunk)
        summary = m.group(1).strip() if m else chunk[:80].strip()
        items.append((s, f"{path.name[:-3]} {first.strip()}", summary))
    return items


def _file_items(path: Path, words: List[str], max_items: int,
                scorer: Callable[[Path, str, List[str]], List[Item]]) -> List[Item]:
    """A file's best `max_items` items, scored once per version of the file.

    Why a cache: the hook runs before every prompt and a long-lived agent's newest logs hold
    thousands of entries, while only today's log changes between prompts (the others are
    history). A file is known by (inode, size, mtime, ctime): every writer replaces it
    atomically (new inode) or appends (new size/mtime), so a changed file is always re-read.
    Keeping a file's best `max_items` (best score first, earlier first on ties) loses nothing:
    an item outside its own file's best cannot be among the best of all files.
    """
    try:
        st = os.stat(str(path))
    except OSError:
        return []
    sig = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    key = (str(path), scorer.__name__, tuple(words), max_items)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == sig and CACHE_MAX > 0:
            _cache.move_to_end(key)
            return hit[1]
    text = read_text(path)
    items = scorer(path, text, words) if text else []
    items = sorted(items, key=lambda item: -item[0])[:max_items]
    with _cache_lock:
        _cache[key] = (sig, items)
        _cache.move_to_end(key)
        while len(_cache) > CACHE_MAX:
            _cache.popitem(last=False)
    return items


def related_history(workspace: Path, objective: str, max_items: int = 3) -> Optional[str]:
    """The `=== RELATED HISTORY ===` block for `objective`, or None when nothing relates."""
    objective = (objective or "").strip()
    if len(objective) < 10 or max_items <= 0:
        return None
    words = keywords(objective)
    if not words:
        return None
    memory = memory_dir(workspace)
    items: List[Item] = []
    for path in _newest(memory / "summaries" / "daily", DAILY_FILES):
        items.extend(_file_items(path, words, max_items, _daily_items))
    for path in _newest(memory / "sessions", SESSION_FILES):
        items.extend(_file_items(path, words, max_items, _session_items))
    if not items:
        return None
    items.sort(key=lambda item: -item[0])  # stable: dailies first, newest first on ties
    lines = [BEGIN]
    lines.extend(f"[{date}] {summary}" for _s, date, summary in items[:max_items])
    lines.append(END)
    return "\n".join(lines)
