"""A simulated host: a real state dir in a temp dir (on tmpfs where there is one), worked on by
the real installer code, plus what the simulation stands in for: the machine (clock with skew,
pids, boot, power, a full disk; `fleet.installer.machine`), the gateway process and its manager.

What is real here: every file the installer, the lease script and the upload touch (release
dirs, `current`/`previous` and extension links, the deploy lock, the audit log, the lease, the
artifacts), written by fleet's own code. What is simulated: processes (a host process is a
simulated thread; `kill -9` unwinds it and puts back the lock its `finally` removed, since a
killed process runs no cleanup), the gateway (a state machine that starts, becomes ready after
a delay, or never, or dies, and answers `health` as ours does), and time.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.continuity.statelayout import StateLayout, release_name
from fleet.deploy.api import ArtifactRef
from fleet.installer import releasedirs
from fleet.installer.announcer import StepAnnouncer
from fleet.installer.machine import Machine
from fleet.installer.manager import Manager, ManagerError
from lab.sim.scheduler import EPOCH, Proc, Scheduler, SimAbort

PLUGINS = {"memory-continuity": "memory_continuity", "mc": "mc"}  # id -> package dir

# The user's own files on every host (config and agent state): a deploy must never change them.
USER_FILES = {
    "openclaw.json": '{"agents": {"list": [{"id": "main"}]}}\n',
    "workspace/memory/CURRENT_STATE.md": "# State\n\n## Objective\nship it\n",
    "agents/main/sessions/s1.jsonl": '{"role": "user", "content": "hello"}\n',
}


def build_release(out_dir: Path, version: str) -> ArtifactRef:
    """A tiny artifact with the shape of a real one (manifest with every file's SHA-256, the
    installer's entry, two plugin manifests), so the real installer verifies, unpacks and links
    it in about a millisecond. Same version, same bytes."""
    files = {"__main__.py": "# simulated release: never run\n",
             "fleet/__init__.py": f'__version__ = "{version}"\n',
             StateLayout.RELEASE_INSTALLER: "# simulated release: never run\n",
             # the bulk of a release, the same in every version: what a patch reuses
             "fleet/bulk.py": "".join(f"# unchanged line {i}\n" for i in range(1500))}
    for plugin_id, pkg in PLUGINS.items():
        files[f"fleet/plugins/{pkg}/openclaw.plugin.json"] = json.dumps(
            {"id": plugin_id, "version": version})
    manifest = {"version": version, "components": {p: version for p in PLUGINS},
                "files": {p: hashlib.sha256(t.encode()).hexdigest() for p, t in files.items()}}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, text in sorted({**files, StateLayout.MANIFEST: json.dumps(
                manifest, sort_keys=True)}.items()):
            zf.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), text)
    data = buf.getvalue()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"fleet-{version}.pyz"
    path.write_bytes(data)
    return ArtifactRef(path, hashlib.sha256(data).hexdigest(), version,
                       dict(manifest["components"]))


@dataclass
class GatewayMode:
    """How the next gateway started on a host behaves (chosen by the schedule's seed)."""

    start_s: float = 0.2  # until it answers ready
    never_ready: str = ""  # "plugin": answers with a plugin's load error; "silent": never answers
    dies_after_s: float | None = None  # exits this long after it became ready


@dataclass(frozen=True)
class Switch:
    """One change of a host's `current`, as the simulation saw it: which host process (its pid,
    its run's owner and the installer command it ran) moved it from which release to which.
    Why: a rollout's invariants count switches per host (tests/lab/sim feed fabricated ones)."""

    at: float
    pid: int | None
    owner: str | None
    action: str | None
    before: str | None
    after: str | None


@dataclass(frozen=True)
class BadRelease:
    """How a release that is bad on a host fails there: its gateway never becomes ready
    (`never_ready`: "plugin" or "silent") or dies `dies_after_s` after it became ready."""

    never_ready: str = ""
    dies_after_s: float | None = None


class SimGateway:
    """The gateway process of one host, as its manager and `health` see it."""

    def __init__(self, host: SimHost):
        self.host = host
        self.pid: int | None = None
        self.release: str | None = None
        self.versions: dict[str, str] = {}
        self.started_at = 0.0
        self.mode = GatewayMode()
        self.exited: str | None = None  # why the last one we started is gone

    def start(self, release: Path, mode: GatewayMode) -> None:
        self.stop()
        meta = releasedirs.read_meta(release) or {}
        self.pid = self.host.new_pid()
        self.release = release.name
        self.versions = {k: str(v) for k, v in (meta.get("components") or {}).items()
                         if k in (meta.get("plugins") or {})}
        self.started_at = self.host.sched.now
        self.mode = mode
        self.exited = None

    def stop(self) -> None:
        self.pid = None
        self.release = None

    def _alive(self) -> bool:
        if self.pid is None:
            return False
        dies = self.mode.dies_after_s
        if dies is not None and self.host.sched.now >= self.started_at + self.mode.start_s + dies:
            self.exited = f"gateway (pid {self.pid}) exited after it was ready (simulated)"
            self.stop()
            return False
        return True

    @property
    def running(self) -> bool:
        return self._alive()

    @property
    def ready(self) -> bool:
        """Up, past its start and every plugin loaded: what ready.json + a live pid say."""
        return (self._alive() and not self.mode.never_ready
                and self.host.sched.now >= self.started_at + self.mode.start_s)

    def health(self) -> dict | None:
        if not self._alive() or self.host.sched.now < self.started_at + self.mode.start_s:
            return None
        if self.mode.never_ready == "silent":
            return None
        plugins = {p: {"version": v, "loaded": True, "error": None}
                   for p, v in self.versions.items()}
        answer: dict[str, Any] = {"pid": self.pid, "release": self.release,
                                  "versions": dict(self.versions), "plugins": plugins,
                                  "started_at": self.started_at, "uptime_s": 0.0}
        if self.mode.never_ready == "plugin":
            first = sorted(plugins)[0]
            plugins[first].update(loaded=False, error="ImportError: simulated load failure")
            answer["ready"] = False
            answer["error"] = f"{first}: ImportError: simulated load failure"
        return answer


class SimManager(Manager):
    """The `fleet` manager of a simulated host: restarts its SimGateway, with the faults the
    schedule chose for that restart (it fails, it hangs past its timeout, the new gateway never
    becomes ready or dies)."""

    name = "fleet"

    def __init__(self, host: SimHost):
        super().__init__(host.state, {})
        self.host = host

    def probe(self, release: Path | None = None) -> dict | None:
        return self.host.gateway.health()

    def restart(self, release: Path, expect: dict, timeout: float) -> None:
        host = self.host
        host.observe()  # every switch is followed by a restart: the switch is seen here at last
        fault = host.world.gateway_fault(host)
        host.sched.sleep(0.05)  # stop the old one, spawn the new one
        if fault == "restart_fails":
            host.gateway.stop()
            raise ManagerError("fleet restart failed: cannot start the gateway (simulated)")
        if fault == "restart_hangs":
            host.gateway.stop()
            host.sched.sleep(timeout + 5)
            raise ManagerError(f"command timed out after {timeout + 5:.0f}s: fleet restart "
                               "(simulated)")
        mode = GatewayMode(start_s=host.world.rng.choice((0.05, 0.1, 0.3, 1.5)))
        if fault in ("plugin", "silent"):
            mode.never_ready = fault
        elif fault == "dies":
            mode.dies_after_s = host.world.rng.choice((0.0, 0.5, 5.0, 60.0))
        host.gateway.start(release, host.bad_mode(release.name, mode))

    def stop(self, release: Path | None, timeout: float) -> None:
        self.host.observe()
        self.host.sched.sleep(0.02)
        self.host.gateway.stop()

    def selftest(self, release: Path, timeout: float) -> dict:
        """The simulated gateway's plugins pass their self-test while it answers (the
        scenarios themselves are the unit tests'); a gateway gone meanwhile fails it."""
        self.host.sched.sleep(0.01)
        health = self.host.gateway.health()
        if health is None:
            return {"gateway": {"error": "the gateway did not answer (simulated)"}}
        return {pid: {"ok": True, "plugin": pid, "version": version,
                      "checks": [{"name": "simulated", "ok": True, "detail": ""}]}
                for pid, version in health["versions"].items()}

    def hook_stats(self, release: Path | None, health: dict | None) -> dict | None:
        return None  # a simulated gateway runs no hooks

    def failure(self) -> str | None:
        gateway = self.host.gateway
        return gateway.exited if gateway.pid is None and gateway.exited else None


class SimMachine(Machine):
    """The machine of one simulated host (fleet.installer.machine): its clock (the simulated
    time plus the host's skew), its pids, boot and name, and the faults at installer steps."""

    def __init__(self, host: SimHost):
        self.host = host

    def time(self) -> float:
        return EPOCH + self.host.sched.now + self.host.skew

    def monotonic(self) -> float:
        return self.host.sched.now

    def sleep(self, seconds: float) -> None:
        self.host.sched.sleep(seconds)

    def pid(self) -> int:
        return self.host.sched.running.proc.pid

    def step_announcer(self) -> StepAnnouncer:
        return StepAnnouncer(0.0)  # every step at its start: no real thread on simulated time

    def hostname(self) -> str:
        return self.host.name

    def alive(self, pid: int) -> bool:
        return self.host.pid_alive(pid)

    def start_time(self, pid: int) -> str | None:
        return self.host.start_times.get(pid)

    def boot_id(self) -> str | None:
        return f"boot-{self.host.boots}"

    def fault(self, state_dir: Path, step: str) -> str:
        self.host.observe()  # a switch is seen at the next step at the latest (before a kill)
        if step == "commit":  # the change point itself: its run must hold the host's fleet
            # lease; no fault here, as none can come between the installer's last check and
            # the rename of `current`
            self.host.world.switching(self.host, getattr(self.host.sched.running.proc,
                                                         "owner", None))
            return ""
        word = self.host.world.installer_fault(self.host, step)
        if not word and self.host.disk_full and step in ("lock", "unpack", "switch", "audit"):
            self.host.world.count("installer on a full disk")
            word = "enospc"  # this step writes: on a full disk it fails as a write would
        if word == "hang":  # the installer stalls here (a hung disk, a stopped VM), then goes on
            self.host.sched.sleep(self.host.world.rng.choice((30.0, 300.0, 3000.0)))
            return ""
        return word

    def kill(self) -> None:
        proc = self.host.sched.running.proc
        self.host.kill_process(proc)
        raise SimAbort


class SimHost:
    """One host: its state dir, machine, gateway, processes and power."""

    def __init__(self, world: Any, name: str, root: Path):
        self.world = world
        self.sched: Scheduler = world.sched
        self.name = name
        self.state = root / name
        self.layout = StateLayout(self.state)
        self.machine = SimMachine(self)
        self.gateway = SimGateway(self)
        self.skew = 0.0
        self.up = True
        self.boots = 1
        self.disk_full = False
        self.restarts = 0  # gateway restarts so far (a fixed case names the one to break)
        self.procs: dict[int, Proc] = {}
        self.start_times: dict[int, str] = {}
        self._next_pid = 1000
        self.bad: dict[str, BadRelease] = {}  # release name -> how it fails on this host
        self.history: list[Switch] = []  # every change of `current` (see `observe`)
        self.commands: list[tuple[str | None, str]] = []  # (owner, installer command) run here
        self._seen: str | None = None
        self._link = str(self.layout.current)
        self._raw: str | None = None  # `current`'s link text when last looked at
        for rel, text in USER_FILES.items():
            path = self.state / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    # -- processes ---------------------------------------------------------------------------

    def new_pid(self) -> int:
        self._next_pid += 1
        self.start_times[self._next_pid] = f"{self.boots}:{self.sched.now:.3f}"
        return self._next_pid

    def pid_alive(self, pid: int) -> bool:
        if self.gateway.pid == pid and self.gateway.running:
            return True
        proc = self.procs.get(pid)
        return proc is not None and not proc.killed and not proc.done

    def process(self, name: str) -> Proc:
        """A new host process (one command's), whose death restores what its unwinding undid."""
        pid = self.new_pid()
        proc = Proc(f"{self.name}:{name}", pid)
        proc.on_death = lambda: self._after_death(proc)
        self.procs[pid] = proc
        return proc

    def kill_process(self, proc: Proc) -> None:
        """kill -9: remember the deploy lock as it is now (a killed process runs no cleanup, but
        its simulated thread unwinds through `finally` blocks that would remove it)."""
        if proc.killed:
            return
        proc.killed = True
        try:
            proc.lock_left = self.layout.lock.read_bytes()  # type: ignore[attr-defined]
        except OSError:
            proc.lock_left = None  # type: ignore[attr-defined]

    def _after_death(self, proc: Proc) -> None:
        left = getattr(proc, "lock_left", None)
        if left is None or self.layout.lock.exists():
            return
        try:
            if json.loads(left).get("pid") != proc.pid:
                return  # not this process's lock: its unwinding did not remove it
        except ValueError:
            return
        self.layout.lock.write_bytes(left)

    # -- power -------------------------------------------------------------------------------

    def power_off(self) -> None:
        """The host loses power: every process dies where it stands, the gateway too."""
        self.up = False
        for proc in list(self.procs.values()):
            if not proc.done:
                self.kill_process(proc)
        self.gateway.stop()

    def power_on(self, gateway_starts: bool) -> None:
        """Boot again (a new boot id); a supervised gateway comes back on `current`."""
        self.up = True
        self.boots += 1
        current = releasedirs.current_release(self.state)
        if gateway_starts and current is not None:
            self.gateway.start(current, self.bad_mode(current.name, GatewayMode(start_s=1.0)))

    def bad_mode(self, release: str, mode: GatewayMode) -> GatewayMode:
        """`mode`, unless `release` is bad here: then its gateway fails as `bad` says."""
        bad = self.bad.get(release)
        if bad is None:
            return mode
        return GatewayMode(start_s=mode.start_s, never_ready=bad.never_ready,
                           dies_after_s=bad.dies_after_s)

    # -- what changed it -----------------------------------------------------------------------

    def observe(self) -> None:
        """Note a change of `current` since the last look, with the host process that made it
        (called at every installer step, restart, stop and command end: no switch goes unseen,
        since each is followed by one of them before the next can happen)."""
        try:  # one syscall: most looks find the link as it was
            raw: str | None = os.readlink(self._link)
        except OSError:
            raw = None
        if raw == self._raw:
            return
        self._raw = raw
        now = self.current()
        if now == self._seen:
            return
        running = self.sched.running
        proc = running.proc if running is not None else None
        mine = proc is not None and self.procs.get(proc.pid) is proc
        self.history.append(Switch(self.sched.now, proc.pid if mine else None,
                                   getattr(proc, "owner", None) if mine else None,
                                   getattr(proc, "action", None) if mine else None,
                                   self._seen, now))
        self._seen = now

    # -- what the host runs -------------------------------------------------------------------

    def current(self) -> str | None:
        release = releasedirs.current_release(self.state)
        return release.name if release is not None else None

    def user_files_intact(self) -> list[str]:
        """The user's files that changed or went missing (none, on a correct deploy)."""
        bad = []
        for rel, text in USER_FILES.items():
            try:
                if (self.state / rel).read_text(encoding="utf-8") != text:
                    bad.append(rel)
            except OSError:
                bad.append(rel)
        return bad

    def remove(self) -> None:
        shutil.rmtree(self.state, ignore_errors=True)


def read_json_lines(path: Path) -> list[dict]:
    """A JSON-lines file's objects (a torn line skipped), [] when it does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def release_of(art: ArtifactRef) -> str:
    return release_name(art.version, art.sha256)


def lexists(path: Path) -> bool:
    return os.path.lexists(str(path))
