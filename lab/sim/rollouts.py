"""Rollout schedules (`invoke sim --kind rollout`): the control side runs a progressive rollout
(fleet.deploy.rollout: waves, one failure budget, bake, abort and take back) instead of a plain
deploy, on the same simulated hosts, clock and faults as lab.sim.schedule.

The seed draws a fleet of 8-20 hosts on earlier releases (a few with none, a few already on the
new one), a new release that is bad on some hosts (its gateway never becomes ready there, or
dies a while after it did: SimHost.bad), the waves, budget, bake and parallelism, the faults of
the plain schedules (lost connections, hung commands, killed or failing installers, gateway
failures, power cuts, full disks), and how the rollout's control process ends early:

- a crash (kill -9) at a point the seed picks: the n-th call of one of the rollout's UI
  callbacks in the control's main thread (`planned`, `wave`, a host's result, `wave_done`,
  `bake`, `aborting`: the moments between its record's writes that fleet.deploy.rollout's own
  crash points name), or a simulated time after the process started (anywhere it waits: mid
  wave, mid upload, mid bake, mid revert). Either way the process is marked killed
  (`Proc.kill`) and its threads unwind at their next wait as under kill -9 (SimAbort: no
  record write, no lease release, host processes go on alone); a callback raises SimAbort
  itself. Then, as an operator would, a new control process either resumes the rollout from its
  record (`Rollout(inventory, load(...), hosts, artifact).run()`, `invoke deploy --resume`) or
  takes it back (`.take_back(...)`, `invoke rollback --rollout`), and may crash again;
- or the operator's Ctrl-C during a wave or bake (a KeyboardInterrupt from a callback in the
  main thread, where Python raises it), answered "continue", "abort" or "pause" (a paused
  rollout is resumed or taken back later).

When the faults end, a rollout not yet completed or aborted is finished (resumed, or its abort
continued) with no faults, and the invariants of lab.sim.invariants (`rollout_problems`) are
checked against the simulated hosts' own history, besides `after_faults`' host invariants.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from fleet.deploy import badreleases, rollout
from fleet.deploy.runner import HostResult, RunOptions
from lab.sim import invariants, schedule
from lab.sim.host import BadRelease, SimHost, release_of
from lab.sim.schedule import CONTROL, VERSIONS, World
from lab.sim.scheduler import Proc, SimAbort, Task

OWNER = f"rollout@{CONTROL}"  # every life of the rollout is the same operator (user@machine)
WAVES = ("1,25%,100%", "1,10%,50%,100%", "2,50%", "100%", "1,1,100%", "25%,25%,25%,25%", "3",
         "1,3,5")
MAX_FAIL = (None, "0", "0", "1", "1", "2", "10%", "25%", "50%")
BAKE_S = (0.0, 0.0, 10.0, 30.0, 120.0)  # simulated: a bake costs only its status reads
POINTS = ("planned", "wave", "host", "wave_done", "bake", "aborting")  # UI calls a crash can hit
BAD = (BadRelease(never_ready="plugin"), BadRelease(never_ready="silent"),
       BadRelease(dies_after_s=5.0), BadRelease(dies_after_s=60.0))
MAX_LIVES = 5  # control processes while the faults last (the first one and four more)
CRASH_P = (0.6, 0.35, 0.2)  # chance the 1st, 2nd, 3rd+ life crashes


@dataclass
class Life:
    """One life of the rollout's control process (`invoke deploy --waves`, later `--resume` or
    `rollback --rollout`): what it runs and how it may end early."""

    action: str  # "start", "resume" or "take back"
    crash_at: tuple[str, int] | None = None  # crash at the n-th main-thread call of this point
    crash_after_s: float | None = None  # or killed this long after it started
    interrupt_at: tuple[str, int] | None = None  # or the operator's Ctrl-C there
    choice: str = "pause"  # what the operator answers to a Ctrl-C
    proc: Proc | None = None
    ended: bool = False  # its command returned (it was not killed)
    crashed: bool = False


@dataclass
class RolloutRun:
    """The rollout of one schedule, over all its control processes."""

    version: str  # the new release's version
    target: str  # its release name
    options: rollout.Options
    before: dict[str, str | None]  # what each host ran when it started (the host's own word)
    rollout_id: str | None = None  # known once a life planned it (its record exists)
    lives: list[Life] = field(default_factory=list)
    taken_back: bool = False  # the operator asked for a take back (or "abort" at a Ctrl-C)


class SimUI(rollout.RolloutUI):
    """The rollout's UI in the simulation: where a planned crash or Ctrl-C strikes."""

    def __init__(self, world: World, ro: RolloutRun, life: Life):
        self.world = world
        self.ro = ro
        self.life = life
        self.main: Task | None = None  # the life's main thread (where Ctrl-C is raised)
        self.calls: dict[str, int] = {}
        self.phase = ""

    def _at(self, point: str) -> None:
        if self.world.sched.running is not self.main:
            return
        n = self.calls[point] = self.calls.get(point, 0) + 1
        life = self.life
        if life.crash_at == (point, n):
            self.world.count(f"rollout control crashed at {point}")
            life.crashed = True
            life.proc.kill()
            raise SimAbort
        if life.interrupt_at == (point, n) and self.phase in ("wave", "bake"):
            self.world.count(f"operator Ctrl-C at {point}")
            raise KeyboardInterrupt

    def planned(self, record: dict) -> None:
        self.ro.rollout_id = record["id"]
        self._at("planned")

    def wave(self, index: int, count: int, hosts: list[str], budget_left: int | None) -> None:
        self.phase = "wave"
        self.world.note(f"rollout wave {index + 1}/{count}: {', '.join(hosts)} "
                        f"(budget left {budget_left})")
        self._at("wave")

    def host(self, host: str, step: str, note: str) -> None:
        if step in rollout.HOST_DONE:
            self._at("host")

    def wave_done(self, index: int, results: list[HostResult]) -> None:
        self.phase = ""
        self._at("wave_done")

    def bake(self, remaining_s: float, watched: int, budget_left: int | None) -> None:
        self.phase = "bake"
        self._at("bake")

    def aborting(self, reason: str, hosts: list[str]) -> None:
        self.phase = "abort"
        self.world.note(f"rollout aborting ({reason}): {', '.join(hosts)}")
        self._at("aborting")

    def decide(self) -> str:
        choice = self.life.choice
        self.world.went(f"Ctrl-C, then {choice}")
        if choice == "abort":
            self.ro.taken_back = True
        return choice


def run(seed: int, root: Path | None = None, keep: bool = False,
        trace: bool = False) -> schedule.Outcome:
    """Rollout schedule `seed` (see the module doc); `schedule.run`'s arguments."""
    return schedule.run(seed, root, keep, trace, play=play, kind="rollout")


def record_of(world: World, ro: RolloutRun) -> dict | None:
    """The rollout's record as it is on disk now (None before a life wrote one)."""
    if ro.rollout_id is None:
        return None
    return rollout.load(world.inventory_path, ro.rollout_id)


def live(world: World, ro: RolloutRun, life: Life) -> None:
    """Run one life of the control process to its end (returned, crashed or killed)."""
    ro.lives.append(life)
    proc = life.proc = world.control()
    ui = SimUI(world, ro, life)
    sched = world.sched
    inventory = world.inventory_path
    world.note(f"rollout life {len(ro.lives)}: {life.action}"
               + (f", crash at {life.crash_at}" if life.crash_at else "")
               + (f", killed after {life.crash_after_s:.1f}s" if life.crash_after_s else "")
               + (f", Ctrl-C at {life.interrupt_at} -> {life.choice}" if life.interrupt_at
                  else ""))
    if life.action == "take back":
        ro.taken_back = True

    def body() -> None:
        ui.main = sched.running
        hosts = world.inventory()
        artifact = world.releases[ro.version]
        try:
            if life.action == "start":
                rollout.Rollout.start(inventory, hosts, artifact, ro.options, ui, OWNER).run()
            else:
                record = rollout.load(inventory, ro.rollout_id)
                driven = rollout.Rollout(inventory, record, hosts,
                                         artifact if life.action == "resume" else None, ui, OWNER)
                if life.action == "resume":
                    driven.run()
                else:
                    driven.take_back("taken back by the operator (invoke rollback --rollout)")
        except KeyboardInterrupt:  # a Ctrl-C the rollout does not handle ends the command
            world.went("Ctrl-C ended the command")
        life.ended = True
        proc.kill()  # the process exits: its daemon threads (an abandoned host) end too

    sched.spawn(body, f"rollout-{len(ro.lives)}", proc)
    if life.crash_after_s is not None:
        def killer() -> None:
            sched.sleep(life.crash_after_s)
            if not life.ended and not proc.done:
                world.count("rollout control killed (kill -9 at a time)")
                life.crashed = True
                proc.kill()

        timer = Proc("rollout-killer", 3)
        world.timers.append(timer)
        sched.spawn(killer, "rollout-killer", timer)
    sched.block(lambda: proc.done, None)


def _life(rng: random.Random, action: str, number: int) -> Life:
    """The next life, with the crash or Ctrl-C the seed gives it (fewer in later lives)."""
    life = Life(action)
    if rng.random() < CRASH_P[min(number, len(CRASH_P) - 1)]:
        if rng.random() < 0.7:
            life.crash_at = (rng.choice(POINTS), rng.choice((1, 1, 2, 3, 5, 8)))
        else:
            life.crash_after_s = rng.uniform(0.0, 60.0)
    elif action != "take back" and rng.random() < 0.15:
        life.interrupt_at = (rng.choice(("wave", "host", "bake")), rng.choice((1, 2)))
        life.choice = rng.choice(("continue", "abort", "pause"))
    return life


def drive(world: World, ro: RolloutRun) -> None:
    """The rollout's lives while the faults last: after each crash, pause or unfinished abort,
    the operator resumes it or takes it back (a start that crashed before it wrote its record
    is started again)."""
    rng = world.rng
    life = _life(rng, "start", 0)
    while True:
        live(world, ro, life)
        record = record_of(world, ro)
        if record is not None and record["state"] in rollout.FINAL:
            return
        if len(ro.lives) >= MAX_LIVES:
            return
        if record is None:
            world.went("ended before its record: started again")
            action = "start"
        else:
            action = "resume" if rng.random() < 0.65 else "take back"
            why = ("crash" if life.crashed else
                   "pause" if record["state"] == rollout.PAUSED else record["state"])
            world.went(f"{why}, then {action}")
            if life.crashed and len(ro.lives) > 1:
                world.went("crashed again")
        life = _life(rng, action, len(ro.lives))


def finish(world: World, ro: RolloutRun) -> None:
    """With the faults over, bring an unfinished rollout to its end as an operator would: a
    record never written is started again, an abort is continued, a take back asked for is
    done, anything else resumed (waiting out, at most twice, a lease held by a run that died on
    another machine)."""
    for attempt in range(3):
        record = record_of(world, ro)
        if record is not None and record["state"] in rollout.FINAL:
            return
        if attempt:
            world.sched.sleep(1300.0)
        action = ("start" if record is None else
                  "take back" if ro.taken_back and record["state"] != rollout.ABORTING else
                  "resume")
        world.went(f"finished after the faults ({action})")
        live(world, ro, Life(action))


def facts(world: World, ro: RolloutRun) -> invariants.RolloutFacts | None:
    """What the rollout did, from its record and the simulated hosts (None: no record)."""
    record = record_of(world, ro)
    if record is None:
        return None
    owner = rollout.run_owner(record, OWNER)  # what the rollout's host commands carry
    hosts = {name: invariants.RolloutHost(
        before=ro.before[name], current=host.current(), history=list(host.history),
        touched=any(who == owner and command != "status" for who, command in host.commands))
        for name, host in world.hosts.items()}
    return invariants.RolloutFacts(owner, ro.target, ro.options.waves, record, hosts,
                                   ro.taken_back, badreleases.load(world.inventory_path))


def _paths(world: World, found: invariants.RolloutFacts) -> None:
    """Name the way the rollout ended (the tests' seeds must cover each)."""
    rec = found.record
    state = rec["state"]
    if state == rollout.COMPLETED:
        world.went("completed")
    elif state == rollout.ABORTED:
        world.went("aborted: taken back" if found.taken_back and not str(
            rec.get("reason", "")).startswith("failure budget spent") else
            "aborted: budget spent")
    if any(str(e.get("failure", "")).startswith("during the bake")
           for e in rec["hosts"].values()):
        world.went("a bake caught a failure")
    if any(invariants.reverts(found, name) for name in found.hosts):
        world.went("a host reverted")


def play(world: World) -> None:
    """The seeded rollout story (see the module doc), with the schedule's bound on takes."""
    with schedule.take_bound(world):
        _story(world)


def _story(world: World) -> None:
    rng, sched = world.rng, world.sched
    names = [f"h{i:02d}" for i in range(rng.randint(8, 20))]
    for name in names:
        world.hosts[name] = SimHost(world, name, world.root)
        world.hosts[name].skew = rng.choice((0.0, 0.0, 0.0, 0.0, 1.5, -4.0, 12.0, 90.0, -600.0))
    version = rng.choice(VERSIONS[1:])
    fresh = [n for n in names if rng.random() < 0.05]  # no release yet
    earlier = [n for n in names if n not in fresh]
    first = world.start_run(VERSIONS[0], RunOptions(parallel=10), only=earlier)
    runs = [first]
    already: list[str] = []
    if rng.random() < 0.25:  # a few already run the new release: it stays where it was
        already = rng.sample(earlier, min(len(earlier), rng.choice((1, 2, 3))))
    schedule.wait(world, runs)
    if already:
        runs.append(world.start_run(version, RunOptions(parallel=10), only=already))
        schedule.wait(world, runs[1:])
    for run_ in runs:
        for res in run_.results or []:
            if not res.ok:
                world.violations.append(f"fault-free deploy before the rollout failed on "
                                        f"{res.host}: {res.result} {res.note}")
    target = release_of(world.releases[version])
    others = [n for n in names if n not in already]
    for name in rng.sample(others, min(len(others), rng.choice(
            (0, 0, 1, 1, 2, 3, max(1, len(names) // 4))))):
        world.hosts[name].bad[target] = rng.choice(BAD)
        world.count("release bad on a host")
    if rng.random() < 0.05:
        schedule._dead_lease(world, world.hosts[rng.choice(names)])
    options = rollout.Options(waves=rng.choice(WAVES), bake_s=rng.choice(BAKE_S),
                              max_fail=rng.choice(MAX_FAIL), parallel=rng.choice((1, 2, 4, 10)),
                              watch_every_s=rng.choice((5.0, 10.0, 30.0)))
    ro = begin(world, version, options)
    world.faulty = True
    _chaos(world)
    drive(world, ro)
    world.faulty = False
    schedule.heal(world)
    finish(world, ro)
    check(world, ro)
    sched.drain()


def begin(world: World, version: str, options: rollout.Options) -> RolloutRun:
    """The rollout of `version` about to start, with what every host runs now."""
    ro = RolloutRun(version, release_of(world.releases[version]), options,
                    {n: h.current() for n, h in world.hosts.items()})
    world.note(f"rollout of {ro.target}: --waves {options.waves} --max-fail "
               f"{options.max_fail} --bake {options.bake_s:g} --parallel {options.parallel}; "
               "bad on " + (", ".join(n for n, h in world.hosts.items() if h.bad) or "no host"))
    return ro


def check(world: World, ro: RolloutRun) -> invariants.RolloutFacts | None:
    """Once every host process ended: the host invariants and the rollout's (see
    lab.sim.invariants), and the paths it took; returns the facts checked."""
    schedule.heal(world)  # every host process of the last lives ends first
    invariants.after_faults(world)
    found = facts(world, ro)
    if found is None:
        world.violations.append("the rollout wrote no record, even when started without faults")
        return None
    world.violations.extend(invariants.rollout_problems(found))
    _paths(world, found)
    return found


def _chaos(world: World) -> None:
    """Timed faults during the rollout: power cuts (and back), disks full for a while."""
    rng, sched = world.rng, world.sched
    events: list[tuple[float, str, SimHost]] = []
    for host in world.hosts.values():
        if rng.random() < 0.03:
            at = rng.uniform(0, 60)
            events.append((at, "power off", host))
            events.append((at + rng.choice((1.0, 30.0, 600.0)), "power on", host))
        if rng.random() < 0.02:
            at = rng.uniform(0, 30)
            events.append((at, "disk full", host))
            events.append((at + rng.choice((1.0, 10.0, 100.0)), "disk freed", host))
    if not events:
        return
    events.sort(key=lambda e: e[0])

    def timer() -> None:
        start = sched.now
        for at, what, host in events:
            sched.block(None, max(0.0, start + at - sched.now))
            if what == "power off":
                world.count("host killed (power cut)")
                host.power_off()
            elif what == "power on":
                host.power_on(gateway_starts=rng.random() < 0.5)
            elif what == "disk full":
                world.count("disk full")
                host.disk_full = True
            else:
                host.disk_full = False

    chaos = Proc("chaos", 2)
    world.timers.append(chaos)
    sched.spawn(timer, "chaos", chaos)
