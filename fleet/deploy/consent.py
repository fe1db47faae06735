"""First use of a host outside the sandbox needs the operator's explicit yes.

A typo in `--hosts`, or a selector that reaches further than meant, must not change a real host
(or the operator's own `~/.openclaw`) unasked. The first time a deploy, rollback, restart (stop,
start, remove) or ad-hoc exec would change a host outside the sandbox, the CLI shows it and
asks (TTY) or needs `--yes`; the answer is recorded per inventory file and target in
`.fleet/confirmed-hosts.json` beside the inventory, so
two inventories in one directory (`staging.yaml` and `production.yaml`, each with a `web1`) never
share or overwrite each other's confirmations. A target is the host's
name with where it really goes: for ssh, the destination resolved through ssh_config (user,
address, port and every jump host, fleet.deploy.sshconfig), so re-pointing a `Host` alias or
its jump host asks again, as editing the inventory does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fleet.continuity import regularfile
from fleet.continuity.atomicfile import atomic_write
from fleet.deploy import sshconfig
from fleet.deploy.inventory import Host, control_dir


def record_path(inventory_path: Path) -> Path:
    return control_dir(inventory_path) / "confirmed-hosts.json"


SCHEMA = 2  # {"schema": 2, "inventories": {<inventory file name>: {<host>: <destination>}}}
MAX_BYTES = 8 * 1024 * 1024


def _load_all(inventory_path: Path) -> dict:
    """Every inventory's confirmations in the record; an unreadable record, or one of the
    first format (keyed by host name alone, whichever inventory), confirms nothing: asked again."""
    try:
        data = json.loads(regularfile.read_text(record_path(inventory_path), MAX_BYTES))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or \
            not isinstance(data.get("inventories"), dict):
        return {}
    return {k: v for k, v in data["inventories"].items() if isinstance(v, dict)}


def _load(inventory_path: Path) -> dict:
    return _load_all(inventory_path).get(Path(inventory_path).name, {})


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
    every = _load_all(inventory_path)
    mine = every.setdefault(Path(inventory_path).name, {})
    mine.update({h.name: where[h.name] for h in hosts})
    path = record_path(inventory_path)
    os.makedirs(path.parent, exist_ok=True)
    atomic_write(path, json.dumps({"schema": SCHEMA, "inventories": every}, indent=2,
                                  sort_keys=True) + "\n")
