"""Process control: run in the foreground, start detached, stop, restart, status.

Never `pkill -f`: a gateway is found through its flock-held pidfile only, signalled by that pid,
and considered gone when the kernel has released its lock. `start` returns when the new process
answers `health` as ready (every plugin loaded, `--expect` versions matching) or fails with the log.

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
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from fleet.continuity import tempfiles
from fleet.continuity.paths import ConfigError
from fleet.gateway import client, logfile
from fleet.gateway.control import ControlServer
from fleet.gateway.layout import Layout
from fleet.gateway.pidfile import AlreadyRunning, PidFile, running_pid
from fleet.gateway.process import StopError, holder_pid, spawn, terminate

log = logging.getLogger("fleet.gateway.daemon")
POLL_S = 0.02
STOP_GRACE_S = 10.0
DRAIN_S = 8.0


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
        _remove_ready(layout, None)  # a stale one from a killed predecessor (we hold the lock)
        from fleet.gateway.service import Gateway  # after the lock: imports plugins' world

        try:
            gateway = Gateway(layout)
        except ConfigError as exc:
            log.error("cannot start: %s", exc)
            return 2
        stop = {"signal": None}

        def on_signal(signum, _frame):
            stop["signal"] = signum
            _remove_ready(layout, os.getpid())  # not ready from the moment a stop begins
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
            _remove_ready(layout, os.getpid())
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
        _remove_ready(layout, os.getpid())
        why = f"signal {stop['signal']}" if stop["signal"] else "shutdown request"
        log.info("stopping (%s): draining in-flight requests", why)
        drained = server.close(DRAIN_S)
        log.info("stopped%s", "" if drained else " (some requests were still running)")
        return 0
    finally:
        _remove_ready(layout, os.getpid())
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
        meta = json.loads((root / Layout.RELEASE_META).read_text(encoding="utf-8"))
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        return None, f"cannot read {root / Layout.RELEASE_META}: {exc}"
    if meta is not None:
        plugins = meta.get("plugins") or {}
        want = {k: str(v) for k, v in (meta.get("components") or {}).items() if k in plugins}
        mismatch = check_expect(health, want)
        if mismatch:
            return None, f"release version mismatch: {mismatch}"
    return {"pid": os.getpid(), "ready": True, "release": health.get("release"),
            "sha256": (meta or {}).get("sha256"), "versions": health.get("versions") or {},
            "startedAt": health.get("started_at")}, ""


def write_ready(path: Path, record: Dict[str, Any]) -> None:
    """One line of `json.dumps(record, sort_keys=True)`, atomically: temp file in the same dir,
    fsync, os.replace. The no-op check greps this exact form (fleet.deploy.commands.noop_check:
    the sorted keys pid, ready, release are adjacent, so keep any new key out of that range)."""
    tmp = tempfiles.temp_path(path)
    fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(str(tmp), str(path))
    except OSError:
        tmp.unlink()
        raise


def ready_pid(path: Path) -> Optional[int]:
    """The pid a ready file names, None if there is none (or it is unreadable)."""
    try:
        pid = json.loads(path.read_text(encoding="utf-8")).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) else None


def _remove_ready(layout: Layout, pid: Optional[int]) -> None:
    """Remove the ready file if it names `pid` (any file when pid is None: the caller holds the
    pidfile lock, so no live gateway can own it); a successor's file is never touched."""
    path = layout.ready_file
    if pid is not None and ready_pid(path) != pid:
        return
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot remove %s: %s", path, exc)


def _log_size(layout: Layout) -> int:
    try:
        return layout.log.stat().st_size
    except OSError:
        return 0


def log_tail(layout: Layout, since: int = 0, lines: int = 30) -> str:
    try:
        with open(layout.log, "rb") as fh:
            fh.seek(since)
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def check_expect(health: Dict[str, Any], expects: Dict[str, str]) -> Optional[str]:
    """None when every expected plugin runs at its expected version, else what differs."""
    bad = []
    versions = health.get("versions") or {}
    for pid, want in sorted(expects.items()):
        have = versions.get(pid)
        if have != want:
            bad.append(f"{pid} expected {want}, running {have or 'not loaded'}")
    return "; ".join(bad) or None


def wait_ready(layout: Layout, expects: Dict[str, str], timeout_s: float,
               proc: Optional[subprocess.Popen] = None) -> Dict[str, Any]:
    """Poll health until ready; DaemonError (with the reason) on failure or timeout."""
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    while True:
        if proc is not None and proc.poll() is not None:
            other = running_pid(layout.pidfile)
            if other:
                raise DaemonError(f"gateway already running (pid {other}, started "
                                  "concurrently); this start did nothing")
            raise DaemonError(f"gateway exited with code {proc.returncode} before it was ready")
        if layout.socket.exists():
            try:
                resp = client.request(layout.socket, {"op": "health"}, timeout_s=2.0, retry_s=0)
            except client.ClientError as exc:
                last = str(exc)
            else:
                if not resp.get("ok"):
                    last = str(resp.get("error"))
                else:
                    health = resp["result"]
                    if proc is not None and health.get("pid") != proc.pid:
                        # another starter won the pidfile race; ours exits with "already running"
                        if proc.poll() is not None:
                            raise DaemonError(
                                f"gateway already running (pid {health.get('pid')}, started "
                                "concurrently); this start did nothing"
                            )
                        time.sleep(POLL_S)
                        continue
                    if not health.get("ready"):
                        raise DaemonError(f"plugin load failed: {health.get('error')}")
                    mismatch = check_expect(health, expects)
                    if mismatch:
                        raise DaemonError(f"version mismatch: {mismatch}")
                    return health
        if time.monotonic() >= deadline:
            raise DaemonError(f"gateway not ready after {timeout_s:g}s ({last})")
        time.sleep(POLL_S)


def release_root() -> Path:
    """The realpath of the directory holding the `fleet` package we run from."""
    import fleet

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
    since = _log_size(layout)
    t0 = time.monotonic()
    proc = spawn(sys.executable, layout.state_dir, layout.log, env)
    try:
        health = wait_ready(layout, expects, timeout_s, proc)
    except DaemonError as exc:
        if proc.poll() is None:
            _terminate(layout, proc.pid, STOP_GRACE_S)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # never got as far as its pidfile: kill outright
            proc.kill()
            proc.wait(timeout=5)
        raise DaemonError(f"{exc}\n--- {layout.log} (tail) ---\n{log_tail(layout, since)}") from exc
    health["ready_s"] = round(time.monotonic() - t0, 3)
    return health


def _terminate(layout: Layout, pid: int, grace_s: float) -> str:
    """SIGTERM, wait for the lock to go, SIGKILL after `grace_s` (fleet.gateway.pidfile);
    after a kill, remove what the gateway could not. Returns how it ended."""
    try:
        how = terminate(layout.pidfile, pid, grace_s, POLL_S)
    except StopError as exc:
        raise DaemonError(str(exc)) from exc
    if how == "killed":
        try:  # a killed gateway could not remove its socket
            layout.socket.unlink()
        except FileNotFoundError:
            pass
        _remove_ready(layout, pid)  # nor its ready file (a successor's is left alone)
    return how


def stop(layout: Layout, grace_s: float = STOP_GRACE_S) -> Dict[str, Any]:
    """Stop the running gateway; a stopped one is reported as such (not an error)."""
    try:
        pid = holder_pid(layout.pidfile)
    except StopError as exc:
        raise DaemonError(str(exc)) from exc
    if pid is None:
        return {"running": False, "stopped": False,
                "message": f"gateway is not running (state dir {layout.state_dir})"}
    how = _terminate(layout, pid, grace_s)
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
