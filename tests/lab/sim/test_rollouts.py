"""Rollouts in the simulation (lab/sim/rollouts.py): seeded rollout schedules that must cover
every way a rollout can go and hold its invariants, a check that the checker catches broken
invariants, and one fixed story per defect the rollout schedules found (each `xfail(strict)`
until the code it names is fixed: a story that passes then fails the suite, so its marker goes).
"""

from __future__ import annotations

import collections
import re

import pytest

from fleet.deploy import rollout
from fleet.deploy.runner import RunOptions
from lab.sim import campaign, invariants, rollouts, schedule
from lab.sim.host import BadRelease, SimHost, Switch, release_of

# Clean seeds that between them take every path twice or more (the test below proves it, so a
# change of the schedules that loses a path fails here rather than passing vacuously).
SEEDS = (2, 3, 7, 10, 14, 30, 88)
PATHS = ("completed", "aborted: budget spent", "aborted: taken back", "crash, then resume",
         "crash, then take back", "crashed again", "a bake caught a failure", "a host reverted",
         "ended before its record: started again", "Ctrl-C")


class KnownDefect(Exception):
    """The defect a fixed story below reproduces is still there (its `xfail` expects exactly
    this: anything else going wrong in the story is a real failure)."""


def still(defect: bool, what: str) -> None:
    if defect:
        raise KnownDefect(what)


def test_rollout_schedules_take_every_path_and_hold_every_invariant():
    paths: collections.Counter = collections.Counter()
    failed = []
    for seed in SEEDS:
        outcome = rollouts.run(seed)
        paths.update("Ctrl-C" if p.startswith("Ctrl-C, then") else p for p in outcome.paths)
        if not outcome.ok:
            failed.append(campaign.Failure(seed, outcome.violations, "rollout").describe())
    assert not failed, "\n".join(failed)
    missing = [p for p in PATHS if paths[p] == 0]
    assert not missing, f"no seed of {SEEDS} took {missing} (took: {dict(paths)})"


def test_a_rollout_seed_replays_exactly():
    first = rollouts.run(2, trace=True)
    again = rollouts.run(2, trace=True)
    assert first.trace == again.trace and first.trace
    assert first.kind == "rollout" and "crash, then resume" in first.paths
    assert (first.faults, first.paths, first.sim_time, first.violations) == (
        again.faults, again.paths, again.sim_time, again.violations)


# -- the checker, on fabricated facts ------------------------------------------------------------

OLD, NEW = "1.0.0-aaaaaaaaaaaa", "1.1.0-bbbbbbbbbbbb"
OWNER = rollouts.OWNER


def fabricated(state: str = rollout.ABORTED) -> invariants.RolloutFacts:
    """A rollout of NEW over h0 (wave 1) and h1 (wave 2) that the checker finds correct: h0
    installed and, when `state` is aborted, reverted once; h1 never touched."""
    h0 = [Switch(1.0, 11, OWNER, "install", OLD, NEW)]
    if state == rollout.ABORTED:
        h0.append(Switch(9.0, 12, OWNER, "rollback", NEW, OLD))
        entries = {"h0": {"wave": 0, "before": OLD, "now": OLD, "outcome": rollout.REVERTED,
                          "counted": True},
                   "h1": {"wave": 1, "before": OLD, "now": OLD, "outcome": rollout.NOT_STARTED}}
    else:
        entries = {"h0": {"wave": 0, "before": OLD, "now": NEW, "outcome": rollout.DEPLOYED},
                   "h1": {"wave": 1, "before": OLD, "now": NEW, "outcome": rollout.DEPLOYED}}
    record = {"id": "r1", "state": state, "waves": [["h0"], ["h1"]], "next_wave": 0,
              "budget": {"max_fail": "0", "tolerated": 0}, "hosts": entries,
              "reason": "failure budget spent" if state == rollout.ABORTED else ""}
    hosts = {"h0": invariants.RolloutHost(OLD, h0[-1].after, h0, touched=True),
             "h1": invariants.RolloutHost(OLD, OLD)}
    if state == rollout.COMPLETED:
        hosts["h1"] = invariants.RolloutHost(OLD, NEW, [Switch(2.0, 13, OWNER, "install", OLD,
                                                               NEW)], touched=True)
    bad = {NEW: {"rollout": "r1"}} if state == rollout.ABORTED else {}
    return invariants.RolloutFacts(OWNER, NEW, "1,100%", record, hosts, False, bad)


def test_the_checker_finds_a_correct_rollout_correct():
    assert invariants.rollout_problems(fabricated(rollout.ABORTED)) == []
    assert invariants.rollout_problems(fabricated(rollout.COMPLETED)) == []


def test_the_checker_catches_a_host_reverted_twice():
    facts = fabricated()
    facts.hosts["h0"].history += [Switch(20.0, 14, OWNER, "install", OLD, NEW),
                                  Switch(21.0, 14, OWNER, "install", NEW, OLD)]
    problems = invariants.rollout_problems(facts)
    assert len(problems) == 1 and problems[0].startswith("h0: reverted 2 times by one rollout")


def test_a_revert_its_installer_undid_is_an_attempt_and_a_noop_no_switch_at_all():
    """A rollback whose restart failed switches back and forth (one process, left on the new
    release); the retry that does revert is the one revert. A no-op rollback switches nothing."""
    facts = fabricated()
    facts.hosts["h0"].history[1:1] = [Switch(5.0, 15, OWNER, "rollback", NEW, OLD),
                                      Switch(5.1, 15, OWNER, "rollback", OLD, NEW)]
    assert invariants.rollout_problems(facts) == []
    assert [s.pid for s in invariants.reverts(facts, "h0")] == [12]


@pytest.mark.parametrize("breakage, expected", [
    ("left on the release", "h0: left on 1.1.0-bbbbbbbbbbbb, which the rollout took back"),
    ("later wave touched", "h1: in wave 2, after the abort in wave 1, yet the rollout changed"),
    ("record misstates", "h0: the record says it runs 1.0.0-aaaaaaaaaaaa (reverted), the host"),
    ("aborted within budget", "the rollout aborted with 0 failure(s), within its budget"),
    ("not final", "the rollout ended 'aborting' although the faults ended"),
    ("wrong plan", "the rollout: its waves [['h0', 'h1']] are not the plan of --waves 1,100%"),
    ("reverted elsewhere", "h0: reverted to 0.9.0-cccccccccccc, but it ran 1.0.0-aaaaaaaaaaaa"),
])
def test_the_checker_catches_each_broken_invariant(breakage, expected):
    facts = fabricated()
    rec, h0 = facts.record, facts.hosts["h0"]
    if breakage == "left on the release":
        h0.current = NEW
        h0.history.pop()
        rec["hosts"]["h0"]["now"] = NEW
    elif breakage == "later wave touched":
        facts.hosts["h1"].touched = True
        rec["hosts"]["h1"]["outcome"] = rollout.FAILED
    elif breakage == "record misstates":
        h0.current = NEW
        h0.history.append(Switch(30.0, 16, "someone@else", "install", OLD, NEW))
    elif breakage == "aborted within budget":
        rec["hosts"]["h0"]["counted"] = False
    elif breakage == "not final":
        rec["state"] = rollout.ABORTING
    elif breakage == "wrong plan":
        rec["waves"] = [["h0", "h1"]]
    elif breakage == "reverted elsewhere":
        h0.history[-1] = Switch(9.0, 12, OWNER, "rollback", NEW, "0.9.0-cccccccccccc")
        h0.current = rec["hosts"]["h0"]["now"] = "0.9.0-cccccccccccc"
    problems = invariants.rollout_problems(facts)
    assert any(p.startswith(expected) for p in problems), problems


# -- fixed stories: defects the rollout schedules found --------------------------------------------


def fleet(world: schedule.World, hosts: int, version: str = "1.0.0") -> None:
    """`hosts` simulated hosts h0.., on `version` by a fault-free deploy."""
    for i in range(hosts):
        world.hosts[f"h{i}"] = SimHost(world, f"h{i}", world.root)
    run = world.start_run(version, RunOptions())
    schedule.wait(world, [run])
    assert all(r.ok for r in run.results), [r.note for r in run.results]


def bad(world: schedule.World, host: str, how: BadRelease, version: str = "1.1.0") -> None:
    world.hosts[host].bad[release_of(world.releases[version])] = how


def told(outcome: schedule.Outcome, pattern: str) -> bool:
    """Whether the schedule violated an invariant whose line matches `pattern`."""
    return any(re.search(pattern, v) for v in outcome.violations)


def test_a_resume_does_not_install_again_where_the_crashed_run_already_failed():
    """h0 fails readiness on the new release and its installer switches it back; the control
    process crashes at that answer, while h1's install still hangs. The resume redeploys h0
    (still `deploying` in the record): a second install of the bad release, a second revert."""
    seen = {}

    def story(world: schedule.World) -> None:
        fleet(world, 2)
        bad(world, "h0", BadRelease(never_ready="plugin"))
        world.force[("stall", "h1", "upload")] = "50"
        ro = rollouts.begin(world, "1.1.0", rollout.Options(waves="100%", parallel=2))
        rollouts.live(world, ro, rollouts.Life("start", crash_at=("host", 1)))
        seen["crashed"] = ro.lives[0].crashed
        seen["h0"] = rollouts.record_of(world, ro)["hosts"]["h0"]["outcome"]
        rollouts.live(world, ro, rollouts.Life("resume"))
        seen["reverts"] = len(invariants.reverts(rollouts.check(world, ro), "h0"))

    outcome = schedule.run(1, play=story)
    assert seen["crashed"] and seen["h0"] == rollout.DEPLOYING
    still(seen["reverts"] > 1 or told(outcome, "reverted 2 times"),
          f"h0 reverted {seen['reverts']} times: {outcome.violations}")
    assert outcome.ok, outcome.violations


def test_an_abort_takes_back_a_host_the_crashed_run_changed_even_if_the_resume_skipped_it():
    """Life 1 installs h1 and h2 while h0 hangs, and crashes at h2's answer; the resume fails
    on h0 (bad release), the budget of 0 is spent while h1 still works, so h2 is skipped."""
    seen = {}

    def story(world: schedule.World) -> None:
        fleet(world, 3)
        bad(world, "h0", BadRelease(never_ready="plugin"))
        world.force[("stall", "h0", "upload")] = "100"  # life 1's install of h0 hangs
        world.force[("stall", "h1", "install")] = "30"  # the resume's install of h1 is slow
        ro = rollouts.begin(world, "1.1.0", rollout.Options(waves="100%", parallel=2,
                                                            max_fail="0"))
        rollouts.live(world, ro, rollouts.Life("start", crash_at=("host", 2)))
        seen["h2"] = world.hosts["h2"].current()
        seen["new"] = ro.target
        rollouts.live(world, ro, rollouts.Life("resume"))
        found = rollouts.check(world, ro)
        seen["state"] = found.record["state"]
        seen["outcome"] = found.record["hosts"]["h2"]["outcome"]

    outcome = schedule.run(1, play=story)
    assert seen["h2"] == seen["new"] and seen["state"] == rollout.ABORTED
    still(seen["outcome"] == rollout.NOT_STARTED or told(outcome, "h2: left on"),
          f"h2 {seen['outcome']}: {outcome.violations}")
    assert outcome.ok, outcome.violations


def test_an_abort_takes_back_a_host_whose_first_read_failed():
    seen = {}

    def story(world: schedule.World) -> None:
        fleet(world, 1)
        world.force[("transport", "h0", "installer status")] = "drop_before"  # the plan's read
        world.force[("transport", "h0", "upload")] = "drop_after"  # the install's answer
        ro = rollouts.begin(world, "1.1.0", rollout.Options(waves="100%", max_fail="0"))
        rollouts.live(world, ro, rollouts.Life("start"))
        found = rollouts.check(world, ro)
        seen["state"] = found.record["state"]
        seen["outcome"] = found.record["hosts"]["h0"]["outcome"]

    outcome = schedule.run(1, play=story)
    assert seen["state"] == rollout.ABORTED
    still(seen["outcome"] == rollout.NO_EARLIER or told(outcome, "h0: left on"),
          f"h0 {seen['outcome']}: {outcome.violations}")
    assert outcome.ok, outcome.violations


def test_the_record_does_not_claim_a_release_for_a_host_it_could_not_read():
    """h0's installer is killed after its switch, and the read-back after it is lost."""
    seen = {}

    def story(world: schedule.World) -> None:
        fleet(world, 1)
        world.force[("installer", "h0", "restart")] = "kill"
        world.force[("transport", "h0", "installer status", "2")] = "drop_before"
        ro = rollouts.begin(world, "1.1.0", rollout.Options(waves="100%"))
        rollouts.live(world, ro, rollouts.Life("start"))
        found = rollouts.check(world, ro)
        seen["entry"] = found.record["hosts"]["h0"]
        seen["current"] = world.hosts["h0"].current()

    outcome = schedule.run(1, play=story)
    entry = seen["entry"]
    assert entry["outcome"] == rollout.FAILED and seen["current"] != entry["before"]
    still(entry["now"] not in (None, seen["current"]), f"record: {entry}; host: "
          f"{seen['current']}")
    assert outcome.ok, outcome.violations


def test_an_abandoned_install_does_not_switch_behind_the_record():
    seen = {}

    def story(world: schedule.World) -> None:
        fleet(world, 2)
        world.force[("stall", "h0", "upload")] = "110"  # past its 105 s: abandoned, then runs
        world.force[("stall", "h1", "upload")] = "10"  # the run (and its lease) goes on
        ro = rollouts.begin(world, "1.1.0", rollout.Options(waves="100%", parallel=1))
        rollouts.live(world, ro, rollouts.Life("start"))
        found = rollouts.check(world, ro)
        seen["entry"] = found.record["hosts"]["h0"]
        seen["current"] = world.hosts["h0"].current()

    outcome = schedule.run(1, play=story)
    entry = seen["entry"]
    assert entry["outcome"] == rollout.FAILED and "abandoned" in entry["note"]
    still(entry["now"] is not None and entry["now"] != seen["current"],
          f"record: {entry['now']}; host: {seen['current']}")
    assert outcome.ok, outcome.violations


def test_an_install_a_crashed_run_left_stalled_never_switches_after_the_take_back():
    """Life 1's install on h0 stalls in its upload; the control process crashes at h1's
    answer. The take back reads h0 on its old release and leaves it; when the stalled installer
    wakes, its run no longer holds h0's fleet lease (the take back fenced it), so it does not
    switch (before, it did: the record said reverted, the host ran the new release)."""
    seen = {}

    def story(world: schedule.World) -> None:
        fleet(world, 2)
        world.force[("stall", "h0", "upload")] = "100"  # within its run's lease
        ro = rollouts.begin(world, "1.1.0", rollout.Options(waves="100%", parallel=2))
        rollouts.live(world, ro, rollouts.Life("start", crash_at=("host", 1)))
        seen["crashed"] = ro.lives[0].crashed
        seen["old"] = world.hosts["h0"].current()
        rollouts.live(world, ro, rollouts.Life("take back"))
        world.sched.sleep(600)  # the stalled installer wakes and finishes meanwhile
        seen["state"] = rollouts.check(world, ro).record["state"]
        seen["h0"] = world.hosts["h0"].current()

    outcome = schedule.run(1, play=story)
    assert seen["crashed"] and seen["state"] == rollout.ABORTED
    assert seen["h0"] == seen["old"], seen
    assert outcome.ok, outcome.violations


def test_a_revert_whose_audit_line_fails_leaves_the_log_agreeing_with_the_host():
    """h0 installs, h1 fails (bad release) and spends the budget; the control process crashes
    once the abort is recorded; the take back's rollback switches h0 back, and its audit line
    cannot be written."""
    seen = {}

    def story(world: schedule.World) -> None:
        fleet(world, 2)
        bad(world, "h1", BadRelease(never_ready="plugin"))
        ro = rollouts.begin(world, "1.1.0", rollout.Options(waves="100%", parallel=1,
                                                            max_fail="0"))
        rollouts.live(world, ro, rollouts.Life("start", crash_at=("aborting", 1)))
        seen["crashed"] = ro.lives[0].crashed
        world.force[("installer", "h0", "audit")] = "fail"
        rollouts.live(world, ro, rollouts.Life("take back"))
        seen["state"] = rollouts.check(world, ro).record["state"]

    outcome = schedule.run(1, play=story)
    assert seen["crashed"] and seen["state"] == rollout.ABORTED
    still(told(outcome, "the audit log says"), str(outcome.violations))
    assert outcome.ok, outcome.violations


# -- a campaign ---------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_rollout_schedules_hold_every_invariant():
    """Rollout seeds 0-299 (the last defects they found are the stories above, all fixed)."""
    summary = campaign.run(0, 300, 1, kind="rollout")
    print(summary.report())
    assert not summary.failures, "\n".join(f.describe() for f in summary.failures)
    assert all(summary.paths[p] for p in PATHS if p != "Ctrl-C"), summary.paths
