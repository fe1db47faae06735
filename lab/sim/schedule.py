"""One schedule of the simulation: a seed makes a small fleet, a rollout (or two at once) with
faults at every step, then heals the fleet, checks the invariants, reruns and checks that the
rerun converged.

The seed is the only input: `random.Random(seed)` draws the fleet (1-4 hosts, clock skews,
leases left by dead runs), the runs (which release, --parallel, --batch, --max-fail, a second
rollout at once), each fault where it could happen (the transport's drops and stalls, the
installer's kill/fail/full disk/hang at each step, the gateway's restart failures, never-ready
and dying gateways, power cuts of hosts and of the control process, a disk full for a while) and
every thread switch (lab.sim.scheduler). So `run(seed)` is the same schedule every time.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import io
import json
import random
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fleet.deploy import api, consent, lease, runtime
from fleet.deploy.inventory import Host
from fleet.deploy.runner import HostResult, RunOptions
from lab.sim import invariants
from lab.sim.host import SimHost, build_release, release_of
from lab.sim.scheduler import (
    Proc,
    Scheduler,
    SimAbort,
    SimQueue,
    SimThreading,
    SimTime,
)
from lab.sim.transport import SimConnection

CONTROL = "control"  # the control machine's name in leases
ROLLOUT_ID = re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]{6}\b")  # fleet.deploy.rollout.new_id's
# how many hosts take the fleet lease at once, drawn per schedule apart from its generator (so
# every other draw stays as it was): mostly fewer than the fleet, so takes queue for a turn
TAKE_BOUNDS = (1, 2, lease.TAKE_PARALLEL)
VERSIONS = ("1.0.0", "1.1.0", "1.2.0")
TIMEOUTS = {"connect": 5, "command": 30, "transfer": 10, "ready": 10}


@dataclass
class Run:
    """One control-side run (a deploy) and what the simulation saw of it."""

    owner: str
    release: str
    proc: Proc
    results: list[HostResult] | None = None  # None: the control process was killed
    yes: bool = True  # `--yes`: hosts not confirmed before are confirmed by this run
    unconfirmed: list[str] = field(default_factory=list)  # refused by the consent gate: these
    seen: dict[str, str | None] = field(default_factory=dict)  # host -> current after its
    # last answer to this run


@dataclass
class Outcome:
    """What one schedule did and whether every invariant held."""

    seed: int
    violations: list[str]
    faults: collections.Counter
    sim_time: float
    switches: int
    hosts: int
    runs: int
    trace: list[str] | None = None
    kind: str = "deploy"  # which story: a plain deploy (here) or a rollout (lab.sim.rollouts)
    paths: collections.Counter = field(default_factory=collections.Counter)  # the ways it went

    @property
    def ok(self) -> bool:
        return not self.violations


class _Stderr(io.TextIOBase):
    """sys.stderr while a simulation runs: a simulated host process's writes (the installer's
    step lines) go to that process's output, anything else to the real stderr."""

    def __init__(self, real):
        self.real = real
        self.target: contextvars.ContextVar = contextvars.ContextVar("sim_stderr", default=None)

    def write(self, text: str) -> int:
        target = self.target.get()
        if target is None:
            return self.real.write(text)
        target.append(text)
        return len(text)

    def flush(self) -> None:
        if self.target.get() is None:
            self.real.flush()


class World:
    """The simulated fleet of one schedule: scheduler, hosts, control processes and the fault
    choices, all from one random generator."""

    def __init__(self, seed: int, root: Path, releases: dict[str, api.ArtifactRef]):
        self.seed = seed
        self.rng = random.Random(seed)
        self.sched = Scheduler(self.rng)
        self.root = root
        self.releases = releases
        self.faults: collections.Counter = collections.Counter()
        self.faulty = False
        self.hosts: dict[str, SimHost] = {}
        self.controls: list[Proc] = []
        self.timers: list[Proc] = []
        self.trace: list[str] | None = None
        # fixed cases: (what, host[, step]) -> the fault to inject there once; a transport
        # fault by ("transport", host, command[, n-th time it is sent])
        self.force: dict[tuple[str, ...], str] = {}
        self.sent: dict[tuple[str, str], int] = {}  # (host, command) -> how many so far
        self.runs: list[Run] = []
        self.violations: list[str] = []
        self.paths: collections.Counter = collections.Counter()  # the ways the story went
        # consent (fleet.deploy.consent) is recorded beside this inventory, as the CLI does
        self.inventory_path = root / "inventory.yaml"
        self.moved: set[str] = set()  # hosts whose address the operator changed: asked again
        self._bytes: dict[Path, bytes] = {}
        self._stderr: _Stderr | None = None
        rng = self.rng
        # fault rates of this schedule: some are calm, some stormy
        storm = rng.choice((0.0, 0.02, 0.05, 0.15))
        self.rates = {"transport": storm, "stall": storm / 2, "installer": storm,
                      "gateway": storm * 1.5}

    # -- choices -----------------------------------------------------------------------------

    def count(self, what: str) -> None:
        self.faults[what] += 1
        self.note(f"fault: {what}")

    def went(self, path: str) -> None:
        """The story took `path` (a test asserts its seeds cover every path it names)."""
        self.paths[path] += 1
        self.note(f"path: {path}")

    def latency(self) -> float:
        return self.rng.choice((0.0005, 0.002, 0.02))

    def _roll(self, kind: str) -> bool:
        return self.faulty and self.rng.random() < self.rates[kind]

    def _forced(self, *key: str) -> str | None:
        """A fault a fixed case asked for (`force`), used once."""
        word = self.force.pop(key, None)
        if word:
            self.count(f"forced {' '.join(key)} {word}")
        return word

    def transport_fault(self, host: SimHost, upload: bool, what: str = "") -> str:
        key = (host.name, what)
        self.sent[key] = self.sent.get(key, 0) + 1
        forced = (self._forced("transport", host.name, what)  # e.g. "drop_during", or on the
                  or self._forced("transport", host.name, what, str(self.sent[key])))  # n-th
        if forced:
            return forced
        if not self._roll("transport"):
            return ""
        fault = self.rng.choice(("drop_before", "drop_during", "drop_after")
                                + (("drop_upload",) * 2 if upload else ()))
        if fault != "drop_upload":
            self.count(f"ssh {fault.replace('_', ' ')}")
        return fault

    def host_stall(self, host: SimHost, what: str) -> float:
        forced = self._forced("stall", host.name, what)
        if forced:
            return float(forced)
        if not self._roll("stall"):
            return 0.0
        stall = self.rng.choice((2.0, 25.0, 120.0, 2000.0))
        self.count("command hangs")
        return stall

    def installer_fault(self, host: SimHost, step: str) -> str:
        forced = self._forced("installer", host.name, step)
        if forced:
            return forced
        if not self._roll("installer"):
            return ""
        word = self.rng.choice(("kill", "kill", "fail", "enospc", "hang"))
        self.count(f"installer {word}")
        return word

    def gateway_fault(self, host: SimHost) -> str:
        host.restarts += 1
        forced = self._forced("gateway", host.name, str(host.restarts))
        if forced:
            return forced
        if not self._roll("gateway"):
            return ""
        fault = self.rng.choice(("restart_fails", "restart_hangs", "plugin", "silent", "dies",
                                 "dies"))
        self.count(f"gateway {fault}")
        return fault

    def artifact_bytes(self, path: Path) -> bytes:
        data = self._bytes.get(path)
        if data is None:
            data = self._bytes[path] = path.read_bytes()
        return data

    @contextlib.contextmanager
    def stderr_to(self, buf: list[str]) -> Iterator[None]:
        token = self._stderr.target.set(buf)
        try:
            yield
        finally:
            self._stderr.target.reset(token)

    # -- the control side --------------------------------------------------------------------

    def connect(self, host: Host) -> SimConnection:
        conn = SimConnection(self, self.hosts[host.name])
        conn.open()
        return conn

    def control_alive(self, pid: int) -> bool:
        return any(p.pid == pid and not p.killed and not p.done for p in self.controls)

    def inventory(self) -> list[Host]:
        return [Host(name=h.name, host=h.name + (".moved" if h.name in self.moved else ""),
                     state_dir=str(h.state), timeouts=dict(TIMEOUTS))
                for h in self.hosts.values()]

    def control(self) -> Proc:
        """A new control process (a run, or one life of a rollout's driver)."""
        proc = Proc(f"control-{len(self.controls)}", 50000 + len(self.controls))
        self.controls.append(proc)
        return proc

    def start_run(self, release: str, options: RunOptions, yes: bool = True,
                  only: list[str] | None = None) -> Run:
        """A control process deploying `release` to every host (`only`: to these) in a task of
        its own, behind the CLI's consent gate: a host outside the sandbox that the operator has
        not confirmed for where it now goes refuses the whole run unless `yes`
        (fleet/cli/deploy.py)."""
        proc = self.control()
        run = Run(owner=f"sim{len(self.runs)}@{CONTROL}", release=release, proc=proc, yes=yes)
        self.runs.append(run)
        hosts = [h for h in self.inventory() if only is None or h.name in only]

        def body() -> None:
            where = {h.name: h.describe() for h in hosts}  # no ssh_config in a simulation
            new = consent.unconfirmed(self.inventory_path, hosts, where)
            if new and not yes:
                run.unconfirmed = [h.name for h in new]
                self.note(f"run {run.owner} refused: {', '.join(run.unconfirmed)} not confirmed")
                run.results = []
            else:
                consent.confirm(self.inventory_path, new, where)
                run.results = api.deploy(hosts, self.releases[release], lambda *a: None,
                                         options, owner=run.owner)
            proc.kill()  # the process exits: its daemon threads (an abandoned host) end too

        self.sched.spawn(body, f"run-{run.owner}", proc)
        return run

    def run_of(self, proc: Proc) -> Run | None:
        return next((r for r in self.runs if r.proc is proc), None)

    def note(self, text: str) -> None:
        """One line of the schedule's trace (kept for a replay: `invoke sim --seed S -v`)."""
        if self.trace is not None:  # the temp dir's name and rollout ids (the real clock and
            # a random part, fleet.deploy.rollout.new_id) are all a seed does not fix
            line = f"{self.sched.now:10.3f} {text}".replace(str(self.root), "<root>")
            self.trace.append(ROLLOUT_ID.sub("<rollout id>", line))

    def answered(self, proc: Proc, host: SimHost, current: str | None) -> None:
        """A command of `proc`'s run answered, the host then running `current` (its report
        must agree)."""
        run = self.run_of(proc)
        if run is not None:
            run.seen[host.name] = current

    def switching(self, host: SimHost, owner: str | None) -> None:
        """An installer is about to switch `current`: the run it works for must hold the host's
        fleet lease (never a host changed without it), and the consent gate must have let it
        through."""
        refused = next((r for r in self.runs if r.owner == owner and r.unconfirmed), None)
        if refused is not None:
            self.violations.append(f"{host.name}: an installer of run {owner} switched although "
                                   "the consent gate refused that run")
        try:
            holder = json.loads(host.layout.lease.read_text())
        except (OSError, ValueError):
            holder = None
        if not isinstance(holder, dict) or holder.get("owner") != owner:
            self.violations.append(
                f"{host.name}: an installer of run {owner} switched without that run's fleet "
                f"lease (the lease there: {holder and holder.get('owner')!r})")


class _Process:
    """`fleet.deploy.runtime.process` in the simulation: the calling control process."""

    def __init__(self, world: World):
        self.world = world

    def pid(self) -> int:
        return self.world.sched.running.proc.pid

    def hostname(self) -> str:
        return CONTROL

    def alive(self, pid: int) -> bool:
        return self.world.control_alive(pid)


_RELEASES: dict[Path, dict[str, api.ArtifactRef]] = {}


def releases(where: Path) -> dict[str, api.ArtifactRef]:
    """The three releases every schedule deploys (built once per directory)."""
    if where not in _RELEASES:
        _RELEASES[where] = {v: build_release(where, v) for v in VERSIONS}
    return _RELEASES[where]


def scratch_root() -> Path:
    """Where schedules keep their hosts: tmpfs when there is one (no disk sync per write)."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and shm.stat().st_mode & 0o002 else Path(tempfile.gettempdir())


@contextlib.contextmanager
def simulation(world: World) -> Iterator[None]:
    """The deploy modules on the world's clock, threads and hosts; stderr routed per process."""
    sched = world.sched
    world._stderr = _Stderr(sys.stderr)
    before = sys.stderr
    sys.stderr = world._stderr
    try:
        with runtime.simulated(SimTime(sched), SimThreading(sched), SimQueue(sched),
                               _Process(world), world.connect):
            yield
    finally:
        sys.stderr = before


def run(seed: int, root: Path | None = None, keep: bool = False, trace: bool = False,
        play: Callable[[World], None] | None = None, kind: str = "deploy") -> Outcome:
    """Run schedule `seed` in a fresh temp dir; the hosts are removed afterwards unless `keep`;
    `trace`: keep every command and fault as a line (`Outcome.trace`); `play`: another story
    than the seeded deploy (a fixed case of tests/lab/sim, or lab.sim.rollouts', `kind`)."""
    base = Path(tempfile.mkdtemp(prefix=f"fleet-sim-{seed}-", dir=root or scratch_root()))
    try:
        world = World(seed, base, releases(base.parent / "fleet-sim-releases"))
        world.trace = [] if trace else None
        driver = Proc("driver", 1)
        with simulation(world):
            try:
                world.sched.main(lambda: (play or _play)(world), driver)
            except SimAbort:
                pass
        violations = world.violations + [f"simulation error: {e}" for e in world.sched.errors]
        return Outcome(seed, violations, world.faults, world.sched.now, world.sched.switches,
                       len(world.hosts), len(world.runs), world.trace, kind, world.paths)
    finally:
        if not keep:
            import shutil

            shutil.rmtree(base, ignore_errors=True)


def _options(rng: random.Random) -> RunOptions:
    return RunOptions(parallel=rng.choice((1, 2, 4, 10)),
                      batch=rng.choice((None, None, "1", "50%")),
                      max_fail=rng.choice((None, None, "0", "1")))


@contextlib.contextmanager
def take_bound(world: World) -> Iterator[None]:
    """The schedule's bound on lease takes at once (TAKE_BOUNDS) until the block ends."""
    bound = lease.TAKE_PARALLEL
    lease.TAKE_PARALLEL = random.Random(f"take {world.seed}").choice(TAKE_BOUNDS)
    try:
        yield
    finally:
        lease.TAKE_PARALLEL = bound


def _play(world: World) -> None:
    with take_bound(world):
        _deploys(world)


def _deploys(world: World) -> None:
    rng, sched = world.rng, world.sched
    count = rng.choice((1, 2, 2, 3))
    for i in range(count):
        world.hosts[f"h{i}"] = SimHost(world, f"h{i}", world.root)
    for host in world.hosts.values():
        host.skew = rng.choice((0.0, 0.0, 0.0, 1.5, -4.0, 12.0, 90.0, -600.0))
    if rng.random() < 0.6:  # most fleets already run the first release
        first = world.start_run(VERSIONS[0], _options(rng))
        wait(world, [first])
        for res in first.results or []:
            if not res.ok:
                world.violations.append(f"fault-free first deploy failed on {res.host}: "
                                        f"{res.result} {res.note}")
    for host in world.hosts.values():  # a lease left by a run that died
        if rng.random() < 0.1:
            _dead_lease(world, host)
    world.faulty = True
    target = rng.choice(VERSIONS[1:])
    if rng.random() < 0.1:  # the operator points a host elsewhere: its consent is asked again
        world.moved.add(rng.choice(sorted(world.hosts)))
    runs = [world.start_run(target, _options(rng), yes=rng.random() < 0.9)]
    if rng.random() < 0.2:  # a second rollout at once
        world.count("two rollouts at once")
        sched.sleep(rng.choice((0.0, 0.001, 0.05, 1.0)))
        other = rng.choice(VERSIONS)
        runs.append(world.start_run(other, _options(rng), yes=rng.random() < 0.9))
    _chaos(world, runs)
    wait(world, runs)
    world.faulty = False
    heal(world)
    invariants.after_faults(world)
    rerun(world, target)
    sched.drain()


def _dead_lease(world: World, host: SimHost) -> None:
    """A fleet lease whose run died: from this control machine (its pid gone: taken over at
    once) or from another one (held until it expires)."""
    here = world.rng.random() < 0.5
    world.count("lease held by a dead run")
    record = {"owner": "gone@elsewhere", "pid": 4242, "from": CONTROL if here else "laptop",
              "time": host.machine.time() - world.rng.choice((10.0, 600.0)),
              "lease": world.rng.choice((120.0, 1200.0)), "run": "dead" * 8}
    host.layout.lease.parent.mkdir(parents=True, exist_ok=True)
    host.layout.lease.write_text(json.dumps(record, sort_keys=True) + "\n")


def _chaos(world: World, runs: list[Run]) -> None:
    """Timed faults during the runs: the control process killed, a host's power cut (and back),
    a disk full for a while."""
    rng, sched = world.rng, world.sched
    events: list[tuple[float, str, object]] = []
    if rng.random() < 0.12:
        events.append((rng.uniform(0, 20), "kill control", rng.choice(runs)))
    for host in world.hosts.values():
        if rng.random() < 0.1:
            at = rng.uniform(0, 20)
            events.append((at, "power off", host))
            events.append((at + rng.choice((1.0, 30.0, 600.0)), "power on", host))
        if rng.random() < 0.06:
            at = rng.uniform(0, 10)
            events.append((at, "disk full", host))
            events.append((at + rng.choice((1.0, 10.0, 100.0)), "disk freed", host))
    if not events:
        return
    events.sort(key=lambda e: e[0])

    def timer() -> None:
        start = sched.now
        for at, what, target in events:
            sched.block(None, max(0.0, start + at - sched.now))
            if what == "kill control":
                world.count("control process killed")
                target.proc.kill()
            elif what == "power off":
                world.count("host killed (power cut)")
                target.power_off()
            elif what == "power on":
                target.power_on(gateway_starts=rng.random() < 0.5)
            elif what == "disk full":
                world.count("disk full")
                target.disk_full = True
            elif what == "disk freed":
                target.disk_full = False

    chaos = Proc("chaos", 2)
    world.timers.append(chaos)
    sched.spawn(timer, "chaos", chaos)


def wait(world: World, runs: list[Run]) -> None:
    world.sched.block(lambda: all(r.proc.done for r in runs), None)


def heal(world: World) -> None:
    """The faults end: hosts power on, disks have room, and every host process finishes."""
    for host in world.hosts.values():
        host.disk_full = False
        if not host.up:
            host.power_on(gateway_starts=world.rng.random() < 0.5)
    for proc in world.controls + world.timers:  # a killed control's leftovers are gone,
        proc.kill()  # and no more timed faults
    procs = [p for h in world.hosts.values() for p in h.procs.values() if not p.done]
    procs += world.controls + world.timers
    world.sched.block(lambda: all(p.done for p in procs), None)
    deaths = [g.started_at + g.mode.start_s + g.mode.dies_after_s
              for g in (h.gateway for h in world.hosts.values())
              if g.pid is not None and g.mode.dies_after_s is not None]
    if deaths:  # a gateway doomed during the faults dies before the checks, not in the rerun
        world.sched.sleep(max(0.0, max(deaths) - world.sched.now) + 0.1)
        for host in world.hosts.values():
            host.gateway.running  # noqa: B018  (looking is what ends a doomed gateway)


def rerun(world: World, target: str) -> None:
    """Liveness: deploying the target again, with no faults, converges (after waiting out, at
    most twice, a lease held by a run that died on another machine)."""
    for attempt in range(3):
        run = world.start_run(target, RunOptions(parallel=4))
        wait(world, [run])
        refused = [r for r in run.results or [] if r.result == "refused"]
        if not refused or attempt == 2:
            break
        world.sched.sleep(1300.0)  # the operator waits for the dead run's lease to expire
    invariants.after_rerun(world, run, release_of(world.releases[target]))

