"""The gateway managers by name: what `--manager NAME` (inventory `gateway.manager`) runs.

Kept apart from the managers themselves so that none of them imports another's module: the
`openclaw` manager builds on the base class in manager.py, and this table needs both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict

from fleet.installer.manager import (
    CommandManager,
    FleetManager,
    LaunchdManager,
    Manager,
    ManagerError,
    SystemdManager,
)
from fleet.installer.protocol import COMMAND, FLEET_MANAGER, LAUNCHD, MANAGERS, OPENCLAW, SYSTEMD

CLASSES = {FLEET_MANAGER: FleetManager, SYSTEMD: SystemdManager, LAUNCHD: LaunchdManager,
           COMMAND: CommandManager}


def make_manager(name: str, state_dir: Path, opts: Dict[str, str]) -> Manager:
    """The manager `name` for one state dir, or ManagerError naming the known ones."""
    if name == OPENCLAW:  # imported only here: its RPC client (urllib, ssl, email) is most of
        # an installer's start-up, and only an OpenClaw host needs it
        from fleet.installer.openclawgw import OpenclawManager

        return OpenclawManager(state_dir, opts)
    if name not in CLASSES:
        raise ManagerError("unknown gateway manager {!r}; use one of {}".format(
            name, ", ".join(MANAGERS)))
    return CLASSES[name](state_dir, opts)
