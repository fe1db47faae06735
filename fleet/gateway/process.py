"""The gateway seen from outside: spawn it, stop it, probe it, and wait until it is ready.

The one home of the gateway's life cycle for everyone who is not the gateway process itself:
the gateway CLI (fleet.gateway.daemon: start/stop/restart), the installer's managers
(fleet.installer.manager, fleet.installer.transaction) and the sandbox (fleet.deploy.sandbox).
Light to import (stdlib, the pidfile and the socket client), so the installer does not pay for the
gateway's own imports.

- Running means "holds the pidfile's flock"; a gateway is stopped by the pid in that file,
  SIGTERM first and SIGKILL after a grace period (fleet.continuity.detached, the one owner of
  starting and stopping detached processes), and is gone when the kernel released the lock.
- A killed gateway cleans up nothing: `stop` removes its socket and its `ready.json`, the latter
  only while the file still names the killed pid (a successor's is never touched).
- Readiness is a typed answer (`Readiness`) judged from one `health` answer: ready, not yet
  (nothing answers, or still the old pid), plugin failed, wrong version or release, or dead
  (the started process exited). Only "not yet" is waited for, by the one `wait_ready`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from fleet.continuity import detached, regularfile
from fleet.continuity.statelayout import StateLayout
from fleet.gateway.layout import Layout
from fleet.gateway.pidfile import running_pid

STOP_GRACE_S = 10.0
# the supervisor's pidfile, relative to the state dir (as StateLayout.PIDFILE): beside the
# gateway's, in the run dir
SUPERVISOR_PIDFILE = f"{StateLayout.RUN}/supervisor.pid"


class StopError(RuntimeError):
    """The lock holder could not be stopped: it names no pid, or it survived SIGKILL."""

READY = "ready"
NOT_YET = "not_yet"  # nothing answers yet, or the old gateway still does: keep waiting
PLUGIN_FAILED = "plugin_failed"  # the new gateway answers with a plugin's load error: final
MISMATCH = "mismatch"  # the new gateway runs other versions or another release: final
DEAD = "dead"  # the process we started exited: final


# No `site`: the gateway and its plugins are standard library only, and `site` (its .pth files,
# sitecustomize) is most of an interpreter start's CPU; PYTHONPATH (the release) still counts.
START_FLAGS = ("-S",)


def command(python: str, state_dir: Path) -> List[str]:
    """How a gateway is started: `python -m fleet.gateway --state-dir D run` (the sandbox's
    orphan search in fleet/deploy/sandbox.py recognises exactly this)."""
    return [python, *START_FLAGS, "-m", "fleet.gateway", "--state-dir", str(state_dir), "run"]


def spawned_state_dir(argv: List[str]) -> Optional[str]:
    """The state dir when the gateway's arguments are exactly what `command` passes, else None:
    such a start skips building the CLI's parser (fleet/gateway/__main__.py)."""
    if len(argv) == 3 and argv[0] == "--state-dir" and argv[1] and argv[2] == "run":
        return argv[1]
    return None


class Spawned:
    """A gateway started detached (fleet.continuity.detached: its own session, stdin from
    /dev/null, output appended to its log, cwd the state dir; `env` is its whole environment,
    with the release to run first on its PYTHONPATH). It writes its own pidfile under its lock.
    Knows where its log output began, and whether it died."""

    def __init__(self, layout: Layout, python: str, env: Dict[str, str]) -> None:
        self.layout = layout
        self.child = detached.Child(command(python, layout.state_dir), layout.log, env=env,
                                    cwd=layout.state_dir)

    def exited(self) -> Optional[str]:
        """Why the gateway is already gone, or None while it runs. A start that lost the
        pidfile race to a concurrent one says so."""
        code = self.child.exit_code()
        if code is None:
            return None
        other = running_pid(self.layout.pidfile)
        if other:
            return (f"gateway already running (pid {other}, started concurrently); this start "
                    "did nothing")
        return f"gateway exited with code {code} before it was ready"

    def log_tail(self, lines: int = 12) -> str:
        return self.child.log_tail(lines)

    def abandon(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop a gateway that never became ready (it may not have reached its pidfile)."""
        if self.child.exit_code() is not None:
            return
        if self.child.stop(grace_s) == "killed":
            clean_after_kill(self.layout, self.child.pid)


def holder_pid(path: Path, settle_s: float = 0.2) -> Optional[int]:
    """The pid to stop (None: nothing runs). A holder still starting gets `settle_s` to write
    its pid; one that still names none is a StopError."""
    pid = running_pid(path)
    if pid == 0:
        time.sleep(settle_s)
        pid = running_pid(path)
        if pid == 0:
            raise StopError(f"pidfile {path} is locked but names no pid")
    return pid


def terminate(path: Path, pid: int, grace_s: float, poll_s: float = detached.POLL_S,
              kill_wait_s: float = detached.KILL_WAIT_S) -> str:
    """Stop `pid` (fleet.continuity.detached.stop), gone when the lock at `path` is no longer
    its: the kernel releases it the moment the process exits, before any zombie is reaped.

    Returns how it ended: "gone" (no such process), "terminated" or "killed". A killed gateway
    cleans nothing up (`stop` does it for the caller).
    """
    try:
        return detached.stop(pid, grace_s, gone=lambda: running_pid(path) not in (pid, 0),
                             kill_wait_s=kill_wait_s, poll_s=poll_s)
    except detached.StopError as exc:
        raise StopError(f"gateway {exc}") from None


def supervisor_pidfile(layout: Layout) -> Path:
    """The pidfile a supervisor of this gateway holds (the `fleet` manager's, see
    fleet.installer.supervision): stopping the gateway stops it first, or it would start the
    gateway again."""
    return layout.state_dir / SUPERVISOR_PIDFILE


def stop(layout: Layout, grace_s: float = STOP_GRACE_S) -> Optional[Tuple[int, str]]:
    """Stop the gateway holding the pidfile, and its supervisor first when it has one: (the
    gateway's pid, how it ended), None when nothing was running. StopError when it names no pid
    or survives SIGKILL."""
    pid = holder_pid(layout.pidfile)
    how = _stop_supervisor(layout, grace_s)
    if pid is None:
        return None
    if running_pid(layout.pidfile) != pid:  # the supervisor stopped it
        return pid, how or "terminated"
    how = terminate(layout.pidfile, pid, grace_s)
    if how == "killed":
        clean_after_kill(layout, pid)
    return pid, how


def _stop_supervisor(layout: Layout, grace_s: float) -> Optional[str]:
    """SIGTERM the supervisor (it stops its gateway within its own grace, then exits); SIGKILL
    it when it takes longer than `grace_s` + STOP_GRACE_S. How it ended, None without one."""
    path = supervisor_pidfile(layout)
    pid = running_pid(path)
    if not pid:
        return None
    try:
        return detached.stop(pid, grace_s + STOP_GRACE_S,
                             gone=lambda: running_pid(path) not in (pid, 0))
    except detached.StopError as exc:
        raise StopError(f"gateway supervisor {exc}") from None


def clean_after_kill(layout: Layout, pid: int) -> None:
    """Remove what a killed gateway could not: its socket, and its ready file while that still
    names `pid`."""
    try:
        layout.socket.unlink()
    except FileNotFoundError:
        pass
    remove_ready(layout.ready_file, pid)


def ready_pid(path: Path) -> Optional[int]:
    """The pid a ready file names, None if there is none (or it is unreadable)."""
    try:
        pid = json.loads(regularfile.read_text(path, follow=False)).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) else None


def remove_ready(path: Path, pid: Optional[int]) -> None:
    """Remove the ready file if it names `pid` (any file when pid is None: only for a caller
    holding the pidfile lock, so no live gateway can own it); a successor's is never touched."""
    if pid is not None and ready_pid(path) != pid:
        return
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        import logging  # only here: the installer, which imports this module, logs nothing else

        logging.getLogger("fleet.gateway.process").warning("cannot remove %s: %s", path, exc)


def probe(layout: Layout, timeout_s: float = 2.0) -> Optional[Dict[str, Any]]:
    """The gateway's `health` answer, None when nothing answers (or it answers an error)."""
    from fleet.gateway import client  # here: the supervisor, which imports this module, never asks

    try:
        resp = client.request(layout.socket, {"op": "health"}, timeout_s=timeout_s, retry_s=0)
    except client.ClientError:
        return None
    result = resp.get("result")
    return result if resp.get("ok") and isinstance(result, dict) else None


class Readiness(NamedTuple):
    """One judgement of a health answer: `state` is one of READY, NOT_YET, PLUGIN_FAILED,
    MISMATCH, DEAD; `reason` says why it is not READY, for the operator."""

    state: str
    reason: str = ""

    @property
    def final(self) -> bool:
        """Whether waiting longer cannot help."""
        return self.state not in (READY, NOT_YET)


def versions_problem(versions: Dict[str, Any], expect: Dict[str, str]) -> Optional[str]:
    """None when every expected plugin runs at its expected version, else what differs."""
    wrong = [f"{k} is {versions.get(k) or 'not loaded'} (want {v})"
             for k, v in sorted(expect.items()) if versions.get(k) != v]
    return ", ".join(wrong) or None


def judge(health: Optional[Dict[str, Any]], expect: Dict[str, str],
          old_pid: Optional[int] = None, release: Optional[str] = None,
          pid: Optional[int] = None) -> Readiness:
    """Is this health answer 'ready with the expected versions'?

    `old_pid`: the gateway that answered before a restart; while it answers, not yet. A known old
    pid makes any other answer the new gateway's, so a wrong version or release is final; without
    one only a plugin's load error is (the old process may still answer). `pid`: only that
    process's answer counts (a start that may lose the pidfile race). `release` (a release dir
    name) is checked when the gateway reports one, so a gateway still running an older build with
    the same version numbers is never mistaken for the new one.
    """
    if health is None:
        return Readiness(NOT_YET, "gateway does not answer")
    answering = health.get("pid")
    if old_pid is not None and answering == old_pid:
        return Readiness(NOT_YET, f"the old gateway (pid {old_pid}) is still the one answering")
    if pid is not None and answering != pid:
        return Readiness(NOT_YET, f"another gateway (pid {answering}) is answering")
    new = old_pid is not None or pid is not None
    reported = health.get("release")
    if release and isinstance(reported, str) and reported and reported != release:
        return Readiness(MISMATCH if new else NOT_YET,
                         f"gateway runs release {reported}, not {release}")
    if health.get("ready") is False:
        return Readiness(PLUGIN_FAILED, f"plugin load failed: {health.get('error') or '?'}")
    plugins = health.get("plugins") or {}
    for plugin_id, info in sorted(plugins.items()):
        if isinstance(info, dict) and (info.get("error") or info.get("loaded") is False):
            return Readiness(PLUGIN_FAILED, "plugin {} failed to load: {}".format(
                plugin_id, info.get("error") or "?"))
    wrong = versions_problem(health.get("versions") or {}, expect)
    if wrong:
        return Readiness(MISMATCH if new else NOT_YET, f"gateway reports {wrong}")
    return Readiness(READY)


class NotReady(RuntimeError):
    """`wait_ready` gave up: `readiness` is the final answer (or the last one, at the timeout)."""

    def __init__(self, message: str, readiness: Readiness) -> None:
        super().__init__(message)
        self.readiness = readiness


def wait_ready(probe_fn: Callable[[], Optional[Dict[str, Any]]], expect: Dict[str, str],
               timeout_s: float, old_pid: Optional[int] = None, release: Optional[str] = None,
               pid: Optional[int] = None,
               exited: Callable[[], Optional[str]] = lambda: None,
               now: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> Dict[str, Any]:
    """Poll `probe_fn` until `judge` says ready and return that health answer.

    Raises NotReady at once on a final answer or when `exited()` names why the started process
    is gone, and after `timeout_s` while it is still "not yet". A gateway is ready in ~0.1-0.2 s:
    look often at first, then back off. `now`/`sleep`: the clock waited on (the installer's
    machine, fleet.installer.machine: a simulated host's in lab/sim).
    """
    started = now()
    deadline = started + timeout_s
    while True:
        health = probe_fn()
        verdict = judge(health, expect, old_pid, release, pid)
        if verdict.state == READY and health is not None:
            return health
        if verdict.final:
            raise NotReady(verdict.reason, verdict)
        gone = exited()
        if gone:
            raise NotReady(gone, Readiness(DEAD, gone))
        at = now()
        if at >= deadline:
            raise NotReady(f"not ready within {timeout_s:.0f}s: {verdict.reason}", verdict)
        sleep(0.02 if at - started < 2.0 else 0.2)
