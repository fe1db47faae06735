"""Fault seam: lets tests and the Docker harness break the installer at a chosen step.

Why: "kill -9 at each step leaves the host on the old or the new release" can only be proven if
the installer can be stopped exactly there. When the installer reaches a step it looks for the
file `<state>/fleet/faults/<step>` (steps: lock, verify, unpack, switch, restart, ready, selftest,
audit, prune; `commit`, inside `switch` once its last checks passed, right before the `current`
link changes; and `doctor`, where the read-only doctor starts) and acts on its first word:

- `kill`: SIGKILL itself (no cleanup, no JSON: what a power cut or `kill -9` leaves behind);
- `hold`: sleep while the file exists, at most 60 s (so a test can kill it or race it there),
  with a marker `<step>.held` beside it for as long as it holds, so an observer outside the
  process (the Docker harness) knows exactly when the installer stands at that step;
- `fail`: raise `InjectedFault`, handled like any other error at that step;
- `enospc`: raise the OSError of a full disk (ENOSPC) there.

Which word applies is the machine's to say (fleet.installer.machine): the real one reads the
file; a simulated host (lab/sim) chooses by its seed, and its `kill` unwinds the simulated
process instead of signalling this one.

No file (the normal case) costs one `stat` per step. Unknown content is ignored.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from pathlib import Path

from fleet.continuity.statelayout import StateLayout
from fleet.installer import machine

STEPS = ("lock", "verify", "unpack", "switch", "commit", "restart", "ready", "selftest", "audit",
         "prune", "doctor")
HOLD_LIMIT_S = 60.0


class InjectedFault(RuntimeError):
    """Raised by a `fail` fault file."""


def fault_dir(state_dir: Path) -> Path:
    return StateLayout(state_dir).faults_dir


def check(state_dir: Path, step: str) -> None:
    """Act on `<state>/fleet/faults/<step>` if it exists (see the module docstring)."""
    host = machine.current()  # the real machine reads the file; a simulated one chooses
    word = host.fault(state_dir, step)
    if not word:
        return
    path = fault_dir(state_dir) / step
    if word == "kill":
        host.kill()
    elif word == "hold":
        marker = path.with_name(f"{step}.held")
        try:
            marker.write_text(f"{os.getpid()}\n", encoding="utf-8")
        except OSError:
            pass  # a full disk must not turn a hold into a crash; observers then time out
        deadline = time.monotonic() + HOLD_LIMIT_S
        try:
            while path.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            with contextlib.suppress(OSError):
                marker.unlink()
    elif word == "fail":
        raise InjectedFault(f"injected fault at step '{step}' ({path})")
    elif word == "enospc":
        raise OSError(errno.ENOSPC, f"No space left on device (injected at step '{step}')",
                      str(path))
