"""One host's install / rollback / restart as a transaction, plus read-only status.

Why one process: the control side makes one call per host, and everything that must not be torn
(lock, hash check, unpack, atomic switch, restart, readiness, the plugins' self-tests,
switch-back, audit) happens here,
so a dropped ssh connection can never leave a half-switched host. Each step is timed (the JSON
result carries `steps`), announced on stderr as `{"step": name}` for live progress once it lasts
(fleet.installer.announcer), and passes the fault seam (`faults.check`).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import socket
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, Optional

from fleet.continuity import regularfile
from fleet.continuity.statelayout import StateLayout, release_name
from fleet.gateway import process
from fleet.installer import audit, faults, machine, releasedirs, removal, selftest
from fleet.installer.lock import (
    DEFAULT_LEASE_S,
    DeployLock,
    LockHeld,
    read_holder,
    stale_reason,
)
from fleet.installer.manager import Manager, ManagerError
from fleet.installer.protocol import READY_TIMEOUT_S, release_summary
from fleet.installer.releasedirs import UnusableRelease


def cpu_s() -> float:
    """CPU seconds (user + sys) of this process and the children it waited for: what the host
    paid for this installer so far (its `cpu_s` answer: per step, and `process` in all)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def describe(exc: BaseException) -> str:
    """Our own errors speak for themselves; anything else also names its type."""
    if isinstance(exc, (UnusableRelease, faults.InjectedFault, ManagerError)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def default_owner() -> str:
    import getpass  # only without --owner (the control side always names one)

    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def expected_versions(meta: dict, extra: Dict[str, str]) -> Dict[str, str]:
    """Versions the gateway must report: components that are plugins here, plus --expect."""
    plugins = meta.get("plugins") or {}
    want = {k: str(v) for k, v in (meta.get("components") or {}).items() if k in plugins}
    want.update(extra)
    return want


class Transaction:
    """Shared machinery: timed steps, lock, restart + readiness, audit."""

    def __init__(self, state_dir: Path, manager: Manager, owner: str, timeout: float,
                 lease_s: float, action: str, lock_wait: float = 0.0):
        self.lock_wait = lock_wait
        self.state_dir = state_dir
        self.manager = manager
        self.owner = owner
        self.timeout = timeout
        self.host = machine.current()  # the machine's clock and name (a simulated host's)
        self.started = self.host.monotonic()
        self.news = self.host.step_announcer()
        self.lock = DeployLock(state_dir, owner, lease_s)
        self.notes = []
        self.result = {"action": action, "host": self.host.hostname(), "ok": False,
                       "result": "failed", "state_dir": str(state_dir), "owner": owner,
                       "steps": {}, "notes": self.notes, "from": None, "to": None,
                       "reason": None, "restarted": False, "cpu_s": {}}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        self.news.begin(name)
        try:
            faults.check(self.state_dir, name)
            t0, c0 = self.host.monotonic(), cpu_s()
            try:
                yield
            finally:
                steps, cpu = self.result["steps"], self.result["cpu_s"]
                steps[name] = round(steps.get(name, 0.0) + self.host.monotonic() - t0, 4)
                cpu[name] = round(cpu.get(name, 0.0) + cpu_s() - c0, 4)
        finally:
            self.news.end()

    def take_lock(self) -> None:
        with self.step("lock"):
            self.lock.acquire(self.lock_wait)
        if self.lock.takeover:
            self.result["lock_takeover"] = self.lock.takeover
            self.notes.append("took over a stale lock from {} ({})".format(
                self.lock.takeover.get("owner"), self.lock.takeover.get("reason")))
        self.reconcile()

    def reconcile(self) -> None:
        """Make the audit log say what this host runs before this run changes anything.

        An installer killed after its switch (power cut, `kill -9`) left the host on its new
        release with no audit line for it (and its lock, just taken over); the line written
        here records the release the host was found on, so the log and `current` agree again.
        Best effort: a log that cannot be written (full disk) must not block the deploy."""
        current = releasedirs.current_release(self.state_dir)
        running = current.name if current is not None else None
        known, recorded = audit.recorded_release(self.state_dir)
        if known and recorded == running:
            return
        dead = self.lock.takeover
        why = ("an installer stopped before recording its outcome" + (
            " ({}, {})".format(dead.get("owner"), dead.get("reason")) if dead else ""))
        entry = {"time": self.utc_now(),
                 "who": self.owner, "host": self.result["host"], "action": "reconcile",
                 "result": "reconciled", "from": recorded if known else None,
                 "to": running, "reason": why, "duration_s": 0.0}
        try:
            audit.append(self.state_dir, entry)
        except OSError as exc:
            self.notes.append(f"audit log not reconciled ({exc})")
            return
        self.result["reconciled"] = {"from": entry["from"], "to": running}
        self.notes.append("audit log reconciled: it recorded {}, the host runs {} ({})".format(
            (recorded or "no release") if known else "an unknown outcome",
            running or "no release", why))

    def lock_or_refuse(self) -> bool:
        """Take the lock; on failure record why (holder named) and return False."""
        try:
            self.take_lock()
        except LockHeld as exc:
            self.result.update(result="refused", reason=str(exc), lock_holder=exc.holder)
            return False
        except Exception as exc:  # e.g. no space left for the lock file
            self.result["reason"] = f"cannot take the deploy lock: {describe(exc)}"
            return False
        return True

    def restart_and_wait(self, release: Path, expect: Dict[str, str]) -> dict:
        """Restart on `release` and wait until the gateway reports `expect`; returns its health."""
        before = self.manager.probe(release)
        old_pid = before.get("pid") if before else None
        if not self.lock.still_mine():
            raise RuntimeError("lost the deploy lock (lease expired and another installer took "
                               "it over); not restarting")
        with self.step("restart"):
            self.result["restarted"] = True
            self.manager.restart(release, expect, self.timeout)
        with self.step("ready"):
            return wait_ready(self.manager, release, expect, self.timeout, old_pid)

    def gate(self, release: Path) -> None:
        """The plugins' self-tests on the new release, after readiness (step `selftest`): a
        failed one raises ManagerError naming the plugin and its check (the caller switches
        back); a release that does not know the self-test is noted `selftest: unsupported`."""
        with self.step("selftest"):
            verdict = selftest.judge(self.manager.selftest(release, self.timeout))
        self.result["selftest"] = verdict.as_dict()
        if verdict.state == selftest.FAILED:
            raise ManagerError(verdict.reason)
        if verdict.state == selftest.UNSUPPORTED:
            self.notes.append(f"selftest: unsupported ({verdict.reason})")
        elif verdict.reason:
            self.notes.append(f"selftest: passed; {verdict.reason}")

    def utc_now(self) -> str:
        """The machine's time as an audit line writes it."""
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.host.time()))

    def finish(self) -> dict:
        self.result["duration_s"] = round(self.host.monotonic() - self.started, 4)
        self.result["cpu_s"]["process"] = round(cpu_s(), 4)
        return self.result

    def record(self) -> None:
        entry = {"time": self.utc_now(),
                 "who": self.owner, "host": self.result["host"],
                 "action": self.result["action"], "result": self.result["result"],
                 "from": (self.result["from"] or {}).get("release"),
                 "to": (self.result["to"] or {}).get("release"),
                 "reason": self.result["reason"],
                 "duration_s": round(self.host.monotonic() - self.started, 4)}
        with self.step("audit"):
            if not self.lock.still_mine():  # taken over while this one hung: the host's
                # history is the new holder's now; this installer claims nothing
                self.result.update(ok=False, result="failed", reason=LOST_LOCK)
                raise NotSwitching(LOST_LOCK)
            audit.append(self.state_dir, entry)

    def switch_back(self, reason: str, failed: Optional[Path], target: Optional[Path],
                    previous: Optional[Path]) -> None:
        """Put the host back on `target` (or on no release) and check that it answers; not
        when another installer took the lock over meanwhile (the host is its to change)."""
        self.result["reason"] = reason
        if not self.lock.still_mine():
            self.result.update(ok=False, result="failed", reason=f"{reason}; {LOST_LOCK}")
            return
        t0 = self.host.monotonic()
        try:
            if target is None:
                with contextlib.suppress(ManagerError, OSError):
                    self.manager.stop(failed, self.timeout)
                releasedirs.unlink_current(self.state_dir)
                self.result.update(result="rolled_back", to=None)
                self.notes.append("first install failed: host left with no release")
                return
            releasedirs.switch(self.state_dir, target, previous, self.manager.links_extensions)
            meta = releasedirs.read_meta(target) or {}
            self.manager.restart(target, expected_versions(meta, {}), self.timeout)
            health = wait_ready(self.manager, target, expected_versions(meta, {}),
                                self.timeout, None)
            self.result.update(result="rolled_back", to=release_summary(meta), gateway=health)
        except Exception as exc:  # the rollback itself failed: say so loudly
            # and say where `current` was left (switched back or not), never the release it
            # tried to leave: the audit line and the report must name what the host runs
            left = releasedirs.current_release(self.state_dir)
            self.result.update(result="failed", to=release_summary(releasedirs.read_meta(left)))
            self.result["reason"] = f"{reason}; rollback also failed: {exc}"
        finally:
            self.result["steps"]["rollback"] = round(self.host.monotonic() - t0, 4)


def wait_ready(manager: Manager, release: Path, expect: Dict[str, str], timeout: float,
               old_pid: Optional[int]) -> dict:
    """Wait until the gateway answers from `release` with `expect` (fleet.gateway.process.
    wait_ready): a plugin error, a wrong version or release from a new gateway, or a gateway that
    died fails at once (no 60 s wait before rollback); the error carries the gateway's log."""
    host = machine.current()
    try:
        return process.wait_ready(lambda: manager.probe(release), expect, timeout, old_pid,
                                  release.name, exited=manager.failure, now=host.monotonic,
                                  sleep=host.sleep)
    except process.NotReady as exc:
        tail = "" if exc.readiness.state == process.DEAD else manager.log_tail()
        raise ManagerError(f"{exc}{tail}") from None


def install(state_dir: Path, artifact: Path, sha256: str, manager: Manager, owner: str,
            expect: Dict[str, str], force: bool = False, timeout: float = READY_TIMEOUT_S,
            keep: int = 5, lease_s: float = DEFAULT_LEASE_S, lock_wait: float = 0.0,
            allow_unproven: bool = False, fleet_run: Optional[str] = None,
            give_back: bool = False) -> dict:
    """Lock, verify, unpack, switch, restart, wait ready; switch back on failure; audit; prune.
    `allow_unproven`: go ahead on a gateway the release was not proven on (Manager.preflight);
    `fleet_run`: switch only while that deploy run holds the host's fleet lease; `give_back`:
    then give that lease back when done (protocol.LEASE_GIVE_BACK_ENV)."""
    tx = Transaction(state_dir, manager, owner, timeout, lease_s, "install", lock_wait)
    res = tx.result
    try:
        if not tx.lock_or_refuse():
            return tx.finish()
        try:
            return _install_locked(tx, artifact, sha256, expect, force, keep, allow_unproven,
                                   fleet_run)
        except Exception as exc:  # always answer with JSON; the lock is released below
            res["reason"] = res["reason"] or describe(exc)
            return tx.finish()
        finally:
            tx.lock.release()
    finally:
        if give_back and fleet_run is not None and give_back_lease(state_dir, fleet_run):
            res["lease_given_back"] = True


def give_back_lease(state_dir: Path, fleet_run: str) -> bool:
    """Remove the host's fleet lease if run `fleet_run` holds it (as the lease's `release`
    does); True when it is not there afterwards."""
    path = StateLayout(state_dir).lease
    try:
        data = json.loads(regularfile.read_text(path, follow=False))
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("run") != fleet_run:
        return False  # another run's (ours expired and was taken over): not ours to remove
    try:
        os.unlink(str(path))
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


LOST_LOCK = ("lost the host lock while this installer was held up (its lease ran out and "
             "another installer took it over); what it did is superseded, nothing recorded")


class NotSwitching(RuntimeError):
    """Checked as the switch begins: this installer may no longer change the host (nothing
    was changed)."""


def _may_switch(tx: Transaction, fleet_run: Optional[str], what: str) -> None:
    """Raise NotSwitching unless this installer still holds the host lock and, with
    `fleet_run`, that run still holds the host's fleet lease. Called inside the switch step,
    right before the switch: a pause before it (a hung or stopped process) is then followed by
    the check, never by a switch its run gave up on."""
    if not tx.lock.still_mine():
        raise NotSwitching("lost the deploy lock (lease expired and another installer took it "
                           "over); not switching")
    if fleet_run is not None and fleet_lease_run(tx.state_dir) != fleet_run:
        # its run gave up on this host (a hang, a dropped connection) and released the host,
        # or the lease expired: another run may be changing the fleet now
        raise NotSwitching(f"the {what} run that started this no longer holds this host's "
                           "fleet lease (it gave up on the host); not switching")
    faults.check(tx.state_dir, "commit")  # the change point itself (fleet.installer.faults)


def fleet_lease_run(state_dir: Path) -> Optional[str]:
    """The run id of the host's fleet lease (`<state>/fleet/run.lease`) while it is held: taken
    less than its `lease` seconds ago by this host's clock. None without a live one: a run whose
    lease ran out is dead or gave up, and its installer must not switch after it."""
    try:
        data = json.loads(regularfile.read_text(StateLayout(state_dir).lease, follow=False))
        taken = float(data.get("time") or 0)
        alive = machine.current().time() - taken < float(data.get("lease") or 0)
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    return data.get("run") if alive else None


def _install_locked(tx: Transaction, artifact: Path, sha256: str, expect: Dict[str, str],
                    force: bool, keep: int, allow_unproven: bool,
                    fleet_run: Optional[str] = None) -> dict:
    state_dir, res = tx.state_dir, tx.result
    with tx.step("verify"):
        releasedirs.verify_artifact(artifact, sha256)
        manifest = releasedirs.read_artifact_manifest(artifact)
    current = releasedirs.current_release(state_dir)
    previous = releasedirs.previous_release(state_dir)
    res["from"] = release_summary(releasedirs.read_meta(current))
    name = release_name(str(manifest["version"]), sha256)
    if current is not None and current.name == name and not force:
        want = expected_versions(releasedirs.read_meta(current) or {}, expect)
        health = tx.manager.probe(current)
        if process.judge(health, want, release=current.name).state == process.READY:
            # Nothing to change, but the gateway may have been updated since (`openclaw
            # update`): a deploy still says whether the release was proven on it.
            with tx.step("compat"):
                refusal, notes = tx.manager.preflight(artifact, allow_unproven)
            tx.notes.extend(notes)
            if refusal:
                res.update(result="refused", gateway=health,
                           reason=f"{current.name} is active and ready here, but {refusal}")
            else:
                res.update(ok=True, result="unchanged", to=res["from"], gateway=health)
            tx.record()
            return tx.finish()
    with tx.step("compat"):  # whether this host's gateway can take it, before any change
        refusal, notes = tx.manager.preflight(artifact, allow_unproven)
        refusal = refusal or tx.manager.before_change()
    tx.notes.extend(notes)
    if refusal:
        res.update(result="refused", reason=refusal)
        tx.record()
        return tx.finish()
    with tx.step("unpack"):
        release = releasedirs.unpack(state_dir, artifact, sha256, manifest,
                                     tx.manager.shares_release_files)
    meta = releasedirs.read_meta(release) or {}
    want = expected_versions(meta, expect)
    if current != release:
        back_to, back_prev = current, previous
    else:  # converging a host already switched to this release (e.g. killed mid-deploy)
        back_to = previous if previous is not None and previous != release else None
        back_prev = None
    try:
        with tx.step("switch"):
            _may_switch(tx, fleet_run, "deploy")
            tx.notes.extend(releasedirs.switch(state_dir, release, current,
                                             tx.manager.links_extensions))
        health = tx.restart_and_wait(release, want)
        tx.gate(release)
        # Same release as before (--force, or its gateway was down): a restart, not an install
        res.update(ok=True, result="restarted" if current == release else "installed",
                   to=release_summary(meta), gateway=health)
        tx.record()
    except NotSwitching:
        raise
    except Exception as exc:
        if res["ok"]:
            res["ok"] = False
        if back_to is None and current == release:
            res["reason"] = str(exc)
            res.update(result="failed", to=release_summary(meta))
        else:
            tx.switch_back(str(exc), release, back_to, back_prev)
        with contextlib.suppress(Exception):
            tx.record()
        return tx.finish()
    try:
        with tx.step("prune"):
            removed = releasedirs.prune(state_dir, keep)
        if removed:
            res["pruned"] = removed
    except Exception as exc:  # housekeeping: the release is live and recorded
        tx.notes.append(f"prune failed: {exc}")
    return tx.finish()


def rollback(state_dir: Path, manager: Manager, owner: str, to: Optional[str] = None,
             timeout: float = READY_TIMEOUT_S, lease_s: float = DEFAULT_LEASE_S,
             lock_wait: float = 0.0, fleet_run: Optional[str] = None) -> dict:
    """Switch to `to` (version, dir name or SHA prefix) or the previous release, verified;
    with `fleet_run`, only while that run still holds the host's fleet lease (as install)."""
    tx = Transaction(state_dir, manager, owner, timeout, lease_s, "rollback", lock_wait)
    res = tx.result
    if not tx.lock_or_refuse():
        return tx.finish()
    keep_lock = False
    try:
        current = releasedirs.current_release(state_dir)
        res["from"] = release_summary(releasedirs.read_meta(current))
        if to:
            target = releasedirs.find_release(state_dir, to)
        else:
            target = _previous_release(state_dir, current)
        meta = releasedirs.read_meta(target) or {}
        if target == current:  # nothing to go back to: say so, touch nothing
            res.update(ok=True, result="unchanged", to=res["from"])
            tx.notes.append(f"{target.name} is the current release already; nothing changed")
            with contextlib.suppress(Exception):
                tx.record()
            return tx.finish()
        try:
            with tx.step("switch"):
                _may_switch(tx, fleet_run, "rollback")
                releasedirs.switch(state_dir, target, current, manager.links_extensions)
            health = tx.restart_and_wait(target, expected_versions(meta, {}))
            res.update(ok=True, result="rolled_back", to=release_summary(meta), gateway=health)
        except NotSwitching as exc:
            res.update(result="refused", to=res["from"], reason=str(exc))
            with contextlib.suppress(Exception):
                tx.record()
            return tx.finish()
        except Exception as exc:
            tx.switch_back(str(exc), target, current, None)
            res["result"] = "failed"
        try:
            tx.record()
        except NotSwitching:
            pass  # not ours any more: nothing to keep
        except Exception as exc:  # the log now disagrees with the host: leave the lock, whose
            # next holder reconciles the log (Transaction.reconcile) before changing anything
            keep_lock = True
            tx.notes.append(f"audit line not written ({describe(exc)}); the lock stays so the "
                            "next run reconciles the audit log")
    except Exception as exc:  # always answer with JSON; the lock is released below
        res["reason"] = res["reason"] or describe(exc)
    finally:
        if not keep_lock:
            tx.lock.release()
    return tx.finish()


def _previous_release(state_dir: Path, current: Optional[Path]) -> Path:
    previous = releasedirs.previous_release(state_dir)
    if previous is not None and previous != current:
        return previous
    for rel in releasedirs.list_releases(state_dir):
        if rel != current:
            return rel
    raise UnusableRelease("nothing to roll back to under {}: only {} is installed".format(
        StateLayout(state_dir).releases_dir, current.name if current else "no release"))


def _on_current(state_dir: Path, manager: Manager, owner: str, action: str, timeout: float,
                lease_s: float, lock_wait: float,
                change: Callable[[Transaction, Optional[Path], dict], None],
                audited: bool = True) -> dict:
    """A change to the gateway of the current release (restart, stop, remove): under the host
    lock, `change(tx, current, meta)` fills the result; an error it raises (the manager's, an
    injected fault) is the answer's reason; always JSON, and an audit line unless not
    `audited` (a remove deletes the log)."""
    tx = Transaction(state_dir, manager, owner, timeout, lease_s, action, lock_wait)
    res = tx.result
    if not tx.lock_or_refuse():
        return tx.finish()
    try:
        current = releasedirs.current_release(state_dir)
        meta = releasedirs.read_meta(current) or {}
        res["from"] = res["to"] = release_summary(meta) if meta else None
        try:
            change(tx, current, meta)
        except (ManagerError, faults.InjectedFault, OSError, RuntimeError) as exc:
            res["reason"] = str(exc)
        if audited or (not res["ok"] and releasedirs.current_release(state_dir)):
            with contextlib.suppress(Exception):
                tx.record()
    except Exception as exc:  # always answer with JSON; the lock is released below
        res["reason"] = res["reason"] or describe(exc)
    finally:
        tx.lock.release()
    return tx.finish()


def restart(state_dir: Path, manager: Manager, owner: str, timeout: float = READY_TIMEOUT_S,
            lease_s: float = DEFAULT_LEASE_S, lock_wait: float = 0.0) -> dict:
    """Restart the gateway on the current release and wait until it reports its versions."""
    def change(tx: Transaction, current: Optional[Path], meta: dict) -> None:
        if current is None:
            raise UnusableRelease(f"no release installed under {state_dir}; deploy first")
        health = tx.restart_and_wait(current, expected_versions(meta, {}))
        tx.result.update(ok=True, result="restarted", gateway=health)

    return _on_current(state_dir, manager, owner, "restart", timeout, lease_s, lock_wait,
                       change)


def stop(state_dir: Path, manager: Manager, owner: str, timeout: float = READY_TIMEOUT_S,
         lease_s: float = DEFAULT_LEASE_S, lock_wait: float = 0.0) -> dict:
    """Stop the gateway through its manager and leave it stopped (Kamal's `app stop`): the
    release stays active; `start`, `restart` or a deploy starts it again. Refused, changing
    nothing, where the manager cannot stop it for good (`Manager.stoppable`)."""
    def change(tx: Transaction, current: Optional[Path], meta: dict) -> None:
        if _stopped_for_good(tx, manager, current, timeout):
            tx.result.update(ok=True, result="stopped")

    return _on_current(state_dir, manager, owner, "stop", timeout, lease_s, lock_wait, change)


def _stopped_for_good(tx: Transaction, manager: Manager, current: Optional[Path],
                      timeout: float) -> bool:
    """Stop the gateway through its manager (step `stop`) and check it no longer answers; False
    with the result saying why where the manager cannot stop it for good (refused) or it still
    answers."""
    why = manager.stoppable()
    if why:
        tx.result.update(result="refused", reason=why)
        return False
    with tx.step("stop"):
        manager.stop(current, timeout)
    health = manager.probe(current)
    if health is not None and (health.get("pid") or health.get("ready")):
        tx.result["reason"] = f"the gateway still answers after the stop: {health}"
        return False
    return True


def remove(state_dir: Path, manager: Manager, owner: str, timeout: float = READY_TIMEOUT_S,
           lease_s: float = DEFAULT_LEASE_S, lock_wait: float = 0.0) -> dict:
    """Take fleet off this host (Kamal's `remove`): stop the gateway, make it load none of
    fleet's plugins (OpenClaw: their entries out of openclaw.json, validated), then delete
    fleet's releases, artifacts, audit log, run files and logs (fleet/installer/removal.py).
    What the agents wrote stays. Refused, changing nothing, where the gateway cannot be
    stopped for good; a step that fails leaves the host installed (removal is the last)."""
    def change(tx: Transaction, current: Optional[Path], meta: dict) -> None:
        if not _stopped_for_good(tx, manager, current, timeout):
            return  # refused, or it still answers: nothing was removed
        with tx.step("unconfigure"):
            tx.result["config_changed"] = manager.unconfigure(current)
        if not tx.lock.still_mine():
            raise NotSwitching(LOST_LOCK)
        with tx.step("remove"):
            tx.result["removed"] = removal.remove(state_dir)
        tx.result.update(ok=True, result="removed", to=None)

    return _on_current(state_dir, manager, owner, "remove", timeout, lease_s, lock_wait, change,
                       audited=False)


def start(state_dir: Path, manager: Manager, owner: str, timeout: float = READY_TIMEOUT_S,
          lease_s: float = DEFAULT_LEASE_S, lock_wait: float = 0.0) -> dict:
    """Start a stopped gateway on the current release and wait until it is ready (Kamal's
    `app start`); one already ready is left alone (`result: running`)."""
    current = releasedirs.current_release(state_dir)
    meta = releasedirs.read_meta(current) if current is not None else None
    if meta:
        health = manager.probe(current)
        if process.judge(health, expected_versions(meta, {}),
                         release=current.name).state == process.READY:
            summary = release_summary(meta)
            return {"action": "start", "ok": True, "result": "running", "from": summary,
                    "to": summary, "gateway": health, "restarted": False,
                    "host": machine.current().hostname(), "state_dir": str(state_dir),
                    "owner": owner, "steps": {}, "notes": [], "reason": None,
                    "duration_s": 0.0}
    result = restart(state_dir, manager, owner, timeout, lease_s, lock_wait)
    result["action"] = "start"
    if result.get("result") == "restarted":
        result["result"] = "started"
    return result


def status(state_dir: Path, manager: Manager) -> dict:
    """What runs here: releases, gateway health, readiness, the plugins' hook statistics, lock
    holder, last audit entry."""
    current = releasedirs.current_release(state_dir)
    meta = releasedirs.read_meta(current)
    health = manager.probe(current)
    holder = read_holder(state_dir)
    if holder is not None:
        holder = dict(holder, stale=stale_reason(holder))
        holder.pop("token", None)
    problem = (process.judge(health, expected_versions(meta, {}), release=current.name).reason
               if meta and current is not None else "not installed") or None
    last = audit.last_entry(state_dir)
    if problem and isinstance(last, dict) and last.get("action") == "stop" and \
            last.get("result") == "stopped":
        problem = (f"stopped by {last.get('who')} at {last.get('time')} (fleet stop); fleet start "
                   "starts it")
    answer = {"action": "status", "ok": True, "result": "status",
              "host": machine.current().hostname(),
              "state_dir": str(state_dir), "current": release_summary(meta),
              "previous": release_summary(releasedirs.read_meta(
                  releasedirs.previous_release(state_dir))),
              "releases": [r.name for r in releasedirs.list_releases(state_dir)],
              "gateway": health, "ready": problem is None, "problem": problem,
              "lock": holder, "last_audit": last,
              "disk_free_bytes": _disk_free(state_dir)}
    answer["hooks"] = manager.hook_stats(current, health)
    support = manager.support(current, health)
    if support is not None:
        answer["openclaw_support"] = support
    supervised = manager.supervision()
    if supervised is not None:
        answer["supervisor"] = supervised
    return answer


def _disk_free(state_dir: Path) -> Optional[int]:
    try:
        return shutil.disk_usage(str(state_dir)).free
    except OSError:
        return None
