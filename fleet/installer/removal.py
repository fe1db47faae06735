"""Taking fleet off a host (`fleet remove`, as Kamal's `remove`): what fleet put in a state dir.

What goes: `fleet/` (every release, the uploaded artifacts, the audit log, the host lock and the
fleet lease), the fleet gateway's run files and log, a supervised OpenClaw's log, plugin
self-test scratch dirs. What stays: what agents and their users wrote (sessions under `agents/`,
the workspaces' memory, memory-continuity's map of children to their requesters), OpenClaw and
its `openclaw.json` (the manager takes fleet's entries out first), and anything in `extensions/`
that is not one of fleet's links.

`fleet/` is renamed aside first: one rename, after which the host reads as having nothing
installed (a later deploy starts afresh); then it is deleted. A deletion that fails says what is
left, and the next `remove` finishes it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import List

from fleet.continuity.statelayout import StateLayout

ASIDE_PREFIX = ".fleet-removed-"  # `fleet/` renamed aside, then deleted
_ROTATED = re.compile(r"\.\d+$")


def _logs(layout: StateLayout) -> List[Path]:
    """fleet's logs with their rotated copies (`gateway.log.1` ...)."""
    out = []
    for log in (layout.log, layout.openclaw_log):
        if log.parent.is_dir():
            out += [p for p in log.parent.iterdir() if p.name == log.name or (
                p.name.startswith(log.name) and _ROTATED.fullmatch(p.name[len(log.name):]))]
    return sorted(out)


def _rmtree(tree: Path, failed: List[str]) -> None:
    """Delete `tree`, appending what could not be deleted to `failed`."""
    def note(_func, path, _exc) -> None:
        failed.append(str(path))

    if sys.version_info >= (3, 12):
        shutil.rmtree(str(tree), onexc=note)
    else:
        shutil.rmtree(str(tree), onerror=note)


def remove(state_dir: Path) -> List[str]:
    """Delete what fleet put under `state_dir` (see the module doc); the paths removed,
    relative to it. Raises OSError naming what could not be deleted."""
    layout = StateLayout(state_dir)
    removed: List[str] = []
    leftovers = sorted(p for p in layout.state_dir.glob(ASIDE_PREFIX + "*"))
    if layout.fleet_dir.exists():
        aside = layout.state_dir / f"{ASIDE_PREFIX}{os.getpid()}"
        os.rename(str(layout.fleet_dir), str(aside))
        leftovers.append(aside)
        removed.append(StateLayout.FLEET)
    failed: List[str] = []
    for tree in leftovers:
        _rmtree(tree, failed)
    for path in [layout.socket, layout.pidfile, layout.ready_file, *_logs(layout)]:
        try:
            os.unlink(str(path))
            removed.append(os.path.relpath(str(path), str(layout.state_dir)))
        except FileNotFoundError:
            pass
        except OSError:
            failed.append(str(path))
    if layout.selftest_dir.is_dir():
        _rmtree(layout.selftest_dir, failed)
        removed.append(StateLayout.SELFTEST)
    for directory in (layout.run_dir, layout.log_dir, layout.extensions):
        try:
            directory.rmdir()  # only an empty one: anything else in it is not fleet's
        except OSError:
            pass
    if failed:
        raise OSError(f"could not delete {', '.join(failed[:5])}"
                      f"{' and more' if len(failed) > 5 else ''} under {layout.state_dir}; "
                      "make it writable and run `fleet remove` again, or delete it by hand")
    return removed
