"""`python3 -m fleet.installer doctor`: one host's health in one JSON answer, changing nothing.

The host's own checks (python version, free disk, state-dir permissions, gateway ready, each
plugin's loaded version, an OpenClaw host's OpenClaw against the active release's proof, stale
deploy lock, leftover temp files) plus the continuity doctor over
every agent and child state file (`fleet.continuity.doctor`). The answer carries the host's
clock (`time`) so the control side can measure skew against its own in the same round trip.
Severities and exit codes are the continuity doctor's: 0 healthy, 1 warnings, 2 critical.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from fleet.continuity import doctor as continuity_doctor
from fleet.continuity import tempfiles
from fleet.continuity.openclawrange import PROVEN
from fleet.installer import faults, transaction
from fleet.installer.lock import read_holder, stale_reason
from fleet.installer.manager import Manager
from fleet.installer.protocol import ALLOW_UNPROVEN_OPENCLAW

MIN_PYTHON = (3, 9)
DISK_WARN_BYTES = 1 << 30  # 1 GiB
DISK_CRITICAL_BYTES = 200 << 20  # 200 MiB: not enough for a few releases and transcripts
TEMP_AGE_S = 3600.0  # a temp file older than this was left by a killed writer
# Temp names of every writer in the host packages: atomic writes (fleet.continuity.tempfiles,
# `.<name>.fleet-tmp.<pid>.<random>`; older releases wrote `.<name>.<...>.tmp`), link switches
# (`.<name>.tmp-<pid>`), unpacking (`.tmp-<release>`), uploads (`<name>.<hex>.part`).
TEMP_RE = re.compile(r"^\..+" + re.escape(tempfiles.TAG) + r"\d+\.|^\..+\.tmp(-\d+)?$|^\.tmp-.+"
                     r"|\.part$")
SKIP_DIRS = {"releases", "node_modules", ".git"}


def _finding(check: str, severity: str, message: str) -> Dict[str, str]:
    return {"check": check, "severity": severity, "message": message}


def check_python() -> Dict[str, str]:
    version = ".".join(str(v) for v in sys.version_info[:3])
    if sys.version_info[:2] < MIN_PYTHON:
        return _finding("python", "critical", f"python {version} < 3.9: the host side needs "
                                              "3.9 or newer")
    return _finding("python", "ok", f"python {version} ({sys.executable})")


def check_disk(state_dir: Path) -> Dict[str, str]:
    try:
        free = shutil.disk_usage(str(state_dir)).free
    except OSError as exc:
        return _finding("disk", "critical", f"cannot read free disk of {state_dir}: {exc}")
    shown = f"{free / (1 << 30):.1f} GiB free"
    if free < DISK_CRITICAL_BYTES:
        return _finding("disk", "critical", f"{shown} at {state_dir}: free space before the "
                                            "next deploy or session fills the disk")
    if free < DISK_WARN_BYTES:
        return _finding("disk", "warning", f"{shown} at {state_dir}")
    return _finding("disk", "ok", shown)


def check_state_dir(state_dir: Path) -> Dict[str, str]:
    """The state dir holds transcripts and memory: it must be the user's and not open to all."""
    try:
        st = state_dir.stat()
    except OSError as exc:
        return _finding("state_dir", "critical", f"{state_dir}: {exc}")
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != os.getuid():
        return _finding("state_dir", "warning", f"{state_dir} is owned by uid {st.st_uid}, not "
                                                f"the login user ({os.getuid()}); fix: chown it")
    if mode & stat.S_IWOTH:
        return _finding("state_dir", "critical", f"{state_dir} is writable by everyone "
                                                 f"({mode:o}); fix: chmod 700 {state_dir}")
    if mode & stat.S_IWGRP:
        return _finding("state_dir", "warning", f"{state_dir} is writable by its group "
                                                f"({mode:o}); fix: chmod 700 {state_dir}")
    if mode & stat.S_IROTH:
        return _finding("state_dir", "info", f"{state_dir} mode {mode:o}: other users can read "
                                             f"transcripts and memory; chmod 700 to prevent it")
    return _finding("state_dir", "ok", f"{state_dir} mode {mode:o}")


def check_gateway(status: Dict[str, Any]) -> List[Dict[str, str]]:
    """Ready and each plugin's loaded version, from the installer's `status`."""
    out = []
    current = status.get("current") or {}
    if status.get("ready"):
        out.append(_finding("gateway", "ok", f"ready on {current.get('release')}"))
    elif not current:
        out.append(_finding("gateway", "critical", "no release installed (run a deploy)"))
    else:
        out.append(_finding("gateway", "critical", f"not ready: {status.get('problem')}"))
    health = status.get("gateway") or {}
    plugins = health.get("plugins") or {}
    wanted = current.get("components") or {}
    for pid in sorted(set(plugins) | {p for p in wanted if p != "fleet"}):
        info = plugins.get(pid) or {}
        version, expected = info.get("version"), wanted.get(pid)
        if not plugins:
            continue  # the gateway is down: reported above, nothing loaded to compare
        if not info.get("loaded"):
            why = info.get("error") or "not loaded"
            out.append(_finding(f"plugin {pid}", "critical", f"{pid}: {why}"))
        elif expected and version != expected:
            out.append(_finding(f"plugin {pid}", "warning", f"{pid} {version} loaded, the "
                                                            f"release ships {expected}"))
        else:
            out.append(_finding(f"plugin {pid}", "ok", f"{pid} {version} loaded"))
    return out


def check_supervisor(status: Dict[str, Any]) -> List[Dict[str, str]]:
    """The fleet manager's supervisor (fleet/installer/supervision.py): running, and how often
    it had to start the gateway again. Other managers have none of their own: no finding."""
    sup = status.get("supervisor")
    if not isinstance(sup, dict) or not status.get("current"):
        return []
    restarts = sup.get("restarts") or 0
    last = sup.get("last_exit") if isinstance(sup.get("last_exit"), dict) else {}
    if not sup.get("running"):
        return [_finding("supervisor", "warning",
                         "the gateway runs without its supervisor: if it dies it stays down; "
                         "fix: `invoke restart` (or the next deploy) starts it supervised")]
    if restarts:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(last.get("time") or 0))
        return [_finding("supervisor", "warning",
                         f"the gateway failed and was started again {restarts} time(s); last: "
                         f"{last.get('why', '?')} at {when} (its log: `invoke logs`)")]
    return [_finding("supervisor", "ok", f"supervised (pid {sup.get('pid')}), no restarts")]


def check_openclaw(status: Dict[str, Any]) -> List[Dict[str, str]]:
    """An OpenClaw host: its OpenClaw against the active release's proof. Anything but proven
    is a warning: the plugins run, on a pair nobody proved."""
    support = status.get("openclaw_support")
    if not isinstance(support, dict):
        return []
    release = (status.get("current") or {}).get("release")
    message = str(support.get("message", ""))
    if support.get("state") == PROVEN:
        return [_finding("openclaw", "ok", f"{message} (active: {release})")]
    return [_finding("openclaw", "warning", f"{message} (active: {release}); fix: run `invoke "
                                            "deploy`: it re-checks and converges, or pass "
                                            f"{ALLOW_UNPROVEN_OPENCLAW}")]


def check_lock(state_dir: Path, now: Optional[float] = None) -> Dict[str, str]:
    holder = read_holder(state_dir)
    if holder is None:
        return _finding("deploy_lock", "ok", "free")
    reason = stale_reason(holder, now)
    who = f"{holder.get('owner')} (pid {holder.get('pid')} on {holder.get('host')})"
    if reason:
        return _finding("deploy_lock", "warning", f"stale lock of {who}: {reason}; the next "
                                                  "deploy takes it over")
    return _finding("deploy_lock", "info", f"held by {who}: a deploy is running")


def temp_files(state_dir: Path, now: Optional[float] = None,
               max_age_s: float = TEMP_AGE_S) -> List[Path]:
    """Temp files (and unpack dirs) older than `max_age_s` anywhere in the state dir; unpacked
    releases are not searched inside, only their directory is."""
    now = time.time() if now is None else now
    found = []

    def consider(path: Path) -> None:
        try:
            if TEMP_RE.search(path.name) and now - path.lstat().st_mtime > max_age_s:
                found.append(path)
        except OSError:
            pass

    for root, dirs, files in os.walk(state_dir):
        for name in files + dirs:
            consider(Path(root) / name)
        for name in dirs:
            if name in SKIP_DIRS:
                try:
                    for child in os.scandir(Path(root) / name):
                        consider(Path(child.path))
                except OSError:
                    pass
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not TEMP_RE.search(d)]
    return sorted(set(found))


def check_temp_files(state_dir: Path, now: Optional[float] = None) -> Dict[str, str]:
    found = temp_files(state_dir, now)
    if not found:
        return _finding("temp_files", "ok", "none left behind")
    shown = ", ".join(str(p.relative_to(state_dir)) for p in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return _finding("temp_files", "warning", f"{len(found)} temp file(s) older than "
                                             f"{int(TEMP_AGE_S // 60)} min: {shown}{more}; "
                                             "a writer was killed; safe to delete")


def run(state_dir: Path, manager: Manager, now: Optional[float] = None) -> Dict[str, Any]:
    """The whole answer: host checks, continuity report, worst severity and its exit code."""
    faults.check(state_dir, "doctor")
    status = transaction.status(state_dir, manager)
    checks = [check_python(), check_disk(state_dir), check_state_dir(state_dir)]
    checks += check_gateway(status) + check_supervisor(status) + check_openclaw(status)
    checks += [check_lock(state_dir, now), check_temp_files(state_dir, now)]
    try:
        report = continuity_doctor.diagnose(state_dir, now=now).as_dict()
    except (OSError, ValueError) as exc:
        report = {"severity": "critical", "exit": 2, "targets": [], "error": str(exc)}
        checks.append(_finding("continuity", "critical", f"cannot diagnose: {exc}"))
    severity = continuity_doctor.worst([c["severity"] for c in checks] + [report["severity"]])
    return {"action": "doctor", "ok": True, "result": "doctor", "host": socket.gethostname(),
            "state_dir": str(state_dir), "time": time.time(),
            "python": ".".join(str(v) for v in sys.version_info[:3]),
            "disk_free_bytes": status.get("disk_free_bytes"), "current": status.get("current"),
            "checks": checks, "continuity": report, "severity": severity,
            "exit": continuity_doctor.exit_code(severity),
            "openclaw_support": status.get("openclaw_support")}
