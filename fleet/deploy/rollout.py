"""A progressive rollout: waves, a gate on every host, a bake between waves, one failure budget
for the whole rollout, and an abort that takes every host it changed back.

The per-host transaction stays in fleet.deploy.api (lease, upload, switch, readiness, the
plugins' self-test through their hooks, switch back on failure); this module decides which hosts
go when, and keeps the rollout's record:

1. Plan: the hosts are read once (`status`: the release each one runs, to return it to), cut into
   waves (fleet.deploy.waves), and the record is written before anything changes.
2. Each wave is deployed in parallel. A host that fails (its deploy, readiness or self-test)
   counts against the budget; its installer has already switched it back.
3. Between waves, `bake_s` seconds of watching every host changed so far: gateway answering,
   the rollout's release active and ready, and its plugins' hook errors and timeouts (the
   gateway's statistics) not rising by more than `max_hook_errors`. A host that fails the watch
   counts against the budget, once.
4. When failures exceed the budget, or on `take_back`, the release is remembered as bad
   (fleet.deploy.badreleases) and every host the rollout touched goes back, in parallel, to the
   release it ran before, with the installer's own verification (`rollback --to`).

The record (`.fleet/rollouts/<id>.json` beside the inventory, rewritten by temp file and rename
at every step) holds the plan, the waves, each host's release before, outcome and note. A control
process killed at any point leaves a record that `resume` finishes or `take_back` reverses, and
both read each host's real state first: a deploy is repeated only through the installer, which
reads the host before it switches (a host already on the release is left as it is), and a
revert is a `rollback --to` the host's earlier release, a no-op where it runs it already.
This module is the one a second engine drives (waves, budget, bake and abort), so it holds no
terminal code: what people see goes through `RolloutUI`.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import time as _wallclock
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from fleet.continuity import regularfile
from fleet.continuity.atomicfile import atomic_write
from fleet.continuity.statelayout import release_name
from fleet.deploy import api, badreleases, inventory, lease, waves
from fleet.deploy.inventory import Host, control_dir
from fleet.deploy.runner import HostResult, RunOptions
from fleet.deploy.runtime import threading, time

SCHEMA = 1
RUNNING, PAUSED, ABORTING, COMPLETED, ABORTED = (
    "running", "paused", "aborting", "completed", "aborted")
FINAL = (COMPLETED, ABORTED)
# a host's outcome in the record
PENDING, DEPLOYING, DEPLOYED, UNCHANGED, FAILED, BAKE_FAILED, REVERTED, REVERT_FAILED, \
    NOT_STARTED, NO_EARLIER, LEFT = ("pending", "deploying", "deployed", "unchanged", "failed",
                                     "bake_failed", "reverted", "revert_failed", "not_started",
                                     "no_earlier_release", "left_alone")
TOUCHED = (DEPLOYING, DEPLOYED, FAILED, BAKE_FAILED, REVERT_FAILED)  # what an abort takes back
MAX_RECORD_BYTES = 16 * 1024 * 1024
CRASH_ENV = "FLEET_ROLLOUT_CRASH_AT"  # test seam: SIGKILL this process at that point
# the runner's last word on a host (fleet.deploy.runner: progress(host, result, note))
HOST_DONE = frozenset({"installed", "unchanged", "rolled_back", "failed", "refused", "skipped",
                       "unreachable", "auth_failed", "host_key", "interrupted", "locked"})


class RolloutError(ValueError):
    """A rollout that cannot be started, resumed or taken back; the message says why and what
    to do (exit 2: nothing was changed by this command)."""


@dataclass
class Options:
    waves: str = waves.DEFAULT_WAVES
    bake_s: float = 0.0
    max_fail: str | None = None
    parallel: int = 10
    force: bool = False
    allow_unproven_openclaw: bool = False
    max_hook_errors: int = 0
    watch_every_s: float = 5.0


@dataclass
class BakeSchedule:
    """When a bake reads its hosts: at once, then every `every` seconds, then once more as
    `bake_s` ends. One schedule for both engines, each reading its own clock (the in-process
    engine the monotonic one, the Temporal workflow its replayable `workflow.time()`)."""

    end: float
    every: float
    first: bool = True

    @classmethod
    def starting(cls, now: float, bake_s: float, watch_every_s: float) -> BakeSchedule:
        return cls(now + bake_s, max(0.2, min(watch_every_s, bake_s / 3)))

    def remaining(self, now: float) -> float:
        return max(0.0, self.end - now)

    def wait(self, now: float) -> float | None:
        """Seconds to wait before the next read (0: read now), None once the bake is over."""
        if self.first:
            self.first = False
            return 0.0
        if self.end - now <= 0:
            return None
        return min(self.every, self.end - now)


class RolloutUI:
    """What an operator sees of a rollout; every method may be left as this no-op."""

    def planned(self, record: dict) -> None: ...

    def wave(self, index: int, count: int, hosts: list[str], budget_left: int | None) -> None: ...

    def host(self, host: str, step: str, note: str) -> None: ...

    def wave_done(self, index: int, results: list[HostResult]) -> None: ...

    def bake(self, remaining_s: float, watched: int, budget_left: int | None) -> None: ...

    def aborting(self, reason: str, hosts: list[str]) -> None: ...

    def decide(self) -> str:
        """After Ctrl-C between waves: "continue", "abort" or "pause"."""
        return "pause"


def artifact_record(artifact: api.ArtifactRef) -> dict:
    """The artifact as a record names it (either engine's)."""
    return {"path": str(artifact.path), "sha256": artifact.sha256, "version": artifact.version,
            "release": release_name(artifact.version, artifact.sha256)}


def _now() -> str:
    return _wallclock.strftime("%Y-%m-%dT%H:%M:%SZ", _wallclock.gmtime())


def records_dir(inventory_path: Path) -> Path:
    return control_dir(inventory_path) / "rollouts"


def _crash(point: str) -> None:
    """The test seam of the kill-and-resume tests: die here, as `kill -9` would."""
    if os.environ.get(CRASH_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)


def load(inventory_path: Path, rollout_id: str) -> dict:
    """The record of `rollout_id`; RolloutError naming the file when it is missing or bad."""
    if not rollout_id or "/" in rollout_id or rollout_id.startswith("."):
        raise RolloutError(f"rollout id {rollout_id!r}: not a rollout id (see "
                           f"`{inventory.command('status', [], inventory_path)}` or "
                           f"{records_dir(inventory_path)})")
    path = records_dir(inventory_path) / f"{rollout_id}.json"
    try:
        data = json.loads(regularfile.read_text(path, MAX_RECORD_BYTES))
    except FileNotFoundError:
        raise RolloutError(f"no rollout {rollout_id} for {inventory_path} ({path} does not "
                           f"exist); `{inventory.command('status', [], inventory_path)}` lists "
                           "the rollouts in progress") from None
    except (OSError, ValueError) as exc:
        raise RolloutError(f"{path}: cannot read this rollout's record ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or \
            not isinstance(data.get("hosts"), dict) or not isinstance(data.get("waves"), list):
        raise RolloutError(f"{path}: not a rollout record fleet can read (schema {SCHEMA})")
    return data


def unfinished(inventory_path: Path) -> list[dict]:
    """Records of this inventory's rollouts that are neither completed nor aborted, newest
    first (an unreadable record is skipped: `load` names its problem when asked for it)."""
    out = []
    folder = records_dir(inventory_path)
    try:
        names = sorted(os.listdir(folder), reverse=True)
    except OSError:
        return []
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            record = load(inventory_path, name[:-5])
        except RolloutError:
            continue
        if record.get("state") not in FINAL:
            out.append(record)
    return out


def run_owner(record: dict, fallback: str = "") -> str:
    """The owner the hosts' audit lines and locks name for this rollout, whichever control
    process drives it (a resume finds what the dead one left by it)."""
    return f"{record.get('owner') or fallback} rollout {record['id']}"


def new_id() -> str:
    """A fresh rollout id (a run names it to its hooks before the rollout starts)."""
    return _wallclock.strftime("%Y%m%dT%H%M%SZ", _wallclock.gmtime()) + "-" + secrets.token_hex(3)


NOTHING_CHANGED = "nothing was changed"  # the words of a refusal that touched no host


def _nothing_changed(res: HostResult) -> bool:
    return NOTHING_CHANGED in (res.note or "")


def _first_line(text: str, limit: int = 300) -> str:
    line = text.replace("\\n", "\n").splitlines()[0] if text else ""
    return line if len(line) <= limit else line[:limit] + "..."


def _release_of(rel: dict | None) -> str | None:
    return (rel or {}).get("release") or None


class Rollout:
    """One rollout, driven from its record (new, or read back to resume or take back)."""

    def __init__(self, inventory_path: Path, record: dict, hosts: list[Host],
                 artifact: api.ArtifactRef | None, ui: RolloutUI | None = None,
                 owner: str | None = None):
        self.inventory_path = Path(inventory_path)
        self.record = record
        self.hosts = {h.name: h for h in hosts}
        self.artifact = artifact
        self.ui = ui or RolloutUI()
        self.owner = owner or api.default_owner()
        self.tx_owner = run_owner(record, self.owner)
        self.lock = threading.Lock()  # host results arrive on the runner's threads
        missing = [n for n in record["hosts"] if n not in self.hosts]
        if missing:
            raise RolloutError(f"rollout {record['id']}: host(s) {', '.join(missing)} are not "
                               f"in {inventory_path} any more; put them back to finish or take "
                               "back this rollout")

    # --- the record -----------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.record["id"]

    @property
    def target(self) -> str:
        return self.record["artifact"]["release"]

    def save(self) -> None:
        with self.lock:
            self.record["updated"] = _now()
            text = json.dumps(self.record, indent=2, sort_keys=True) + "\n"
            path = records_dir(self.inventory_path) / f"{self.id}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, text)

    def _event(self, what: str) -> None:
        self.record.setdefault("events", []).append({"time": _now(), "what": what[:500]})

    def _set(self, name: str, outcome: str, note: str = "", now: str | None = None) -> None:
        entry = self.record["hosts"][name]
        entry["outcome"] = outcome
        if note:
            entry["note"] = note[:2000]
        if now is not None:
            entry["now"] = now

    @property
    def failures(self) -> int:
        return sum(1 for h in self.record["hosts"].values() if h.get("counted"))

    def _count(self, name: str) -> None:
        self.record["hosts"][name]["counted"] = True

    @property
    def tolerated(self) -> int | None:
        return self.record["budget"]["tolerated"]

    def budget_left(self) -> int | None:
        return waves.left(self.failures, self.tolerated)

    def spent(self) -> bool:
        return waves.spent(self.failures, self.tolerated)

    def _options(self, stop_when_spent: bool = False) -> RunOptions:
        """`stop_when_spent`: hosts not yet started are skipped once the budget is spent."""
        left = self.budget_left() if stop_when_spent else None
        return RunOptions(parallel=int(self.record["options"]["parallel"]),
                          max_fail=None if left is None else str(left))

    def _hosts(self, names: list[str], patient: bool = False) -> list[Host]:
        """The hosts by name; `patient`: each waits for a host lock an installer of the killed
        run may still hold (it finishes its transaction on its own)."""
        out = [self.hosts[n] for n in names]
        if patient:
            out = [replace(h, timeouts=replace(h.timeouts, lock=max(
                h.timeouts.lock, api.install_timeout(h)))) for h in out]
        return out

    # --- starting -------------------------------------------------------------------------

    @classmethod
    def start(cls, inventory_path: Path, hosts: list[Host], artifact: api.ArtifactRef,
              options: Options, ui: RolloutUI | None = None,
              owner: str | None = None, rollout_id: str = "") -> Rollout:
        """Read every host, plan the waves, write the record; nothing is changed yet
        (`rollout_id`: one `new_id()` gave before, else a new one)."""
        names = [h.name for h in hosts]
        plan = waves.plan(names, options.waves)
        tolerated = waves.budget(options.max_fail, len(names))
        rollout_id = rollout_id or new_id()
        ui = ui or RolloutUI()
        read = {r.host: r for r in api.status(hosts, ui.host, RunOptions(
            parallel=options.parallel), owner)}
        if any(r.result == "interrupted" for r in read.values()):
            raise KeyboardInterrupt  # before the record: nothing was changed
        host_entries = {}
        for index, wave in enumerate(plan):
            for name in wave:
                res = read[name]
                before = _release_of(res.from_release) if res.ok else None
                host_entries[name] = {"wave": index, "before": before, "now": before,
                                      "read": res.ok, "outcome": PENDING,
                                      "note": "" if res.ok else
                                      f"not read at the start: {res.note}"}
        record = {
            "schema": SCHEMA, "id": rollout_id, "state": RUNNING, "created": _now(),
            "owner": owner or api.default_owner(), "inventory": str(inventory_path),
            "artifact": artifact_record(artifact), "options": asdict(options),
            "budget": {"max_fail": options.max_fail, "tolerated": tolerated},
            "waves": plan, "next_wave": 0, "baked": -1, "reason": "", "hosts": host_entries,
            "events": [],
        }
        rollout = cls(inventory_path, record, hosts, artifact, ui, owner)
        rollout._event(f"planned {len(plan)} wave(s) of {', '.join(str(len(w)) for w in plan)}")
        rollout.save()
        ui.planned(record)
        _crash("planned")
        return rollout

    # --- driving --------------------------------------------------------------------------

    def run(self) -> dict:
        """Drive the rollout from where its record stands to completed, aborted or paused."""
        try:
            if self.record["state"] == ABORTING:
                return self._abort(self.record.get("reason") or "resumed abort")
            if self.record["state"] in FINAL:
                return self.record
            if self.record["state"] != RUNNING:
                self.record["state"] = RUNNING
                self._event("resumed")
                self.save()
            count = len(self.record["waves"])
            while self.record["next_wave"] < count:
                index = self.record["next_wave"]
                if self.record["baked"] < index - 1 and self.record["options"]["bake_s"] > 0:
                    self._bake(index - 1)
                    if self.spent():
                        return self._abort(self._spent_reason())
                    self.record["baked"] = index - 1
                    self.save()
                verdict = self._wave(index)
                if verdict == "refused":  # another run holds hosts: nothing changed there
                    return self._pause("another run holds some of this wave's hosts (see "
                                       "their notes); nothing was changed on them")
                if verdict == "interrupted":
                    choice = self.ui.decide()
                    if choice == "abort":
                        return self._abort("aborted by the operator (Ctrl-C)")
                    if choice == "pause":
                        return self._pause()
                    continue  # the wave again: its unfinished hosts are read first
                if self.spent():
                    return self._abort(self._spent_reason())
                self.record["next_wave"] = index + 1
                self.save()
                _crash(f"wave-{index + 1}-done")
            self._final_read()
            self.record["state"] = COMPLETED
            self._event("completed")
            self.save()
            return self.record
        except KeyboardInterrupt:
            choice = self.ui.decide()
            if choice == "abort":
                return self._abort("aborted by the operator (Ctrl-C)")
            if choice == "pause":
                return self._pause()
            return self.run()

    def _pause(self, why: str = "paused by the operator") -> dict:
        self.record["state"] = PAUSED
        self.record["reason"] = why
        self._event(why)
        self.save()
        return self.record

    def _spent_reason(self) -> str:
        failed = [n for n, h in self.record["hosts"].items() if h.get("counted")]
        return (f"failure budget spent: {len(failed)} host(s) failed "
                f"({', '.join(failed)}), more than the {self.tolerated} tolerated "
                f"(--max-fail {self.record['budget']['max_fail']})")

    def _wave(self, index: int) -> str:
        """Deploy the wave's hosts not yet done: "done", "interrupted" (Ctrl-C) or "refused"
        (another run holds some of them)."""
        hosts = self.record["hosts"]
        resumed = [n for n in self.record["waves"][index] if hosts[n]["outcome"] == DEPLOYING]
        if resumed:  # a run before this one died with them in flight: read them first
            self._settle(resumed)
        names = [n for n in self.record["waves"][index]
                 if hosts[n]["outcome"] in (PENDING, DEPLOYING)]
        self.ui.wave(index, len(self.record["waves"]), names, self.budget_left())
        if not names:
            return "done"
        for name in names:
            self._set(name, DEPLOYING)
        self._event(f"wave {index + 1}: {len(names)} host(s)")
        self.save()
        _crash(f"wave-{index + 1}")
        crashed = []

        def sink(host: str, step: str, note: str) -> None:
            self.ui.host(host, step, note)
            if step in HOST_DONE:
                self._host_done(host, step, note, host in resumed)
                if not crashed:
                    crashed.append(host)
                    _crash(f"wave-{index + 1}-host")

        opts = self.record["options"]
        results = api.deploy(self._hosts(names, patient=bool(resumed)), self.artifact, sink,
                             self._options(True), opts["force"],
                             allow_unproven_openclaw=opts["allow_unproven_openclaw"],
                             owner=self.tx_owner)
        verdict = "done"
        abandoned = []
        for res in results:
            entry = hosts[res.host]
            entry["result"] = res.result
            entry["duration_s"] = round(res.duration_s, 3)
            if res.result == "interrupted":
                verdict = "interrupted"  # its installer goes on alone: read again before anything
                self._set(res.host, DEPLOYING, res.note)
            elif res.result == "skipped":  # the budget was spent before it started
                # one the dead run had in flight may have changed: it stays to be read
                self._set(res.host, DEPLOYING if res.host in resumed else PENDING, res.note)
            elif res.result == "refused" and _nothing_changed(res):
                verdict = "refused" if verdict == "done" else verdict
                self._set(res.host, PENDING, res.note)
            elif res.ok:
                now = _release_of(res.to_release) or self.target
                self._set(res.host, UNCHANGED if entry.get("before") == self.target
                          else DEPLOYED, res.note, now)
                if not entry.get("read") and _release_of(res.from_release) != now:
                    entry["before"], entry["read"] = _release_of(res.from_release), True
            else:
                if not entry.get("read") and res.from_release:
                    entry["before"], entry["read"] = _release_of(res.from_release), True
                # the release it runs now, only when its answer says so
                self._set(res.host, FAILED, res.note or res.result,
                          _release_of(res.to_release) if res.to_release else None)
                if not res.to_release:
                    entry["now"] = None
                entry["failure"] = _first_line(res.note or res.result)
                self._count(res.host)
                if not res.to_release:  # no installer answer: it may still be running
                    abandoned.append(res.host)
        if abandoned:  # their installers may have switched after fleet stopped waiting, while
            # the wave still held the lease; now that it is given back, none can
            for res in api.status(self._hosts(abandoned), lambda *_: None, self._options(),
                                  self.tx_owner):
                hosts[res.host]["now"] = _release_of(res.from_release) if res.ok else None
        self.ui.wave_done(index, results)
        self.save()
        return verdict

    def _host_done(self, host: str, step: str, note: str, resumed: bool) -> None:
        """A host's result as the runner reports it, written at once: a run that dies later
        in the wave leaves a record that knows it (its `_wave` refines it)."""
        with self.lock:
            entry = self.record["hosts"][host]
            if step in ("installed", "unchanged"):
                entry["outcome"] = UNCHANGED if entry.get("before") == self.target else DEPLOYED
                entry["now"] = self.target
            elif step == "skipped" or (step == "refused" and NOTHING_CHANGED in note):
                entry["outcome"] = DEPLOYING if resumed else PENDING
            elif step != "interrupted":
                entry["outcome"] = FAILED
                entry["counted"] = True
                entry["now"] = entry.get("before") if step == "rolled_back" else None
                entry["failure"] = _first_line(note or step)
        self.save()

    def _read_when_idle(self, names: list[str]) -> list:
        """Each host's status once no installer of this rollout holds its lock (they finish on
        their own), waiting at most one install timeout; then as it is."""
        hosts = self._hosts(names)
        end = time.monotonic() + max(api.install_timeout(h) for h in hosts)
        while True:
            read = api.status(hosts, lambda *_: None, self._options(), self.tx_owner)
            if any(r.result == "interrupted" for r in read):
                raise KeyboardInterrupt
            busy = [r for r in read if r.ok and r.status is not None and r.status.lock
                    and not r.status.lock.stale and r.status.lock.owner == self.tx_owner]
            if not busy or time.monotonic() > end:
                return read
            time.sleep(1.0)

    def _final_read(self) -> None:
        """Before the record is final: the failed hosts, read again. An installer this run gave
        up on goes on alone and may yet switch its host back; the record says where each host
        ends, not where it was when the run stopped waiting."""
        failed = [n for n, h in self.record["hosts"].items()
                  if h["outcome"] in (FAILED, BAKE_FAILED)]
        if not failed:
            return
        for res in self._read_when_idle(failed):
            entry = self.record["hosts"][res.host]
            if res.ok and res.status is not None:
                entry["now"] = _release_of(res.status.current)
            elif entry.get("now"):  # what it ran when it failed may no longer hold
                entry["now"] = None
                entry["note"] = (entry.get("note", "") + "; not readable at the end "
                                 f"({res.note or res.result}): where it stands is unknown")

    def _settle(self, names: list[str]) -> None:
        """Hosts a dead run had in flight: wait (bounded) for its installers, which finish on
        their own, then take what each host's own audit line says of this rollout's install;
        a host that says nothing is deployed again (its installer reads it first)."""
        for res in self._read_when_idle(names):
            entry = self.record["hosts"][res.host]
            if not res.ok or res.status is None:  # unknown: never deployed again blindly
                self._set(res.host, FAILED, "in flight when the run before this one died, and "
                          f"it cannot be read now ({res.note or res.result}); not deployed "
                          "again", None)
                entry["now"] = None
                entry["failure"] = "could not be read after the crash"
                self._count(res.host)
                continue
            current = _release_of(res.status.current)
            last = res.status.last_audit or {}
            ours = last.get("who") == self.tx_owner and last.get("action") == "install"
            if ours and last.get("result") in ("installed", "unchanged") and \
                    current == self.target:
                self._set(res.host, DEPLOYED, "finished by the run before this one", current)
            elif ours and last.get("result") in ("rolled_back", "failed"):
                self._set(res.host, FAILED, f"failed in the run before this one: "
                          f"{last.get('reason') or last.get('result')}", current)
                entry["failure"] = _first_line(str(last.get("reason") or last.get("result")))
                self._count(res.host)
        self.save()

    def _bake(self, index: int) -> None:
        """Watch every host changed so far for `bake_s` seconds (see the module doc)."""
        opts = self.record["options"]
        watched = [n for n, h in self.record["hosts"].items() if h["outcome"] == DEPLOYED]
        self._event(f"bake after wave {index + 1}: {opts['bake_s']:g}s, {len(watched)} host(s)")
        self.save()
        _crash(f"bake-{index + 1}")
        baseline: dict[str, int] = {}
        schedule = BakeSchedule.starting(time.monotonic(), float(opts["bake_s"]),
                                         float(opts["watch_every_s"]))
        while watched:
            wait = schedule.wait(time.monotonic())
            if wait is None:
                break
            self.ui.bake(schedule.remaining(time.monotonic()), len(watched), self.budget_left())
            if wait:
                time.sleep(wait)
            read = api.status(self._hosts(watched), lambda *_: None, self._options(),
                              self.tx_owner)
            if any(res.result == "interrupted" for res in read):
                raise KeyboardInterrupt  # the runner kept it from us: the driver decides
            for res in read:
                problem = self._watch_problem(res, baseline, int(opts["max_hook_errors"]))
                if problem:
                    self._set(res.host, BAKE_FAILED, f"during the bake: {problem}",
                              _release_of(res.from_release))
                    self.record["hosts"][res.host]["failure"] = f"during the bake: {problem}"
                    self._count(res.host)
                    watched.remove(res.host)
                    self.ui.host(res.host, BAKE_FAILED, problem)
            self.save()
            if self.spent():
                return
        self.ui.bake(0.0, len(watched), self.budget_left())

    def _watch_problem(self, res: HostResult, baseline: dict[str, int],
                       max_hook_errors: int) -> str:
        """Why a baking host is not healthy, "" when it is."""
        if not res.ok or res.status is None:
            return f"status failed: {res.note or res.result}"
        status = res.status
        current = _release_of(status.current)
        if current != self.target:
            return f"runs {current or 'nothing'}, not {self.target}"
        if not status.ready:
            return f"not ready: {status.problem}"
        bad = hook_failures(res.data)
        if bad is None:
            return ""
        start = baseline.setdefault(res.host, bad)
        if bad - start > max_hook_errors:
            status = inventory.command("status", [res.host], self.inventory_path, "--json")
            return (f"{bad - start} new hook error(s)/timeout(s) while baking (tolerated "
                    f"{max_hook_errors}; `{status}` shows them per plugin)")
        return ""

    # --- taking back ----------------------------------------------------------------------

    def take_back(self, reason: str) -> dict:
        """Return every host this rollout touched to its release before (operator's abort)."""
        return self._abort(reason)

    def _abort(self, reason: str) -> dict:
        rec = self.record
        if rec["state"] != ABORTING:
            rec["state"] = ABORTING
            rec["reason"] = reason
            self._event(f"aborting: {reason}")
            self.save()
        art = rec["artifact"]
        badreleases.record(self.inventory_path, art["release"], art["version"], art["sha256"],
                           self.id, reason)
        _crash("aborting")
        for name, entry in rec["hosts"].items():
            if entry["outcome"] == PENDING:
                self._set(name, NOT_STARTED, "its wave never started")
        touched = [n for n, h in rec["hosts"].items() if h["outcome"] in TOUCHED]
        # an installer a dead run of this rollout left in flight must not switch after the
        # hosts are read: fence them first (their leases taken over)
        lease.fence(self._hosts(touched), self.tx_owner)
        back, guarded = self._revert_plan(touched) if touched else ({}, frozenset())
        self.save()
        self.ui.aborting(reason, list(back))
        if back:
            done = []

            def sink(host: str, step: str, note: str) -> None:
                self.ui.host(host, step, note)
                if step in HOST_DONE and not done:
                    done.append(host)
                    _crash("abort-host")

            results = api.rollback(self._hosts(list(back), patient=True), sink,
                                   self._options(), to=back, owner=self.tx_owner,
                                   guarded=guarded, via=self.target)
            for res in results:
                entry = rec["hosts"][res.host]
                entry["duration_s"] = round(entry.get("duration_s", 0) + res.duration_s, 3)
                to = back[res.host] or "the release before"
                if res.ok:
                    how = ("it ran it already" if res.result == "unchanged"
                           else "switched back, restarted, ready")
                    why = entry.get("failure")
                    self._set(res.host, REVERTED, f"back on {to} ({how})"
                              + (f"; it had failed: {why}" if why else ""),
                              _release_of(res.to_release) or back[res.host])
                else:
                    self._set(res.host, REVERT_FAILED, res.note or res.result,
                              _release_of(res.to_release) if res.to_release else None)
                    if not res.to_release:
                        entry["now"] = None
        failed = [n for n in touched if rec["hosts"][n]["outcome"] == REVERT_FAILED]
        rec["state"] = ABORTING if failed else ABORTED
        self._event("abort incomplete: could not take back " + ", ".join(failed) if failed
                    else "aborted")
        self.save()
        return rec

    def _revert_plan(self, touched: list[str]) -> tuple[dict[str, str | None], frozenset]:
        """Which touched hosts go back, and to which release, named now (never "the host's
        previous release" as the installer will find it: an installer of ours still at work may
        switch the host back on its own first, and its previous release is then this
        rollout's), read from each host first: one already on its earlier release, or on a
        release this rollout did not install, is left as it is; one whose in-flight installer
        (of a run that died) still holds its lock is taken back once that finishes
        (`_hosts(patient)`); one that cannot be read and whose earlier release is not known is
        sent nothing and stays to take back (REVERT_FAILED). Also the hosts that run this
        rollout's release, whose installer therefore knows the rollback's fleet-lease guard
        (`api.rollback(guarded)`)."""
        rec = self.record
        back: dict[str, str | None] = {}
        guarded = set()
        for res in self._read_when_idle(touched):  # an installer of ours finishes first
            entry = rec["hosts"][res.host]
            before = entry.get("before")
            if not res.ok or res.status is None:  # cannot tell: a rollback reads it again
                if before:
                    back[res.host] = before
                elif not entry.get("read"):
                    self._set(res.host, REVERT_FAILED, "could not be read, and the release it "
                              "ran before this rollout is not known; nothing was sent ("
                              f"{res.note or res.result})")
                else:
                    self._set(res.host, NO_EARLIER, "no release ran here before this rollout")
                continue
            current = _release_of(res.status.current)
            ours_busy = res.status.lock is not None and not res.status.lock.stale and \
                res.status.lock.owner == self.tx_owner
            entry["now"] = current
            if current == self.target:
                guarded.add(res.host)
            if before is None and current is not None and current != self.target:
                # not read at the start: what it runs now is what it ran before (an installer
                # of ours still at work has not switched it yet)
                before = entry["before"] = current
            if current == self.target or ours_busy:
                earlier = before or (
                    (res.data.get("previous") or {}).get("release") if current == self.target
                    else current)
                if not before and earlier == self.target:  # a failed switch back may leave
                    # `previous` there: then what it ran before is not known
                    self._set(res.host, REVERT_FAILED, "the release it ran before this rollout "
                              "is not known (its previous release is this rollout's); nothing "
                              "was sent: take it back with `rollback --to <release>`", current)
                elif earlier:
                    back[res.host] = entry["before"] = earlier  # kept: a later read may not
                    # find it again (a failed switch back moves `previous`)
                elif ours_busy:  # still at work after the wait: where it ends is not known
                    self._set(res.host, REVERT_FAILED, "an installer of this rollout still "
                              "works there; take the rollout back again once it is done",
                              None)
                    entry["now"] = None
                else:
                    self._set(res.host, NO_EARLIER, "no release ran here before this rollout: "
                              f"left on {current}; nothing to go back to", current)
            elif before and current == before:
                why = entry.get("failure")
                self._set(res.host, REVERTED, f"on {before} already (its installer switched it "
                          "back)" + (f"; it had failed: {why}" if why else ""), current)
            else:
                self._set(res.host, LEFT, f"runs {current or 'nothing'}, which this rollout did "
                          "not install; left as it is", current)
        return back, frozenset(guarded)


FINAL_OK = (DEPLOYED, UNCHANGED, REVERTED, LEFT)


def hook_failures(status_data: dict | None) -> int | None:
    """Hook errors plus timeouts over every plugin in a host's status answer (None when the
    gateway gave no statistics)."""
    hooks = (status_data or {}).get("hooks")
    if not isinstance(hooks, dict):
        return None
    plugins = hooks.get("plugins") if isinstance(hooks.get("plugins"), dict) else hooks
    total = 0
    for counts in plugins.values():
        if isinstance(counts, dict):
            for key in ("errors", "timeouts"):
                value = counts.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    total += value
    return total


def stands(record: dict) -> dict[str, list[str]]:
    """Where every host stands by the record: release (or "unknown") -> host names."""
    out: dict[str, list[str]] = {}
    for name, entry in record["hosts"].items():
        out.setdefault(entry.get("now") or "unknown", []).append(name)
    return out


def results(record: dict) -> list[HostResult]:
    """One HostResult per host (inventory order), for the report and `--json`."""
    out = []
    final = record["state"]
    for name, entry in record["hosts"].items():
        outcome = entry["outcome"]
        ok = outcome in FINAL_OK if final != COMPLETED else outcome in (DEPLOYED, UNCHANGED)
        out.append(HostResult(name, outcome, ok and final in FINAL,
                              from_release={"release": entry["before"]} if entry.get("before")
                              else None,
                              to_release={"release": entry["now"]} if entry.get("now") else None,
                              note=entry.get("note", ""),
                              duration_s=float(entry.get("duration_s") or 0.0),
                              data={"wave": entry["wave"] + 1}))
    return out


def document(record: dict) -> dict:
    """The rollout part of the `--json` document: waves, budget, where every host stands."""
    hosts = record["hosts"]
    plan = []
    for index, wave in enumerate(record["waves"]):
        outcomes = [hosts[n]["outcome"] for n in wave]
        started = any(o not in (PENDING, NOT_STARTED) for o in outcomes)
        plan.append({"wave": index + 1, "hosts": wave, "started": started,
                     "failed": [n for n in wave if hosts[n].get("counted")]})
    return {"rollout": {"id": record["id"], "state": record["state"],
                        "release": record["artifact"]["release"],
                        "reason": record.get("reason", ""), "waves": plan,
                        "budget": {"max_fail": record["budget"]["max_fail"],
                                   "tolerated": record["budget"]["tolerated"],
                                   "failures": sum(1 for h in hosts.values() if h.get("counted"))},
                        "stands": stands(record)}}


def next_steps(record: dict) -> tuple[str, str]:
    """The commands that finish and that take back this rollout, ready to paste."""
    inv = record.get("inventory")
    if record.get("engine") == "temporal":  # its workflow goes on: steered by signals
        return (inventory.command("rollout.resume", [], inv, record["id"]),
                inventory.command("rollout.abort", [], inv, record["id"]))
    return (inventory.command("deploy", [], inv, "--resume", "--rollout", record["id"]),
            inventory.command("rollback", [], inv, "--rollout", record["id"]))


def summary(record: dict) -> str:
    """The final line: how the rollout ended and where every host stands."""
    where = "; ".join(f"{len(names)} on {release}" for release, names in
                      sorted(stands(record).items(), key=lambda kv: -len(kv[1])))
    state = record["state"]
    split = len(stands(record)) > 1
    finish, back = next_steps(record)
    head = {COMPLETED: "completed", ABORTED: "aborted and taken back",
            PAUSED: f"paused (finish: {finish}; take back: {back})",
            ABORTING: f"NOT fully taken back (retry: {back})",
            RUNNING: f"interrupted (finish: {finish}; take back: {back})"}[state]
    tail = " -- the fleet is split between releases" if split else ""
    return f"rollout {record['id']} {head}: {where}{tail}"


def bad_release_refusal(inventory_path: Path, artifact: api.ArtifactRef) -> str | None:
    """Why deploying `artifact` needs `--force`: a rollout took it back (None otherwise)."""
    name = release_name(artifact.version, artifact.sha256)
    entry = badreleases.load(inventory_path).get(name)
    if entry is None:
        return None
    return (f"refusing: release {name} was taken back by rollout {entry.get('rollout')} "
            f"({entry.get('time')}: {entry.get('reason')}); fix it and build again, or pass "
            "--force to deploy it anyway")
