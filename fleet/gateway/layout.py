"""The state dir as the gateway uses it: the shared layout plus the dirs a gateway creates, and
the plugins it finds there.

Every path is named by `fleet.continuity.statelayout.StateLayout` (one owner for the gateway,
the installer and the control side's shell lines); this module adds what only the gateway does.
"""

from __future__ import annotations

from pathlib import Path
from typing import List

from fleet.continuity import private
from fleet.continuity.statelayout import StateLayout


class Layout(StateLayout):
    """Paths of one state dir (StateLayout), and `ensure()` for a gateway about to run there."""

    def ensure(self) -> None:
        for d in (self.run_dir, self.log_dir):
            private.make_dir(d)
        self.extensions.mkdir(parents=True, exist_ok=True)


def plugin_dirs(layout: StateLayout) -> List[Path]:
    """Every `<state>/extensions/<id>` holding a manifest, sorted by name (symlinks followed)."""
    if not layout.extensions.is_dir():
        return []
    found = []
    for child in sorted(layout.extensions.iterdir()):
        if child.name.startswith("."):
            continue
        if (child / "openclaw.plugin.json").is_file():
            found.append(child)
    return found
