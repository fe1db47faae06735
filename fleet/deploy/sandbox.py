"""Taking the sandbox down: stop every gateway that runs from the sandbox, orphans included.

Sandbox hosts keep their state in `.fleet/` beside the inventory (fleet.deploy.inventory). A
gateway whose state dir is still there is stopped by its pidfile (fleet.gateway.process: SIGTERM,
SIGKILL after a grace period, done when the kernel released the pidfile's lock). One whose
`.fleet/` was removed from under it has no pidfile left to read, so it is found by another record
than `.fleet/`: the process table, filtered by the gateway's own protocol. A process counts only
if its command line is the one `fleet.gateway.process.command` starts (`-m fleet.gateway
--state-dir D run`), D lies under the sandbox directory, and (where /proc exists) it holds D's
`run/gateway.pid` open, as every running gateway does; the fleet manager's supervisors
(`-m fleet.installer supervise --state-dir D`, holding `run/supervisor.pid`) the same way, and
they are stopped first (a supervisor would start its gateway again). Never `pkill -f`: nothing
is signalled by a name pattern alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from fleet.continuity import detached
from fleet.continuity.statelayout import StateLayout
from fleet.deploy.inventory import SANDBOX_DIR, Inventory
from fleet.gateway import process
from fleet.gateway.layout import Layout
from fleet.gateway.process import StopError

GRACE_S = 10.0
PIDFILE = StateLayout.PIDFILE


@dataclass(frozen=True)
class Gateway:
    """A running gateway (or gateway supervisor) process and the state dir it was started
    with."""

    pid: int
    state_dir: str
    orphan: bool  # its state dir (or pidfile) is gone
    supervisor: bool = False


# how each kind of process is started: (module, the word after it that must be there), and the
# pidfile it holds
KINDS = {"fleet.gateway": ("run", PIDFILE),
         "fleet.installer": ("supervise", process.SUPERVISOR_PIDFILE)}
# what a process with that command line may be: a supervisor's gateway is a fork of it
# (fleet/installer/supervision.py), with its command line, holding the gateway's pidfile
MAY_BE = {"fleet.gateway": ("fleet.gateway",), "fleet.installer": ("fleet.installer",
                                                                   "fleet.gateway")}


def sandbox_root(inv: Inventory) -> Path:
    return Path(os.path.realpath(inv.path.parent / SANDBOX_DIR))


def _state_dir_arg(args: list[str]) -> tuple[str, str] | None:
    """(module, D) of `... -m fleet.gateway --state-dir D run` or `... -m fleet.installer
    supervise --state-dir D`, else None (not ours)."""
    try:
        start = next(i for i in range(len(args) - 1)
                     if args[i] == "-m" and args[i + 1] in KINDS)
    except StopIteration:
        return None
    module, rest = args[start + 1], args[start + 2:]
    if KINDS[module][0] not in rest or "--state-dir" not in rest[:-1]:
        return None
    return module, rest[rest.index("--state-dir") + 1]


def _processes() -> list[tuple[int, list[str], str | None]]:
    """(pid, argv, cwd or None) of every process we can see: /proc, else `ps`."""
    found = []
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            found.append((int(entry.name), [a.decode("utf-8", "replace") for a in argv if a],
                          cwd))
        return found
    out = subprocess.run(["ps", "-axo", "pid=,args="], capture_output=True, text=True,
                         timeout=30).stdout
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit():
            found.append((int(pid), args.split(), None))
    return found


def _holds_pidfile(pid: int, state_dir: str, pidfile: str = PIDFILE) -> bool:
    """Whether `pid` has `<state_dir>/<pidfile>` open (True where /proc cannot tell)."""
    fd_dir = Path(f"/proc/{pid}/fd")
    if not fd_dir.is_dir():
        return True
    want = os.path.join(state_dir, pidfile)
    try:
        for fd in fd_dir.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.removesuffix(" (deleted)") == want:
                return True
    except OSError:
        return False
    return False


def find_gateways(root: Path) -> list[Gateway]:
    """Every gateway and supervisor process whose state dir lies under `root` (which may be
    gone already), supervisors first."""
    root_s = str(root).rstrip("/") + "/"
    me = os.getpid()
    gateways = []
    for pid, argv, cwd in _processes():
        if pid == me:
            continue
        found = _state_dir_arg(argv)
        if found is None:
            continue
        module, state = found
        if not os.path.isabs(state) and cwd:
            state = os.path.join(cwd.removesuffix(" (deleted)"), state)
        state = os.path.realpath(state)
        if not state.startswith(root_s):
            continue
        kind = next((k for k in MAY_BE[module] if _holds_pidfile(pid, state, KINDS[k][1])), None)
        if kind is None:
            continue
        orphan = not os.path.exists(os.path.join(state, KINDS[kind][1]))
        gateways.append(Gateway(pid, state, orphan, kind == "fleet.installer"))
    return sorted(gateways, key=lambda g: not g.supervisor)


def down(inv: Inventory, purge: bool = False, grace_s: float = GRACE_S) -> list[str]:
    """Stop the sandbox's gateways (by pidfile, then orphans); `purge` also removes the sandbox
    hosts' state dirs. Returns one line per thing done."""
    lines = []
    root = sandbox_root(inv)
    for host in (h for h in inv.hosts.values() if h.sandbox):
        try:
            stopped = process.stop(Layout(host.state_dir), grace_s)
            if stopped:
                lines.append(f"{host.name}: gateway pid {stopped[0]} stopped ({stopped[1]})")
        except (StopError, OSError) as exc:
            lines.append(f"{host.name}: could not stop its gateway: {exc}")
    # supervisors first (each stops its gateway), then what is left: a gateway already gone with
    # its supervisor is not reported twice
    for supervisors in (True, False):
        for gw in (g for g in find_gateways(root) if g.supervisor == supervisors):
            try:
                how = detached.stop(gw.pid, grace_s)  # no pidfile left: judged by the pid
            except (detached.StopError, OSError) as exc:
                lines.append(f"pid {gw.pid}: could not stop it: {exc}")
                continue
            what = "orphaned gateway" if gw.orphan else "gateway"
            if gw.supervisor:
                lines.append(f"{what} supervisor pid {gw.pid} ({gw.state_dir}) stopped ({how}), "
                             "its gateway with it")
            else:
                lines.append(f"{what} pid {gw.pid} ({gw.state_dir}) stopped ({how})")
    if purge:
        for host in (h for h in inv.hosts.values() if h.sandbox):
            if os.path.lexists(host.state_dir):
                shutil.rmtree(host.state_dir, ignore_errors=True)
                lines.append(f"{host.name}: removed {host.state_dir}")
    return lines
