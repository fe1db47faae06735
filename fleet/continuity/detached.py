"""Detached child processes: started in their own session, recorded in a pidfile, found again
later by another process, stopped gracefully, their log's tail read back for error messages.

fleet starts three kinds and finds each again from another process: its own gateway (which also
holds its pidfile's lock for its whole life: fleet/gateway/pidfile.py), OpenClaw's gateway on
hosts without a service (`openclaw gateway run`, supervised by the installer), and the checkout's
scripted model. This module is the one owner of how: the rest call it.

- **The pidfile** (one format for all): one line of JSON, `{"pid": N, "started": T, "argv":
  [...]}`, `T` the process's start time in clock ticks since boot where /proc tells it (else
  null), so a pid reused after a crash is never taken for the recorded process. A gateway of an
  older release wrote a bare pid; that is still read.
- **Alive** means: the pid exists, is not a zombie (an exited child its parent has not reaped
  yet; an init that reaps late keeps one for seconds), and started at `T` when that is known.
- **Stop**: SIGTERM, wait until it is gone, SIGKILL after the grace period (to its whole group
  for a process that starts helpers in its session), wait again, a StopError if it survives.
  "Gone" is the caller's test where it has a better one (the gateway's pidfile lock, released
  the moment it exits), else `alive()`.

Standard library only, Python 3.9+, no imports from fleet (it sits at the bottom of the host
side, below the continuity code's own temp-file sweeper).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

from fleet.continuity import regularfile

POLL_S = 0.01
KILL_WAIT_S = 5.0
TAIL_BYTES = 64 * 1024  # of a log, the most shown in an error message


class StopError(RuntimeError):
    """The process could not be stopped: it survived SIGKILL."""


def _stat_fields(pid: int) -> Optional[List[bytes]]:
    """/proc/<pid>/stat fields from field 3 (state) on, or None where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> Optional[str]:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    fields = _stat_fields(pid)
    try:
        return fields[19].decode() if fields else None
    except IndexError:
        return None


def alive(pid: int, started: Optional[str] = None) -> bool:
    """Whether `pid` runs (a zombie does not), and is the process that started at `started`
    when that is given and /proc can tell."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    fields = _stat_fields(pid)
    if fields is None:
        return True
    if fields[0] == b"Z":
        return False
    return started is None or len(fields) < 20 or fields[19].decode() == started


class PidRecord:
    """What a pidfile holds: the pid, its start time (None: unknown), the command line."""

    __slots__ = ("pid", "started", "argv")

    def __init__(self, pid: int, started: Optional[str] = None,
                 argv: Optional[List[str]] = None) -> None:
        self.pid = pid
        self.started = started
        self.argv: List[str] = [] if argv is None else argv

    @classmethod
    def of(cls, pid: int, argv: List[str]) -> PidRecord:
        return cls(pid, start_time(pid), [str(a) for a in argv])

    def line(self) -> str:
        return json.dumps({"pid": self.pid, "started": self.started, "argv": self.argv}) + "\n"

    @classmethod
    def parse(cls, text: str) -> Optional[PidRecord]:
        """The record in `text` (a JSON line, or the bare pid older gateways wrote), or None."""
        text = text.strip()
        if text.isdigit():
            return cls(int(text))
        try:
            data = json.loads(text)
            pid = int(data["pid"])
        except (ValueError, KeyError, TypeError):
            return None
        started = data.get("started")
        argv = data.get("argv")
        return cls(pid, str(started) if started is not None else None,
                   [str(a) for a in argv] if isinstance(argv, list) else [])

    def running(self) -> bool:
        return alive(self.pid, self.started)


def write_pidfile(path: Path, record: PidRecord) -> None:
    """`record` into `path` atomically (temp file + rename, mode 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(record.line())
    os.replace(str(tmp), str(path))


def read_pidfile(path: Path) -> Optional[PidRecord]:
    try:
        return PidRecord.parse(regularfile.read_text(path, follow=False))
    except (OSError, UnicodeDecodeError):
        return None


def recorded_pid(path: Path) -> Optional[int]:
    """The pid `path` records when that process still runs (and is the one recorded)."""
    record = read_pidfile(path)
    return record.pid if record is not None and record.running() else None


class Child:
    """A process started detached: its own session (so it and its helpers form one group),
    stdin from /dev/null, output appended to `log`. Knows where its log output began."""

    def __init__(self, argv: List[str], log: Path, env: Optional[Dict[str, str]] = None,
                 cwd: Union[str, Path, None] = None, pidfile: Optional[Path] = None) -> None:
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.log_from = log.stat().st_size
        except OSError:
            self.log_from = 0
        with open(str(log), "ab") as out, open(os.devnull, "rb") as devnull:
            self.proc = subprocess.Popen([str(a) for a in argv], stdin=devnull, stdout=out,
                                         stderr=out, close_fds=True, start_new_session=True,
                                         cwd=None if cwd is None else str(cwd), env=env)
        self.pid = self.proc.pid
        if pidfile is not None:
            write_pidfile(pidfile, PidRecord.of(self.pid, argv))

    def exit_code(self) -> Optional[int]:
        """Its exit code once it exited (and was reaped here), None while it runs."""
        return self.proc.poll()

    def log_tail(self, lines: int = 12) -> str:
        return log_tail(self.log, self.log_from, lines)

    def stop(self, grace_s: float, group: bool = False) -> str:
        """Stop it (see `stop`), judging "gone" by its own exit status."""
        return stop(self.pid, grace_s, group=group, gone=lambda: self.proc.poll() is not None)


def stop(pid: int, grace_s: float, *, group: bool = False,
         gone: Optional[Callable[[], bool]] = None, kill_wait_s: float = KILL_WAIT_S,
         poll_s: float = POLL_S) -> str:
    """SIGTERM `pid`, wait until `gone()` (default: not `alive`), SIGKILL after `grace_s`.
    Returns "gone" (it was not there), "terminated" or "killed"; StopError when it outlives
    SIGKILL by `kill_wait_s`. `group`: the process leads a group of helpers; SIGTERM still goes
    to it alone (it shuts its helpers down itself), but SIGKILL goes to the whole group, and so
    does a last SIGKILL for stragglers once it is gone."""
    check = gone or (lambda: not alive(pid))
    if not _signal(pid, signal.SIGTERM, False):
        return "gone"
    how = "terminated"
    if not _wait(check, grace_s, poll_s):
        _signal(pid, signal.SIGKILL, group)
        how = "killed"
        if not _wait(check, kill_wait_s, poll_s):
            raise StopError(f"pid {pid} survived SIGKILL for {kill_wait_s:.0f}s")
    if group:
        _signal(pid, signal.SIGKILL, True)
    return how


def _signal(pid: int, sig: int, group: bool) -> bool:
    """Send `sig`; False when there is no such process (or group)."""
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return group  # a group with a member we may not signal: the leader was signalled
    return True


def _wait(done: Callable[[], bool], seconds: float, poll_s: float) -> bool:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def log_tail(path: Path, offset: int, lines: int) -> str:
    """The last `lines` lines written to `path` since `offset`, framed for an error message
    ("" when there are none): what a process said before it failed."""
    try:
        with os.fdopen(regularfile.open_regular(path), "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(offset, size - TAIL_BYTES))  # only the end is shown
            text = fh.read(TAIL_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
    tail = "\n".join(text.strip().splitlines()[-lines:])
    return f"\n--- {path} (tail) ---\n{tail}" if tail else ""
