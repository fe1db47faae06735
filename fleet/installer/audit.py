"""The host's append-only audit log: who changed what, from which release to which, and how it went.

One JSON object per line in `<state>/fleet/audit.jsonl`, written with a single O_APPEND write so
concurrent writers never interleave a line. `status` shows the last entry.

The log must agree with what the host runs: an installer killed after its switch (a power cut,
`kill -9`) never writes its line, so the next installer compares the release the log last
recorded (`recorded_release`) with the one `current` names and, where they differ, appends a
`reconcile` line first (fleet.installer.transaction).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from fleet.continuity.private import open_regular
from fleet.continuity.statelayout import StateLayout


def audit_path(state_dir: Path) -> Path:
    return StateLayout(state_dir).audit


def append(state_dir: Path, entry: dict) -> None:
    path = audit_path(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(entry, sort_keys=True) + "\n").encode("utf-8")
    fd = open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def last_entry(state_dir: Path) -> Optional[dict]:
    """The newest parseable line (a torn last line from a crash is skipped)."""
    try:
        lines = _tail_lines(state_dir, 65536)
    except OSError:
        return None
    return newest_entry(lines)


def _tail_lines(state_dir: Path, size: int) -> List[str]:
    """The log's last `size` bytes as lines; a FIFO or a link in its place is refused (OSError),
    never waited on or followed."""
    with os.fdopen(open_regular(audit_path(state_dir), os.O_RDONLY), "rb") as fh:
        fh.seek(max(0, fh.seek(0, os.SEEK_END) - size))
        return fh.read(size).decode("utf-8", "replace").splitlines()


# results after which the host runs the entry's `to` (a refusal changed nothing: its `from`)
RUNS_TO = ("installed", "restarted", "rolled_back", "unchanged", "reconciled")
CHANGING_ACTIONS = ("install", "rollback", "restart", "reconcile")


def recorded_release(state_dir: Path) -> Tuple[bool, Optional[str]]:
    """The release dir name the log last said this host runs: `(True, name)`, `(True, None)`
    for no release (nothing recorded yet, or a failed first install), or `(False, None)` when
    the newest entry does not say (a failure whose outcome it could not name)."""
    try:
        lines = _tail_lines(state_dir, 262144)
    except FileNotFoundError:
        return True, None
    except OSError:
        return False, None
    entry = newest_entry(lines, lambda e: e.get("action") in CHANGING_ACTIONS)
    if entry is None:
        return True, None
    result = entry.get("result")
    if result in RUNS_TO:
        return True, entry.get("to")
    if result == "refused":
        return True, entry.get("from")
    if entry.get("to"):  # failed, yet it named where the host was left
        return True, entry.get("to")
    return False, None


def newest_entry(lines: List[str],
                 match: Callable[[dict], bool] = lambda entry: True) -> Optional[dict]:
    """The newest line of a JSON-lines log that is an object and `match`es; a torn line (a
    writer killed mid-line) or a foreign one is skipped. The control side's deploy log is read
    the same way."""
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and match(entry):
            return entry
    return None
