"""The gateway CLI's process control: run in the foreground, start detached, stop, restart, status.

Spawning, stopping and readiness are fleet.gateway.process's (shared with the installer): never
`pkill -f`, a gateway is found through its flock-held pidfile only. `start` returns when the new
process answers `health` as ready (every plugin loaded, `--expect` versions matching) or fails
with the log.

Readiness file (the systemd `READY=1` model): once ready, with plugins loaded and the socket
bound, a gateway writes `run/ready.json` (pid, release, sha256, versions) once; it removes it when
a stop begins and at exit, and only while the file still names its own pid. "Still ready" then
means "that pid is alive", which the no-op redeploy checks in shell (fleet.deploy.commands).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import fleet
from fleet.continuity import regularfile
from fleet.continuity.atomicfile import atomic_write
from fleet.continuity.paths import ConfigError
from fleet.gateway import client, logfile, process
from fleet.gateway.control import ControlServer
from fleet.gateway.layout import Layout
from fleet.gateway.pidfile import AlreadyRunning, PidFile, running_pid
from fleet.gateway.process import STOP_GRACE_S, NotReady, Spawned, StopError, remove_ready

log = logging.getLogger("fleet.gateway.daemon")
DRAIN_S = 8.0
START_LOG_LINES = 30


class DaemonError(RuntimeError):
    """start/stop could not do what was asked; the message is for the operator."""


def run(layout: Layout) -> int:
    """The gateway process itself (foreground). Exit 0 after a graceful stop."""
    layout.ensure()
    logfile.setup(layout.log)  # rotated when started detached into logs/gateway.log
    pidfile = PidFile(layout.pidfile)
    try:
        pidfile.acquire()
    except AlreadyRunning as exc:
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    server: Optional[ControlServer] = None
    try:
        # a stale one from a killed predecessor (we hold the lock, so no live gateway owns it)
        remove_ready(layout.ready_file, None)
        from fleet.gateway.service import Gateway  # after the lock: imports plugins' world

        try:
            gateway = Gateway(layout)
        except ConfigError as exc:
            log.error("cannot start: %s", exc)
            return 2
        stop = {"signal": None}

        def on_signal(signum, _frame):
            stop["signal"] = signum
            remove_ready(layout.ready_file, os.getpid())  # not ready from the moment a stop begins
            if server is not None:
                server.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        gateway.load_plugins()
        server = ControlServer(layout.socket, gateway.handle)
        server.bind()
        wake = server.wake

        def on_shutdown() -> None:
            remove_ready(layout.ready_file, os.getpid())
            wake()

        gateway.on_shutdown = on_shutdown
        health = gateway.health()
        log.info(
            "gateway pid %s listening on %s; ready=%s versions=%s release=%s",
            os.getpid(), layout.socket, health["ready"], health["versions"], health["release"],
        )
        record, why_not = ready_record(health)
        if record is None:
            log.warning("not writing %s: %s", layout.ready_file, why_not)
        elif stop["signal"] is None:
            try:
                write_ready(layout.ready_file, record)
            except OSError as exc:  # only costs the no-op redeploy its shortcut
                log.warning("cannot write %s: %s", layout.ready_file, exc)
        server.serve(lambda: gateway.shutdown_requested.is_set() or stop["signal"] is not None)
        remove_ready(layout.ready_file, os.getpid())
        why = f"signal {stop['signal']}" if stop["signal"] else "shutdown request"
        log.info("stopping (%s): draining in-flight requests", why)
        drained = server.close(DRAIN_S)
        log.info("stopped%s", "" if drained else " (some requests were still running)")
        return 0
    finally:
        remove_ready(layout.ready_file, os.getpid())
        if server is not None:
            server.close(0)
        pidfile.release()


def ready_record(health: Dict[str, Any]) -> Tuple[Optional[Dict[str, Any]], str]:
    """What `ready.json` holds, or (None, why not): every plugin loaded and, in an installed
    release (`fleet_release.json` next to `fleet/`), each plugin at the release's version."""
    if not health.get("ready"):
        return None, f"not ready ({health.get('error')})"
    meta: Optional[Dict[str, Any]] = None
    root = Path(health.get("releaseRoot") or release_root())
    try:
        meta = json.loads(regularfile.read_text(root / Layout.RELEASE_META))
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        return None, f"cannot read {root / Layout.RELEASE_META}: {exc}"
    if meta is not None:
        plugins = meta.get("plugins") or {}
        want = {k: str(v) for k, v in (meta.get("components") or {}).items() if k in plugins}
        mismatch = process.versions_problem(health.get("versions") or {}, want)
        if mismatch:
            return None, f"release version mismatch: {mismatch}"
    return {"pid": os.getpid(), "ready": True, "release": health.get("release"),
            "sha256": (meta or {}).get("sha256"), "versions": health.get("versions") or {},
            "startedAt": health.get("started_at")}, ""


def write_ready(path: Path, record: Dict[str, Any]) -> None:
    """One line of `json.dumps(record, sort_keys=True)`, atomically (temp file, fsync, replace):
    a reader (the deploy's lease take asking whether this release already runs, ready) never
    sees half a file."""
    atomic_write(path, json.dumps(record, sort_keys=True) + "\n")


def release_root() -> Path:
    """The realpath of the directory holding the `fleet` package we run from."""
    return Path(fleet.__file__).resolve().parent.parent


def start(layout: Layout, expects: Dict[str, str], timeout_s: float = 30.0,
          root: Optional[Path] = None) -> Dict[str, Any]:
    """Start a detached gateway and wait until it is ready; the failed one is stopped again.

    `root` is the release to run (the directory holding `fleet/`), default the caller's own.
    """
    pid = running_pid(layout.pidfile)
    if pid is not None:
        raise DaemonError(f"gateway already running (pid {pid or 'starting'}, state dir "
                          f"{layout.state_dir}); use restart or stop")
    if root is not None:
        root = Path(root).resolve()
        if not (root / "fleet" / "gateway" / "__main__.py").is_file():
            raise DaemonError(f"{root}: no fleet/gateway package there; pass a release dir")
    layout.ensure()
    root = str(root or release_root())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p and p != root])
    env.setdefault("PYTHONUNBUFFERED", "1")
    t0 = time.monotonic()
    spawned = Spawned(layout, sys.executable, env)
    try:
        health = process.wait_ready(lambda: process.probe(layout), expects, timeout_s,
                                    pid=spawned.child.pid, exited=spawned.exited)
    except NotReady as exc:
        spawned.abandon(STOP_GRACE_S)
        raise DaemonError(f"{exc}{spawned.log_tail(START_LOG_LINES)}") from exc
    health["ready_s"] = round(time.monotonic() - t0, 3)
    return health


def stop(layout: Layout, grace_s: float = STOP_GRACE_S) -> Dict[str, Any]:
    """Stop the running gateway; a stopped one is reported as such (not an error)."""
    try:
        stopped = process.stop(layout, grace_s)
    except StopError as exc:
        raise DaemonError(str(exc)) from exc
    if stopped is None:
        return {"running": False, "stopped": False,
                "message": f"gateway is not running (state dir {layout.state_dir})"}
    pid, how = stopped
    return {"running": False, "stopped": True, "pid": pid, "how": how,
            "message": f"gateway pid {pid} stopped ({how})"}


def restart(layout: Layout, expects: Dict[str, str], timeout_s: float = 30.0,
            grace_s: float = STOP_GRACE_S, root: Optional[Path] = None) -> Dict[str, Any]:
    t0 = time.monotonic()
    stopped = stop(layout, grace_s)
    health = start(layout, expects, timeout_s, root)
    health["previous"] = stopped
    health["restart_s"] = round(time.monotonic() - t0, 3)
    return health


def status(layout: Layout) -> Dict[str, Any]:
    pid = running_pid(layout.pidfile)
    if pid is None:
        return {"running": False, "stateDir": str(layout.state_dir)}
    out: Dict[str, Any] = {"running": True, "pid": pid, "stateDir": str(layout.state_dir)}
    try:
        resp = client.request(layout.socket, {"op": "health"}, timeout_s=5.0, retry_s=1.0)
        out["health"] = resp.get("result") if resp.get("ok") else None
        if not resp.get("ok"):
            out["error"] = resp.get("error")
    except client.ClientError as exc:
        out["health"] = None
        out["error"] = str(exc)
    return out


def parse_expects(items: List[str]) -> Dict[str, str]:
    out = {}
    for item in items or []:
        pid, sep, version = item.partition("=")
        if not sep or not pid.strip() or not version.strip():
            raise DaemonError(f"--expect {item!r}: use id=version, e.g. memory-continuity=5.0.0")
        out[pid.strip()] = version.strip()
    return out
