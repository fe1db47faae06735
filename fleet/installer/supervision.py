"""The `fleet` manager's supervisor: the gateway it started comes back when it dies, as systemd's
`Restart=on-failure` brings a unit back.

Before, `installed, ok` meant "was ready when checked": a gateway that crashed (or was killed by
the OOM killer) after a deploy stayed down until the next deploy. Now the fleet manager starts
`python -m fleet.installer supervise --state-dir D`, a small process that runs the gateway
as a forked child (`fork_gateway`: what `fleet.gateway.process.command` runs, without a second
interpreter start) and holds `<state>/run/supervisor.pid`
(fleet.gateway.process owns that path and stops the supervisor before the gateway).

- A gateway that exits with a failure (non-zero, or a signal) after it was ready is started
  again after a backoff: 1 s, then doubled each quick failure up to BACKOFF_MAX_S; a run of
  STEADY_S or more resets it. Each restart is an audit line (`action: supervise`, result
  `restarted`, why and after how long) and is counted in `<state>/run/supervisor.json`, which
  `status` and `doctor` read.
- A gateway that exits cleanly (0: `fleet.gateway stop` or a `shutdown`) is not restarted:
  the operator stopped it. The supervisor ends with it.
- A gateway that dies before it was ever ready is not restarted either: the deploy that started
  it decides (it rolls back). The supervisor exits with the gateway's code, so the installer
  names the failure at once, with the log, as it did without a supervisor.
- SIGTERM (fleet.gateway.process.stop, which every stop goes through) stops the gateway (SIGTERM,
  SIGKILL after STOP_GRACE_S) and ends the supervisor. SIGHUP is ignored.

Host side: standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from fleet.continuity import detached, regularfile
from fleet.continuity.atomicfile import atomic_write
from fleet.gateway import process
from fleet.gateway.layout import Layout
from fleet.gateway.pidfile import AlreadyRunning, PidFile, running_pid
from fleet.installer import audit

BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 60.0
STEADY_S = 60.0  # a gateway up this long was healthy: the next failure starts the backoff over
WATCH_S = 0.2  # how often the child is looked at until it is ready
WATCH_READY_S = 1.0  # and then: a failure is seen within a second
ALREADY = 75  # exit code: another supervisor holds the pidfile (a concurrent start)
STATE_NAME = "supervisor.json"  # beside the pidfile, in the run dir
STATE_MAX_BYTES = 64 * 1024


def state_path(layout: Layout) -> Path:
    return layout.run_dir / STATE_NAME


def command(python: str, state_dir: Path) -> List[str]:
    """How the fleet manager starts the supervisor (the sandbox's orphan search knows it)."""
    return [python, *process.START_FLAGS, "-m", "fleet.installer", "supervise", "--state-dir",
            str(state_dir)]


def spawned_state_dir(argv: List[str]) -> Optional[Path]:
    """The state dir when the installer's arguments are exactly what `command` passes (after
    the module), else None: such a start goes straight to the supervisor, without the CLI's
    parser and the installer's modules (fleet/installer/__main__.py)."""
    if len(argv) == 3 and argv[:2] == ["supervise", "--state-dir"] and argv[2]:
        return Path(os.path.expanduser(argv[2])).absolute()
    return None


def backoff(quick_failures: int) -> float:
    """Seconds to wait before restart number `quick_failures` (1, 2, 4 ... BACKOFF_MAX_S)."""
    return min(BACKOFF_MAX_S, BACKOFF_MIN_S * (2 ** max(0, quick_failures - 1)))


def describe_exit(code: int) -> str:
    """`exited with code 3` / `was killed by signal 9 (SIGKILL)`."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = f" ({signal.Signals(-code).name})"
    except ValueError:
        name = ""
    return f"was killed by signal {-code}{name}"


def read_state(layout: Layout) -> Dict[str, Any]:
    """The supervisor's record (`restarts`, `last_exit`, `gateway_pid`, `next_start`) with
    `running`: whether a supervisor holds the pidfile now (`restarts` 0 and no `last_exit` when
    it never wrote one)."""
    try:
        data = json.loads(regularfile.read_text(state_path(layout), STATE_MAX_BYTES,
                                                follow=False))
    except (OSError, ValueError):
        data = None
    pid = running_pid(process.supervisor_pidfile(layout))
    if not isinstance(data, dict) or (pid and data.get("pid") != pid):
        data = {"pid": pid, "restarts": 0, "last_exit": None}
    data["running"] = bool(pid)
    return data


class Started:
    """A supervisor the fleet manager started: whether it (and so its gateway) already failed."""

    __slots__ = ("layout", "child")

    def __init__(self, layout: Layout, child: detached.Child) -> None:
        self.layout = layout
        self.child = child

    def exited(self) -> Optional[str]:
        """Why the gateway is gone before it was ready, or None while it runs."""
        code = self.child.exit_code()
        if code is None:
            return None
        other = running_pid(self.layout.pidfile)
        if code == ALREADY or other:
            who = f"pid {other}" if other else "another supervisor"
            return (f"gateway already running ({who}, started concurrently); this start did "
                    "nothing")
        if code > 128:
            code = -(code - 128)
        return f"gateway {describe_exit(code)} before it was ready"

    def log_tail(self, lines: int = 12) -> str:
        return self.child.log_tail(lines)

    def abandon(self, grace_s: float = process.STOP_GRACE_S) -> None:
        """Stop a start that never became ready (the supervisor stops its gateway)."""
        if self.child.exit_code() is None:
            self.child.stop(grace_s + process.STOP_GRACE_S)


def start(layout: Layout, python: str, env: Dict[str, str]) -> Started:
    """Start the supervisor (detached, output to the gateway's log); it starts the gateway."""
    return Started(layout, detached.Child(command(python, layout.state_dir), layout.log,
                                          env=env, cwd=layout.state_dir))


class Supervisor:
    """The supervising process's loop (`python -m fleet.installer supervise`)."""

    def __init__(self, state_dir: Path) -> None:
        self.layout = Layout(state_dir)
        self.stopping = threading.Event()
        self.record: Dict[str, Any] = {"pid": os.getpid(), "since": time.time(), "restarts": 0,
                                       "last_exit": None, "gateway_pid": None,
                                       "next_start": None}

    def run(self) -> int:
        pidfile = PidFile(process.supervisor_pidfile(self.layout))
        try:
            pidfile.acquire()
        except AlreadyRunning as exc:
            print(f"fleet supervisor: {exc}", flush=True)
            return ALREADY
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: self.stopping.set())
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        quick = 0
        try:
            while True:
                child = fork_gateway(self.layout)
                began = time.monotonic()
                self._save(gateway_pid=child.pid, next_start=None)
                code, was_ready = self._watch(child)
                if code is None:  # asked to stop: the gateway was stopped
                    return 0
                up = time.monotonic() - began
                if code == 0:
                    return 0  # stopped on purpose: not a failure
                if not was_ready:
                    if running_pid(self.layout.pidfile) not in (None, child.pid):
                        return ALREADY  # lost the pidfile to a gateway started concurrently
                    return code if code > 0 else 128 - code
                if code < 0:  # killed: it cleaned nothing up
                    process.clean_after_kill(self.layout, child.pid)
                quick = 1 if up >= STEADY_S else quick + 1
                delay = backoff(quick)
                self._restarting(child.pid, code, up, delay)
                if self.stopping.wait(delay):
                    return 0
        finally:
            self._save(gateway_pid=None, next_start=None)
            pidfile.release()

    def _watch(self, child: detached.Child) -> tuple:
        """Wait for the gateway to end: (its exit code, whether it was ever ready); (None, _)
        when the supervisor was asked to stop and stopped it."""
        was_ready = False
        while True:
            code = child.exit_code()
            if code is not None:
                return code, was_ready
            if self.stopping.is_set():
                if child.stop(process.STOP_GRACE_S) == "killed":
                    process.clean_after_kill(self.layout, child.pid)
                return None, was_ready
            if not was_ready and process.ready_pid(self.layout.ready_file) == child.pid:
                was_ready = True
            self.stopping.wait(WATCH_READY_S if was_ready else WATCH_S)

    def _restarting(self, pid: int, code: int, up: float, delay: float) -> None:
        why = f"gateway (pid {pid}) {describe_exit(code)} after {up:.0f} s up"
        print(f"fleet supervisor: {why}; starting it again in {delay:.0f} s", flush=True)
        self.record["restarts"] += 1
        self.record["last_exit"] = {"pid": pid, "code": code, "why": why, "time": time.time(),
                                    "up_s": round(up, 1)}
        self._save(gateway_pid=None, next_start=time.time() + delay)
        try:
            import socket  # only for this line: a restart is rare

            release = os.path.basename(os.environ.get("FLEET_RELEASE", "")) or None
            audit.append(self.layout.state_dir, {  # the fields of the installer's own lines
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "who": "fleet supervisor", "host": socket.gethostname(),
                "action": "supervise", "result": "restarted", "from": release, "to": release,
                "reason": f"{why}; started again after {delay:.0f} s",
                "restarts": self.record["restarts"]})
        except OSError as exc:  # a full disk must not stop the gateway from coming back
            print(f"fleet supervisor: cannot write the audit log: {exc}", flush=True)

    def _save(self, **changes: Any) -> None:
        self.record.update(changes)
        if not self.layout.run_dir.is_dir():  # the state dir was removed: never recreate it
            return
        try:
            atomic_write(state_path(self.layout), json.dumps(self.record, sort_keys=True) + "\n")
        except OSError as exc:
            print(f"fleet supervisor: cannot write {state_path(self.layout)}: {exc}", flush=True)


class Forked:
    """The gateway as a fork of this supervisor (`fork_gateway`), seen as the supervisor sees a
    detached.Child: its pid, its exit code once it exited (reaped here), a stop."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._code: Optional[int] = None

    def exit_code(self) -> Optional[int]:
        if self._code is None:
            got, status = os.waitpid(self.pid, os.WNOHANG)
            if got == self.pid:
                self._code = os.waitstatus_to_exitcode(status)
        return self._code

    def stop(self, grace_s: float) -> str:
        return detached.stop(self.pid, grace_s, gone=lambda: self.exit_code() is not None)


def fork_gateway(layout: Layout) -> Forked:
    """Start the gateway as a fork of this process instead of a new interpreter: it keeps the
    modules the supervisor imported (the gateway needs them all) and skips an interpreter's
    start, about a third of a gateway start's CPU. Set up as detached.Child sets up a process
    (its own session, stdin from /dev/null, output appended to the log, cwd the state dir, no
    other descriptor: the supervisor's pidfile lock stays with the supervisor), with the
    default SIGTERM and SIGINT until the gateway sets its own (blocked across the fork, so a
    stop that comes meanwhile is not lost), and SIGHUP ignored as an exec would have kept it.
    This process has no other thread to lose at the fork."""
    log_fd = os.open(str(layout.log), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    stops = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    try:
        pid = os.fork()
        if pid == 0:  # the gateway
            _become_gateway(layout, log_fd, null_fd, stops)  # never returns
    finally:  # the supervisor's side only (the child exits inside _become_gateway)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        os.close(log_fd)
        os.close(null_fd)
    return Forked(pid)


def _become_gateway(layout: Layout, log_fd: int, null_fd: int, stops: set) -> None:
    """The forked child: set up as above, run the gateway, exit with its code (never return
    into the supervisor's code)."""
    code = 1
    try:
        os.setsid()
        os.dup2(null_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        _close_from(3)
        os.chdir(str(layout.state_dir))
        for sig in stops:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        sys.argv = process.command(sys.executable, layout.state_dir)  # what it stands for
        from fleet.gateway.__main__ import main as gateway_main

        code = gateway_main(["--state-dir", str(layout.state_dir), "run"])
    except BaseException:  # noqa: BLE001  (whatever it was, the log says it and the code is 1)
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _close_from(low: int) -> None:
    """Close every descriptor from `low` up: those /proc (or /dev/fd) lists, else up to the
    limit (a loop over a million numbers where the limit is that high)."""
    for where in ("/proc/self/fd", "/dev/fd"):
        try:
            fds = [int(name) for name in os.listdir(where) if name.isdigit()]
        except OSError:
            continue
        for fd in fds:
            if fd >= low:
                try:
                    os.close(fd)
                except OSError:  # the listing's own descriptor, already closed
                    pass
        return
    try:
        limit = int(os.sysconf("SC_OPEN_MAX"))
    except (OSError, ValueError):
        limit = 4096
    os.closerange(low, max(low, limit))


def main(state_dir: Path) -> int:
    return Supervisor(state_dir).run()
