"""Temp files of atomic writes: named so they can be recognised, and swept when their writer died.

Every write of a state file, session index, ready file or link goes through a temp file and
`os.replace`. A writer killed (kill -9, power loss) between the two leaves its temp file behind;
before, nothing ever removed them (32 files, 5 MiB after 200 kills). The name carries a fixed tag
and the writer's pid, `.<name>.fleet-tmp.<pid>.<random>`, so a starting gateway can remove exactly
the ones whose writer is gone, and nothing else.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, List

from fleet.continuity import detached, ids
from fleet.continuity.statelayout import StateLayout

TAG = ".fleet-tmp."
_NAME = re.compile(r"\..+\.fleet-tmp\.(\d+)\.[A-Za-z0-9_]+")


def temp_path(path: os.PathLike[str] | str) -> str:
    """A temp name beside `path` for an atomic write by this process. A string, not a Path:
    pathlib interns every part of every path it builds, and every temp name is new (each one
    takes a slot in CPython's interned-string table, which grows in steps and stays grown)."""
    head, name = os.path.split(os.fspath(path))
    return os.path.join(head, f".{name}{TAG}{os.getpid()}.{ids.uuid4_hex()[:8]}")


def _alive(pid: int) -> bool:
    return pid == os.getpid() or detached.alive(pid)


def sweep(dirs: Iterable[Path], recursive: Iterable[Path] = ()) -> List[Path]:
    """Remove temp files of dead writers in `dirs` (and below each of `recursive`)."""
    candidates: List[Path] = []
    for d in dirs:
        try:
            candidates.extend(p for p in Path(d).iterdir() if TAG in p.name)
        except OSError:
            continue
    for root in recursive:
        for base, _subdirs, files in os.walk(str(root)):
            candidates.extend(Path(base) / f for f in files if TAG in f)
    removed = []
    for p in candidates:
        m = _NAME.fullmatch(p.name)
        if m is None or _alive(int(m.group(1))):
            continue
        try:
            if p.is_symlink() or p.is_file():
                p.unlink()
                removed.append(p)
        except OSError:
            continue
    return removed


def sweep_state_dir(state_dir: Path) -> List[Path]:
    """The temp files a gateway's writers leave in a state dir: config, run files, session
    indexes, links, and every workspace's memory tree."""
    root = Path(state_dir)
    dirs = [root, root / StateLayout.RUN, root / StateLayout.EXTENSIONS]
    dirs += list(root.glob(f"{StateLayout.AGENTS}/*/sessions"))
    recursive = [p / "memory" for p in root.glob("workspace*")]
    return sweep(dirs, recursive)
