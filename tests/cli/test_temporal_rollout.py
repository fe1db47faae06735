"""The Temporal engine with real processes: the session's dev server, `fleet worker` processes
and `fleet deploy --engine temporal`, each killed (SIGKILL) at a point of a rollout. In every
case the rollout ends as it would have, no host is switched to the release twice, and every
host ends on one release. (The rollout tests that run on both engines are in test_rollout.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from deploy_helpers import release_of
from rollout_fleet import Fleet, Worker

from fleet.deploy import rollout, temporalengine, temporalserver

pytestmark = pytest.mark.temporal
WAIT_S = 180.0
# A rollout's history recorded by an earlier version of fleet (a pause, then an abort that took
# a host back): this version must replay it, as a worker upgraded mid-rollout would. Rewritten
# by the pause/abort test when FLEET_RECORD_ROLLOUT_HISTORY=1, after a change that is made safe
# for rollouts in flight (docs/operations.md, "Upgrading workers").
RECORDED = Path(__file__).parent / "data" / "rollout-history.json"


@pytest.fixture
def fleet(tmp_path, artifacts, temporal_server):
    box = Fleet(tmp_path, 6)
    box.env["TEMPORAL_ADDRESS"] = temporal_server.address
    base = artifacts()
    code, out, err = box.run("deploy", "--artifact", str(base.path))
    assert code == 0, out + err
    workers: list[Worker] = []
    yield box, base, workers
    for worker in workers:
        worker.kill()
    box.stop()


class Deploy:
    """`fleet deploy --engine temporal` in the background, its stderr in a file."""

    def __init__(self, box: Fleet, *args: str):
        self.log = box.root / "deploy.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                box.command("deploy", *args, "--engine", "temporal"), cwd=box.root,
                env=box.environ(), text=True, stdin=subprocess.DEVNULL, stdout=out, stderr=out)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, words: str) -> None:
        end = time.monotonic() + WAIT_S
        while words not in self.text():
            assert self.proc.poll() is None, f"deploy ended before {words!r}:\n{self.text()}"
            assert time.monotonic() < end, f"no {words!r} within {WAIT_S:g}s:\n{self.text()}"
            time.sleep(0.2)

    def rollout_id(self) -> str:
        self.wait_for("runs on Temporal")
        return self.text().split("rollout ", 1)[1].split()[0]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


def _ends_on(box: Fleet, doc: dict, state: str, release: str, new: str) -> None:
    assert doc["rollout"]["state"] == state, doc
    assert doc["rollout"]["stands"] == {release: box.names}
    assert all(box.current(n) == release for n in box.names)
    assert all(box.installs(n, new) <= 1 for n in box.names), \
        [box.audit(n) for n in box.names]


def _status_shows(box: Fleet, rid: str) -> None:
    code, out, err = box.run("status")
    assert f"rollout {rid} " in out and "(temporal," in out, out + err
    code, doc = box.json("status")
    assert rid in [r["id"] for r in doc["rollouts_in_progress"]], doc


def test_a_worker_killed_mid_host_and_the_deploy_process_killed_the_rollout_goes_on(
        fleet, artifacts):
    box, base, workers = fleet
    new = artifacts(bump="6.1.0")
    # the first worker dies right after a wave-2 host's installer switched it, before it could
    # report the switch: the host's activity goes to the other worker, which reads it first
    workers.append(Worker(box, "doomed", env={rollout.CRASH_ENV: "wave-2-host"}))
    run = Deploy(box, "--artifact", str(new.path), "--waves", "1,2,100%", "--max-fail", "1")
    rid = run.rollout_id()
    workers[0].proc.wait(timeout=WAIT_S)
    assert workers[0].proc.returncode == -signal.SIGKILL, workers[0].text()
    run.kill()  # the control process goes too; nothing of the rollout is on this side
    _status_shows(box, rid)
    workers.append(Worker(box, "spare"))
    code, doc = box.json("rollout.resume", rid)
    assert code == 0, doc
    _ends_on(box, doc, "completed", release_of(new), release_of(new))
    assert all(box.installs(n, release_of(new)) == 1 for n in box.names)
    # the host the dead worker had switched was read, not deployed again
    assert [h["host"] for h in doc["hosts"] if "finished by the run before" in h["note"]], doc
    code, doc = box.json("status")
    assert rid not in [r["id"] for r in doc["rollouts_in_progress"]]
    _replays(temporalserver.Server(box.env["TEMPORAL_ADDRESS"]), rid)


def test_control_machine_restarted_with_the_server_kept_the_rollout_resumes(fleet, artifacts):
    box, base, workers = fleet
    new = artifacts(bump="6.1.1")
    workers += [Worker(box, "a"), Worker(box, "b")]  # two workers share the rollout
    run = Deploy(box, "--artifact", str(new.path), "--waves", "1,2,100%", "--bake", "4s")
    rid = run.rollout_id()
    run.wait_for("baking:")
    run.kill()  # every process of this machine but the server's
    for worker in workers:
        worker.kill()
    _status_shows(box, rid)
    workers.append(Worker(box, "after-restart"))
    code, doc = box.json("rollout.resume", rid)
    assert code == 0, doc
    _ends_on(box, doc, "completed", release_of(new), release_of(new))
    assert all(box.installs(n, release_of(new)) == 1 for n in box.names)


def _replays(server: temporalserver.Server, rid: str) -> str:
    """The ended rollout's history, checked to replay on this code (determinism: the path a
    worker taking it over would take is the one recorded)."""
    recorded = temporalengine.history(server, rid)
    events = json.loads(recorded)["events"]
    assert events[-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED", events[-1]
    temporalengine.replay(recorded, rid)
    return recorded


def _web_ui_shows(ui: str, rid: str) -> dict:
    """The dev server's Web UI answers for the rollout (its HTTP API, as the UI's pages read
    it), retried while the UI's backend comes up."""
    end = time.monotonic() + 60
    url = f"{ui}/api/v1/namespaces/default/workflows/{rid}"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                return json.loads(answer.read())
        except (urllib.error.URLError, OSError) as exc:
            assert time.monotonic() < end, f"{url}: {exc}"
            time.sleep(1)


def test_pause_then_abort_takes_every_changed_host_back(fleet, artifacts, temporal_server):
    box, base, workers = fleet
    new = artifacts(bump="6.1.2")
    workers.append(Worker(box, "a"))
    # a long bake: the pause cuts it short, as the abort then does
    run = Deploy(box, "--artifact", str(new.path), "--waves", "1,100%", "--bake", "10m")
    rid = run.rollout_id()
    run.wait_for("baking:")
    code, out, err = box.run("rollout.pause", rid)
    assert code == 0 and "pause sent" in err, out + err
    end = time.monotonic() + WAIT_S
    while "paused" not in box.run("status")[1]:
        assert time.monotonic() < end, "the rollout never paused"
        time.sleep(1)
    assert box.current("h01") == release_of(new)
    assert all(box.current(n) == release_of(base) for n in box.names[1:])
    shown = _web_ui_shows(temporal_server.ui, rid)
    assert shown["workflowExecutionInfo"]["type"]["name"] == "fleet-rollout", shown
    code, doc = box.json("rollout.abort", rid)
    assert code == 1, doc
    _ends_on(box, doc, "aborted", release_of(base), release_of(new))
    assert [h["result"] for h in doc["hosts"]] == ["reverted"] + ["not_started"] * 5
    run.proc.wait(timeout=WAIT_S)  # the first follower saw the same end
    assert run.proc.returncode == 1 and "aborted and taken back" in run.text()
    code, doc = box.json("deploy", "--artifact", str(new.path))
    assert code == 2 and rid in doc["error"]  # remembered as bad, as the in-process abort does
    recorded = _replays(temporal_server, rid)
    if os.environ.get("FLEET_RECORD_ROLLOUT_HISTORY") == "1":
        RECORDED.parent.mkdir(exist_ok=True)
        RECORDED.write_text(json.dumps({"id": rid, "history": json.loads(recorded)}, indent=1)
                            + "\n")


def test_a_rollout_recorded_by_an_earlier_version_replays_on_this_one():
    """A worker of this version takes over a rollout an older one started: the recorded
    pause-then-abort history replays without a nondeterminism error (no server needed)."""
    recorded = json.loads(RECORDED.read_text())
    temporalengine.replay(json.dumps(recorded["history"]), recorded["id"])


def test_a_changed_workflow_path_is_caught_by_the_replay():
    """The replay check can fail: the recorded history with one activity's name changed (what
    a reordered or renamed call in the workflow would meet) is refused, naming the rollout."""
    recorded = json.loads(RECORDED.read_text())
    text = json.dumps(recorded["history"])
    assert '"fleet.deploy"' in text, "the history schedules activities"
    changed = text.replace('"fleet.deploy"', '"fleet.deploy-renamed"', 1)
    with pytest.raises(temporalengine.EngineError, match=recorded["id"]):
        temporalengine.replay(changed, recorded["id"])


def test_a_site_without_a_worker_is_refused_before_anything_changes(fleet, artifacts):
    box, base, workers = fleet
    new = artifacts(bump="6.1.3")
    code, doc = box.json("deploy", "--artifact", str(new.path), "--waves", "1,100%",
                         "--engine", "temporal")
    assert code == 2 and f"fleet worker --queue {box.site}" in doc["error"], doc
    assert all(box.current(n) == release_of(base) for n in box.names)
    code, doc = box.json("rollout.abort", "20990101T000000Z-000000")
    assert code == 2 and "no such rollout" in doc["error"], doc


def test_without_a_configured_server_the_tasks_start_a_dev_server_and_share_it(
        tmp_path, artifacts):
    box = Fleet(tmp_path, 3)
    box.env["TEMPORAL_ADDRESS"] = ""  # none configured
    base, new = artifacts(), artifacts(bump="6.1.4")
    assert box.run("deploy", "--artifact", str(base.path))[0] == 0
    worker = None
    try:
        worker = Worker(box, "a")  # starts the inventory's dev server, detached
        server = temporalserver.running(tmp_path / ".fleet" / "temporal")
        assert server is not None and server.address.startswith("127.0.0.1:")
        code, doc = box.json("deploy", "--artifact", str(new.path), "--waves", "1,100%",
                             "--engine", "temporal")
        assert code == 0 and server.address in doc["rollout"]["record"], doc
        assert all(box.current(n) == release_of(new) for n in box.names)
        worker.kill()
        assert temporalserver.running(tmp_path / ".fleet" / "temporal") == server  # outlives it
    finally:
        if worker is not None:
            worker.kill()
        found = temporalserver.running(tmp_path / ".fleet" / "temporal")
        if found is not None:  # the dev server this test's worker started
            temporalserver.stop(found)
        box.stop()
