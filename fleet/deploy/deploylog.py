"""The deploy log: the control side's own append-only record of runs (each host keeps its own
audit.jsonl too).

One JSON line per deploy / rollback / restart / stop / start / remove / exec (with its
command) in `.fleet/deploy-log.jsonl` beside the inventory:
who ran it, when, with which artifact, and each host's outcome, so "what did we do to the fleet
last Tuesday" has an answer even for hosts that were unreachable at the time.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from fleet.deploy.inventory import control_dir
from fleet.deploy.runner import HostResult
from fleet.installer.audit import newest_entry


def log_path(inventory_path: Path) -> Path:
    return control_dir(inventory_path) / "deploy-log.jsonl"


def record(inventory_path: Path, action: str, who: str, results: list[HostResult],
           artifact: dict | None = None, command: str | None = None) -> Path:
    """Append one line for this run (`command`: an exec's); returns the log's path."""
    entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "who": who,
             "action": action, "ok": all(r.ok for r in results), "artifact": artifact,
             "hosts": [{"host": r.host, "result": r.result, "ok": r.ok,
                        "from": (r.from_release or {}).get("release"),
                        "to": (r.to_release or {}).get("release"),
                        "duration_s": round(r.duration_s, 3), "note": r.note}
                       for r in results]}
    if command is not None:
        entry["command"] = command
    path = log_path(inventory_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(entry, sort_keys=True) + "\n").encode("utf-8"))
    finally:
        os.close(fd)
    return path


def last_failed(inventory_path: Path, action: str = "deploy") -> list[str] | None:
    """Hosts that did not succeed in the last recorded `action` (None if none is recorded)."""
    try:
        lines = log_path(inventory_path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    entry = newest_entry(lines, lambda e: e.get("action") == action)
    if entry is None:
        return None
    return [h["host"] for h in entry.get("hosts", []) if not h.get("ok")]
