"""The host's deploy lock: one installer changes a host at a time, and a dead one never blocks.

`<state>/fleet/deploy.lock` holds JSON `{owner, pid, host, time, lease, token, boot_id, start}`.
It is created with O_EXCL. A lock whose owner process is gone (same host: pid not alive, or the
pid now belongs to another process because its start time differs, or the host rebooted since:
`boot_id` differs; both from /proc where it exists) or whose lease has expired is taken over:
the stale file is renamed aside first (only one contender's rename can succeed), then a fresh
one is created, and the takeover is reported with the old holder. A live holder refuses with
its owner, pid, host and age, so the operator knows whom to ask.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Optional

from fleet.continuity import ids
from fleet.continuity.private import NotRegularFile, open_regular
from fleet.continuity.statelayout import StateLayout
from fleet.installer import machine

DEFAULT_LEASE_S = 900.0


class LockHeld(RuntimeError):
    """A live installer holds the lock."""

    def __init__(self, holder: dict):
        self.holder = holder
        age = machine.current().time() - float(holder.get("time", 0) or 0)
        super().__init__(
            "deploy lock held by {} (pid {} on {}, {:.0f}s ago, lease {}s); wait for it to finish "
            "or, if it is stuck, stop that process".format(
                holder.get("owner", "?"), holder.get("pid", "?"), holder.get("host", "?"),
                age, holder.get("lease", "?")))


def lock_path(state_dir: Path) -> Path:
    return StateLayout(state_dir).lock


def read_holder(state_dir: Path) -> Optional[dict]:
    """The current lock content, or None when unlocked (an unreadable lock counts as stale)."""
    path = lock_path(state_dir)
    try:
        fd = open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except NotRegularFile as exc:  # a FIFO there hung every installer; a symlink could redirect
        raise RuntimeError(f"deploy lock {path} is not a regular file ({exc.strerror or exc}); "
                           "remove it by hand after checking who put it there") from exc
    except OSError:
        return {"owner": "?", "pid": 0, "host": "?", "time": 0, "lease": 0}
    try:
        with os.fdopen(fd, "r", encoding="utf-8") as fh:
            text = fh.read(65536)
    except (OSError, UnicodeDecodeError):
        return {"owner": "?", "pid": 0, "host": "?", "time": 0, "lease": 0}
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return {"owner": "?", "pid": 0, "host": "?", "time": 0, "lease": 0, "corrupt": True}
    return data


def boot_id() -> Optional[str]:
    """This boot's id (Linux), to tell a lock taken before a reboot; None where unknown."""
    return machine.current().boot_id()


def stale_reason(holder: dict, now: Optional[float] = None) -> Optional[str]:
    """Why this holder no longer owns the lock, or None if it is live."""
    host = machine.current()
    now = host.time() if now is None else now
    if holder.get("corrupt"):
        return "lock file unreadable"
    try:
        started = float(holder.get("time", 0))
        lease = float(holder.get("lease", 0))
    except (TypeError, ValueError):
        return "lock file has bad time/lease"
    if started + lease < now:
        return "lease expired"
    if holder.get("host") == host.hostname():
        try:
            pid = int(holder.get("pid", 0))
        except (TypeError, ValueError):
            pid = 0
        if not host.alive(pid):
            return f"owner process {pid} is gone"
        if holder.get("boot_id") and boot_id() and holder["boot_id"] != boot_id():
            return f"host rebooted since owner process {pid} took the lock"
        if holder.get("start") and host.start_time(pid) not in (None, holder["start"]):
            return f"owner process {pid} is gone (pid now used by another process)"
    return None


class DeployLock:
    """Acquire with `acquire()`, release with `release()`; `takeover` says whom we displaced."""

    def __init__(self, state_dir: Path, owner: str, lease_s: float = DEFAULT_LEASE_S):
        self.state_dir = state_dir
        self.owner = owner
        self.lease_s = lease_s
        self.token = ids.uuid4_hex()
        self.takeover: Optional[dict] = None
        self.held = False

    def _content(self) -> dict:
        host = machine.current()
        return {"owner": self.owner, "pid": host.pid(), "host": host.hostname(),
                "time": host.time(), "lease": self.lease_s, "token": self.token,
                "boot_id": host.boot_id(), "start": host.start_time(host.pid())}

    def acquire(self, wait_s: float = 0.0) -> None:
        """Take the lock; while a live holder has it, retry for up to `wait_s` seconds."""
        host = machine.current()
        deadline = host.monotonic() + max(0.0, wait_s)
        while True:
            try:
                return self._acquire_once()
            except LockHeld:
                if host.monotonic() >= deadline:
                    raise
                host.sleep(0.25)

    def _acquire_once(self) -> None:
        path = lock_path(self.state_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            try:
                fd = open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except OSError as exc:
                if exc.errno != errno.EEXIST:
                    raise
                holder = read_holder(self.state_dir)
                if holder is None:
                    continue
                reason = stale_reason(holder)
                if reason is None:
                    raise LockHeld(holder) from None
                aside = path.with_name(f"deploy.lock.stale-{self.token}")
                try:
                    os.rename(str(path), str(aside))
                except FileNotFoundError:
                    continue  # someone else took it over first; contend again
                try:
                    os.unlink(str(aside))
                except OSError:
                    pass
                holder.pop("token", None)
                self.takeover = dict(holder, reason=reason)
                continue
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(json.dumps(self._content(), sort_keys=True))
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError:  # e.g. a full disk: never leave an empty lock behind
                try:
                    os.unlink(str(path))
                except OSError:
                    pass
                raise
            self.held = True
            return
        raise RuntimeError(f"could not take the deploy lock {path} after 5 attempts")

    def still_mine(self) -> bool:
        """False if another installer took the lock over (our lease expired while we hung)."""
        holder = read_holder(self.state_dir)
        return bool(holder) and holder.get("token") == self.token

    def release(self) -> None:
        if self.held and self.still_mine():
            try:
                os.unlink(str(lock_path(self.state_dir)))
            except FileNotFoundError:
                pass
        self.held = False
