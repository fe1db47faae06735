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
from fleet.deploy.inventory import Host


def record_path(inventory_path: Path) -> Path:
    return Path(inventory_path).parent / ".fleet" / "confirmed-hosts.json"


def _load(inventory_path: Path) -> dict:
    try:
        data = json.loads(record_path(inventory_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def destination(host: Host) -> str:
    """Where `host` really goes: `name (user@address:port via hops)`, ssh_config applied;
    SshConfigError (naming the file and line) when ssh_config cannot be followed."""
    if host.is_local:
        return host.describe()
    return f"{host.name} ({sshconfig.resolve(host).describe()})"


def unconfirmed(inventory_path: Path, hosts: list[Host]) -> list[Host]:
    """Hosts outside the sandbox whose destination the operator has not confirmed before."""
    known = _load(inventory_path)
    return [h for h in hosts if not h.sandbox and known.get(h.name) != destination(h)]


def confirm(inventory_path: Path, hosts: list[Host]) -> None:
    """Remember these destinations as confirmed (temp file + rename: never a torn record)."""
    known = _load(inventory_path)
    known.update({h.name: destination(h) for h in hosts})
    path = record_path(inventory_path)
    os.makedirs(path.parent, exist_ok=True)
    atomic_write(path, json.dumps(known, indent=2, sort_keys=True) + "\n")
