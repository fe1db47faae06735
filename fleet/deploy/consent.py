"""First use of a host outside the sandbox needs the operator's explicit yes.

A typo in `--hosts`, or a selector that reaches further than meant, must not change a real host
(or the operator's own `~/.openclaw`) unasked. The first time a deploy, rollback or restart would
change a host outside the sandbox, the CLI shows it and asks (TTY) or needs `--yes`; the answer is
recorded per target in `.fleet/confirmed-hosts.json` beside the inventory. A target is the host's
name with where it really goes: for ssh, the destination resolved through ssh_config (user,
address, port and every jump host, fleet.deploy.sshconfig), so re-pointing a `Host` alias or
its jump host asks again, as editing the inventory does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fleet.continuity.atomicfile import atomic_write
from fleet.deploy import sshconfig
from fleet.deploy.inventory import Host, control_dir


def record_path(inventory_path: Path) -> Path:
    return control_dir(inventory_path) / "confirmed-hosts.json"


def _load(inventory_path: Path) -> dict:
    try:
        data = json.loads(record_path(inventory_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def destinations(hosts: list[Host]) -> dict[str, str]:
    """Where each host really goes, by name: `name (user@address:port via hops)`, ssh_config
    applied (read once for all of them); SshConfigError (naming the file and line) when
    ssh_config cannot be followed. What the operator is shown is what gets confirmed."""
    config = None if all(h.is_local for h in hosts) else sshconfig.default_config()
    return {h.name: h.describe() if h.is_local
            else f"{h.name} ({sshconfig.resolve(h, config).describe()})" for h in hosts}


def unconfirmed(inventory_path: Path, hosts: list[Host], where: dict[str, str]) -> list[Host]:
    """Hosts outside the sandbox whose destination (`where`, from `destinations`) the operator
    has not confirmed before."""
    known = _load(inventory_path)
    return [h for h in hosts if not h.sandbox and known.get(h.name) != where[h.name]]


def confirm(inventory_path: Path, hosts: list[Host], where: dict[str, str]) -> None:
    """Remember these destinations as confirmed (temp file + rename: never a torn record)."""
    known = _load(inventory_path)
    known.update({h.name: where[h.name] for h in hosts})
    path = record_path(inventory_path)
    os.makedirs(path.parent, exist_ok=True)
    atomic_write(path, json.dumps(known, indent=2, sort_keys=True) + "\n")
