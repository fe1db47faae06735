"""Progressive rollouts through the `fleet` command line, on a sandbox fleet of light hosts:
waves, the failure budget over the whole rollout, the abort that takes every changed host back,
bad releases remembered, and a control process killed mid-rollout that `--resume` finishes.
The tests that take the `engine` fixture run on both engines: in-process and Temporal."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from deploy_helpers import release_of
from rollout_fleet import FLEET, Fleet

from fleet.deploy import rollout
from fleet.gateway import process
from fleet.gateway.layout import Layout


@pytest.fixture
def fleet20(tmp_path, artifacts):
    box = Fleet(tmp_path, 20)
    base = artifacts()
    code, out, err = box.run("deploy", "--artifact", str(base.path), "--parallel", "20")
    assert code == 0, out + err
    yield box, base
    box.stop()


@pytest.fixture
def fleet6(tmp_path, artifacts):
    box = Fleet(tmp_path, 6)
    base = artifacts()
    code, out, err = box.run("deploy", "--artifact", str(base.path))
    assert code == 0, out + err
    yield box, base
    box.stop()


WAVES = ("--waves", "1,25%,100%", "--max-fail", "10%", "--parallel", "20")


def test_a_good_release_reaches_every_host_wave_by_wave(fleet20, artifacts, engine):
    box, base = fleet20
    good = artifacts(bump="5.9.0")
    code, doc = box.json("deploy", "--artifact", str(good.path), *WAVES, "--bake", "1s",
                         *engine(box))
    assert code == 0, doc
    plan = doc["rollout"]["waves"]
    assert [len(w["hosts"]) for w in plan] == [1, 5, 14]
    assert doc["rollout"]["state"] == "completed"
    assert doc["rollout"]["stands"] == {release_of(good): box.names}
    assert {h["result"] for h in doc["hosts"]} == {"deployed"}
    assert all(box.current(n) == release_of(good) for n in box.names)
    if not doc["rollout"]["record"].startswith("temporal workflow"):
        record = Path(doc["rollout"]["record"])
        assert json.loads(record.read_text())["state"] == "completed"


def test_a_release_bad_on_some_hosts_changes_only_the_started_waves_and_all_go_back(
        fleet20, artifacts, engine):
    box, base = fleet20
    # bad on three hosts of wave 2 (h02..h06): 3 failures > 2 tolerated (10% of 20)
    bad = artifacts(bump="5.9.1", fail_on=("h03", "h04", "h06"))
    code, out, err = box.run("deploy", "--artifact", str(bad.path), *WAVES, *engine(box))
    assert code == 1, out + err
    assert "rollout plan: 3 wave(s)" in err and "ABORTING: failure budget spent" in err
    assert f"aborted and taken back: 20 on {release_of(base)}" in out
    assert all(box.current(n) == release_of(base) for n in box.names)
    started, never = box.names[:6], box.names[6:]
    assert [box.tried(n) for n in started] == [1] * 6
    assert [box.tried(n) for n in never] == [0] * 14

    # remembered: a second deploy is refused unless forced, and status names it
    code, doc = box.json("deploy", "--artifact", str(bad.path))
    assert code == 2 and "taken back by rollout" in doc["error"] and "--force" in doc["error"]
    code, out, err = box.run("status")
    assert f"bad release {release_of(bad)}: taken back by rollout" in out
    assert "runs on none of these hosts" in out
    code, doc = box.json("status")
    assert release_of(bad) in doc["bad_releases"]


def test_a_release_that_fails_its_self_test_is_stopped_and_taken_back(fleet20, artifacts,
                                                                      engine):
    box, base = fleet20
    bad = artifacts(bump="5.9.2", bad_selftest=True)
    code, doc = box.json("deploy", "--artifact", str(bad.path), *WAVES, *engine(box))
    assert code == 1
    assert doc["rollout"]["state"] == "aborted"
    failed = [h for h in doc["hosts"] if h["data"]["wave"] in (1, 2)]
    assert all("self-test failed" in h["note"] for h in failed), [h["note"] for h in failed]
    assert doc["rollout"]["stands"] == {release_of(base): box.names}


def test_bake_catches_a_host_that_stops_answering_between_waves(fleet6, artifacts, engine):
    box, base = fleet6
    good = artifacts(bump="5.9.3")
    proc = subprocess.Popen(
        [sys.executable, "-c", FLEET, "deploy", "--artifact", str(good.path), "--waves", "1,100%",
         "--max-fail", "0", "--bake", "60s", "--json", *engine(box)], cwd=box.root, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=box.environ())
    try:
        for line in proc.stderr:
            if line.startswith("baking:"):
                break
        # wave 1's host passed its gate; now its gateway goes away (supervisor first)
        assert process.stop(Layout(box.root / ".fleet" / "hosts" / "h01"), 10.0) is not None
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    doc = json.loads(out)
    assert proc.returncode == 1
    h01 = next(h for h in doc["hosts"] if h["host"] == "h01")
    assert h01["result"] == "reverted" and "during the bake" in h01["note"], h01
    assert all(h["result"] == "not_started" for h in doc["hosts"][1:])
    assert doc["rollout"]["stands"] == {release_of(base): box.names}


@pytest.mark.parametrize("point,bad", [
    ("planned", False), ("wave-1", False), ("wave-1-host", False), ("wave-1-done", False),
    ("bake-1", False), ("wave-2-host", False), ("wave-2-done", False),
    ("wave-2-host", True), ("aborting", True), ("abort-host", True)])
def test_a_control_process_killed_mid_rollout_resumes_to_the_same_outcome(
        fleet6, artifacts, point, bad):
    box, base = fleet6
    new = artifacts(bump="5.9.4", fail_on=("h02", "h03")) if bad else artifacts(bump="5.9.5")
    args = ("--artifact", str(new.path), "--waves", "1,2,100%", "--max-fail", "1",
            "--bake", "1s")
    code, out, err = box.run("deploy", *args, env={rollout.CRASH_ENV: point})
    assert code == -9, f"not killed at {point}: {code}\n{out}\n{err}"
    code, out, err = box.run("status")
    assert "in progress" in out or "running" in out or "aborting" in out, out
    code, doc = box.json("deploy", "--resume")
    want = release_of(base) if bad else release_of(new)
    assert doc["rollout"]["state"] == ("aborted" if bad else "completed"), doc
    assert doc["rollout"]["stands"] == {want: box.names}
    assert all(box.current(n) == want for n in box.names)
    assert code == (1 if bad else 0)
    # no host was switched to the new release twice
    assert all(box.installs(n, release_of(new)) <= 1 for n in box.names)
    assert not rollout.unfinished(box.root / "inventory.yaml")


def test_take_back_a_completed_wave_by_id_and_dry_run_shows_the_plan(fleet6, artifacts):
    box, base = fleet6
    new = artifacts(bump="5.9.6")
    code, out, err = box.run("deploy", "--artifact", str(new.path), "--waves", "1,50%,100%",
                             "--dry-run")
    assert code == 0, err
    assert "rollout plan: 3 wave(s)" in err and "wave 2: 3 host(s): h02, h03, h04" in err
    assert all(box.current(n) == release_of(base) for n in box.names)  # nothing changed
    code, out, err = box.run("deploy", "--artifact", str(new.path), "--waves", "1,100%",
                             env={rollout.CRASH_ENV: "wave-1-done"})
    assert code == -9
    rid = rollout.unfinished(box.root / "inventory.yaml")[0]["id"]
    code, doc = box.json("rollback", "--rollout", rid)
    assert doc["rollout"]["state"] == "aborted"
    assert doc["rollout"]["stands"] == {release_of(base): box.names}
    code, doc = box.json("deploy", "--artifact", str(new.path))
    assert code == 2 and rid in doc["error"]
    code, doc = box.json("deploy", "--artifact", str(new.path), "--force")
    assert code == 0


def test_flag_errors_change_nothing(fleet6, artifacts):
    box, base = fleet6
    for args, words in [(("--waves", "0"), "--waves"), (("--waves", "1", "--max-fail", "x"),
                                                       "--max-fail"),
                        (("--bake", "5s"), "--bake needs --waves"),
                        (("--waves", "1", "--bake", "5 min"), "--bake"),
                        (("--engine", "temporal"), "--engine temporal drives a progressive"),
                        (("--waves", "1", "--engine", "nope"), "--engine 'nope'"),
                        (("--resume",), "no rollout in progress")]:
        code, doc = box.json("deploy", *args)
        assert code == 2 and words in doc["error"], (args, doc)
    # the command it offers names the inventory, so it works when pasted elsewhere
    assert f"--inventory {box.root / 'inventory.yaml'} --waves" in doc["error"], doc


def _interrupt_while_baking(box: Fleet, artifact, *extra: str) -> tuple[int, dict]:
    proc = subprocess.Popen(
        [sys.executable, "-c", FLEET, "deploy", "--artifact", str(artifact.path), "--waves",
         "1,100%", "--bake", "8s", "--json", *extra], cwd=box.root, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        # as from a terminal: a run started in the background inherits SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for line in proc.stderr:
            if line.startswith("baking:"):
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert "Traceback" not in err, err
    return proc.returncode, json.loads(out)


def test_ctrl_c_between_waves_with_yes_takes_the_rollout_back(fleet6, artifacts):
    box, base = fleet6
    new = artifacts(bump="5.9.7")
    code, doc = _interrupt_while_baking(box, new, "--yes")
    assert code == 1 and doc["rollout"]["state"] == "aborted"
    assert "Ctrl-C" in doc["rollout"]["reason"]
    assert doc["rollout"]["stands"] == {release_of(base): box.names}


def test_ctrl_c_between_waves_without_a_terminal_pauses_and_resume_finishes(fleet6, artifacts):
    box, base = fleet6
    new = artifacts(bump="5.9.8")
    code, doc = _interrupt_while_baking(box, new)
    assert code == 1 and doc["rollout"]["state"] == "paused"
    assert doc["rollout"]["stands"] == {release_of(new): ["h01"],
                                        release_of(base): box.names[1:]}
    assert "split between releases" in doc["rollout"]["summary"]
    code, out, err = box.run("status")
    assert f"rollout {doc['rollout']['id']} paused" in out
    code, doc = box.json("deploy", "--resume", "--rollout", doc["rollout"]["id"])
    assert code == 0 and doc["rollout"]["stands"] == {release_of(new): box.names}
