"""Releases a rollout took back, remembered beside the inventory so nobody ships them again by
accident (`.fleet/bad-releases.json`).

A rollout that spends its failure budget, or that an operator takes back, records its release
here before the first host goes back. Deploying a recorded release again needs `--force`, and
`invoke status` names it. Keyed by release name (`<version>-<sha256[:12]>`): a rebuild with a fix
is a new name and is not blocked. The file is small JSON written by temp file and rename.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from fleet.continuity import regularfile
from fleet.continuity.atomicfile import atomic_write
from fleet.deploy.inventory import control_dir

MAX_BYTES = 4 * 1024 * 1024


class BadReleasesError(ValueError):
    """The record cannot be read; the message names the file and how to fix it."""


def path_of(inventory_path: Path) -> Path:
    return control_dir(inventory_path) / "bad-releases.json"


def load(inventory_path: Path) -> dict[str, dict]:
    """Release name -> what took it back ({} when nothing was ever recorded)."""
    path = path_of(inventory_path)
    try:
        data = json.loads(regularfile.read_text(path, MAX_BYTES))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise BadReleasesError(f"{path}: cannot read the releases rollouts took back ({exc}); "
                               "fix the JSON or remove the file (it only blocks deploys of "
                               "those releases)") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise BadReleasesError(f"{path}: expected an object of release name -> record; fix it "
                               "or remove the file")
    return data


def record(inventory_path: Path, release: str, version: str, sha256: str, rollout: str,
           reason: str) -> None:
    """Remember `release` as taken back by `rollout` (an existing entry is kept, updated)."""
    known = load(inventory_path)
    known[release] = {"version": version, "sha256": sha256, "rollout": rollout,
                      "reason": reason[:2000],
                      "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path = path_of(inventory_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(known, indent=2, sort_keys=True) + "\n")
