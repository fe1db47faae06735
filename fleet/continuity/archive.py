"""Session archives: verbatim copies of replaced states under `memory/session_archive/`.

Why its own module: every path that replaces a checkpoint (agent_end, before_reset, `/mc clear`,
`/mc restore`) must keep the old one first, with names that never collide and a cap that only ever
deletes files this module wrote. Older archives decay into `session_archive/cold/`.
"""

from __future__ import annotations

import errno
import os
import re
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import List, Optional, Tuple

from fleet.continuity import store
from fleet.continuity.paths import memory_dir

ARCHIVE_DIR = "session_archive"
COLD_DIR = "cold"
DEFAULT_MAX_COUNT = 20

# Our own names only: `YYYY-MM-DD_HH-MM.md`, `YYYY-MM-DD_HH-MM-2.md`, ...
NAME_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})_(\d{2})-(\d{2})(?:-(\d+))?\.md$")


def local_now(now: Optional[datetime] = None) -> datetime:
    """`now` as a naive local datetime (aware values are converted, None means the clock)."""
    if now is None:
        return datetime.now()
    if now.tzinfo is not None:
        return now.astimezone().replace(tzinfo=None)
    return now


def archive_dir(workspace: Path) -> Path:
    """`<workspace>/memory/session_archive` (`paths.memory_dir`)."""
    return memory_dir(workspace) / ARCHIVE_DIR


def sort_key(name: str) -> Optional[Tuple[int, ...]]:
    """Chronological key of an archive file name, or None when it is not one of ours."""
    m = NAME_RE.fullmatch(name)
    if not m:
        return None
    parts = [int(g) for g in m.groups()[:5]]
    parts.append(int(m.group(6) or 1))
    return tuple(parts)


def archive_date(name: str) -> Optional[date]:
    """The calendar date in an archive name, None when absent or not a real date."""
    m = NAME_RE.fullmatch(name)
    if not m:
        return None
    try:
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def _own_archives(directory: Path) -> List[Path]:
    """Top-level archive files named by us, oldest first (never `cold/`, never other files)."""
    try:
        entries = list(directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for entry in entries:
        key = sort_key(entry.name)
        if key is not None and entry.is_file():
            found.append((key, entry))
    found.sort(key=lambda pair: pair[0])
    return [path for _, path in found]


def list_archives(workspace: Path) -> List[Path]:
    """The workspace's (warm) archives, newest first."""
    return list(reversed(_own_archives(archive_dir(workspace))))


def free_name(directory: Path, stem: str) -> Path:
    """First unused `<stem>.md`, `<stem>-2.md`, ... in `directory`. Candidates are tried as
    strings: a Path per candidate would intern each new name (see tempfiles.temp_path), and a
    busy minute tries many."""
    base = os.fspath(directory)
    name = f"{stem}.md"
    n = 2
    while _exists(os.path.join(base, name)):
        name = f"{stem}-{n}.md"
        n += 1
    return Path(directory) / name


def _exists(path: str) -> bool:
    """`Path.exists()` for a string: False when missing, other errors raised."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return False
        raise
    return True


def archive_state(
    workspace: Path, text: str, max_count: Optional[int] = DEFAULT_MAX_COUNT,
    now: Optional[datetime] = None,
) -> Path:
    """Write `text` as a new archive named by local time and return its path.

    Never overwrites: a second archive in the same minute gets `-2`, `-3`, ... Then keeps at most
    `max_count` archives (0 or None means 20), deleting only the oldest files matching our own
    name pattern; `cold/` and foreign files are neither counted nor touched.
    """
    cap = int(max_count) if max_count else DEFAULT_MAX_COUNT
    if cap <= 0:
        cap = DEFAULT_MAX_COUNT
    directory = archive_dir(workspace)
    directory.mkdir(parents=True, exist_ok=True)
    stem = local_now(now).strftime("%Y-%m-%d_%H-%M")
    with store.locked(directory / ".archive"):
        target = free_name(directory, stem)
        store.atomic_write(target, text)
        own = [p for p in _own_archives(directory) if p != target]
        excess = len(own) + 1 - cap
        for old in own[:max(excess, 0)]:
            try:
                old.unlink()
            except FileNotFoundError:
                pass
    return target


def _move_no_clobber(src: Path, cold: Path) -> Path:
    """Move `src` into `cold/` without ever replacing a file there."""
    cold.mkdir(parents=True, exist_ok=True)
    stem = src.name[:-3]
    while True:
        target = free_name(cold, stem)
        try:
            os.link(src, target)  # fails instead of clobbering if the name was just taken
        except FileExistsError:
            continue
        except OSError:
            data = store.read_text(src)
            if data is None:
                return target
            store.atomic_write(target, data)
        src.unlink()
        return target


def decay_archives(
    workspace: Path, days: Optional[float], now: Optional[datetime] = None,
) -> List[Path]:
    """Move archives whose name date (local midnight) is older than `days` into `cold/`.

    `days <= 0` (or None) disables decay. Returns the new paths in `cold/`.
    """
    if days is None or days <= 0:
        return []
    directory = archive_dir(workspace)
    if not directory.is_dir():
        return []
    cutoff = local_now(now) - timedelta(days=days)
    moved = []
    with store.locked(directory / ".archive"):
        for path in _own_archives(directory):
            day = archive_date(path.name)
            if day is None or datetime(day.year, day.month, day.day) >= cutoff:
                continue
            moved.append(_move_no_clobber(path, directory / COLD_DIR))
    return moved
