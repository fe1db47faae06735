"""Deploying to real OpenClaw gateways, and the continuity plugins in real agent turns, on the
releases CI tests (the whole module once per release: both ends of the declared range and one
release of each minor line between, `lab.openclaw.toolchain.OPENCLAW_VERSIONS`; the compat
matrix, `invoke openclaw.compat`, runs the continuity scenario on every stable release).

Two sandbox OpenClaw hosts (the most this machine runs at once), shared by the module's tests
for one version: they run in file order, each starting from where the previous one left the
hosts. Assertions read what the running gateway answers (each plugin's `<id>.ready`), the
scripted model's request log and the files the plugins write.
"""

from __future__ import annotations

import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from openclaw_helpers import OpenclawFleet, build, make_tree

from fleet.continuity.document import StateDocument
from fleet.deploy import rollout
from lab.openclaw.drive import (
    children_story,
    is_child_request,
    is_completion_turn,
    recovery_block,
    texts,
    wait_for,
)
from lab.openclaw.toolchain import OPENCLAW_VERSIONS
from lab.sourcetree import break_python_entry, break_python_entry_on

pytestmark = [pytest.mark.openclaw, pytest.mark.slow, pytest.mark.timeout(3600)]

OBJECTIVE = "Migrate the billing service to Postgres 16 this week"
CHILD_RESULT = "Replication lag on db-2 is 3 seconds, safe to switch"


@pytest.fixture(scope="module", params=OPENCLAW_VERSIONS, ids=lambda v: f"openclaw-{v}")
def fleet(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("ocfleet")
    ocf = OpenclawFleet(root, request.param)
    yield ocf
    ocf.down()


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    base = tmp_path_factory.mktemp("octrees")
    out = base / "dist"
    python_broken = make_tree(base / "v4", bump="5.0.3")
    break_python_entry(python_broken / "fleet" / "plugins" / "memory_continuity",
                       "broken release: the Python core raises at import")
    return {"v1": build(make_tree(base / "v1"), out),
            "v2": build(make_tree(base / "v2", bump="5.0.1"), out),
            "broken": build(make_tree(base / "v3", bump="5.0.2", throw_at_load=True), out),
            "python_broken": build(python_broken, out)}


def test_deploy_to_both_hosts_loads_the_plugins_at_the_release_versions(fleet, releases):
    art = releases["v1"]
    results = fleet.deploy(art)
    assert {h: r.result for h, r in results.items()} == {"oc-a": "installed", "oc-b": "installed"}
    want = {k: v for k, v in art.components.items() if k in ("memory-continuity", "mc")}
    for name, res in results.items():
        assert fleet[name].loaded() == want
        # after readiness, each plugin's self-test ran in its worker through `<id>.selftest`
        assert "host.selftest" in res.steps, res.steps
        verdict = res.data["selftest"]
        assert verdict["state"] == "passed", verdict
        assert {p: v["state"] for p, v in verdict["plugins"].items()} == dict.fromkeys(
            want, "passed")
    status = fleet.status()
    for res in status.values():
        gw = res.data["gateway"]
        assert res.data["ready"] is True and gw["openclaw"] == fleet.version
        assert {k: v["version"] for k, v in gw["plugins"].items()} == want
        assert {k: v["status"] for k, v in gw["plugins"].items()} == dict.fromkeys(want, "active")
        assert sorted(res.status.hooks) == sorted(want)  # each plugin's `<id>.stats`


def test_a_redeploy_changes_nothing_and_restarts_nothing(fleet, releases):
    pids = {name: fleet.gateway_pid(name) for name in fleet.hosts}
    results = fleet.deploy(releases["v1"])
    assert {r.result for r in results.values()} == {"unchanged"}
    assert not any(r.data.get("restarted") for r in results.values())
    assert {name: fleet.gateway_pid(name) for name in fleet.hosts} == pids


def test_recovery_context_reaches_the_parents_model_request(fleet):
    fleet["oc-a"].agent(f"{OBJECTIVE} [[reply: Plan: dump, restore, switch DNS.]]")
    state = fleet.state("oc-a") / "workspace" / "memory" / "CURRENT_STATE.md"
    wait_for("the parent's CURRENT_STATE.md", lambda: state.exists() and OBJECTIVE in
             state.read_text())
    # the user's words, not OpenClaw's bootstrap prefix or timestamp envelope around them
    assert StateDocument.parse(state.read_text()).get("Objective").startswith(OBJECTIVE)
    before = len(fleet["oc-a"].requests())
    fleet["oc-a"].agent("What is next? [[reply: Next: restore on db-2.]]")
    later = fleet["oc-a"].requests()[before:]
    assert later and any(OBJECTIVE in texts(r) for r in later)


def test_a_child_gets_the_parents_seed_and_its_result_reaches_the_parent_once(fleet):
    before = len(fleet["oc-a"].requests())
    # PARENT-MARKER is in the parent's message (so in its state), not in the child's task
    fleet["oc-a"].agent("PARENT-MARKER-7f3: check the replication lag on db-2 "
                        f"[[spawn: Check the replication lag on db-2 | reply: {CHILD_RESULT} | "
                        "label: lag]] [[reply: Asked a subagent.]]")

    def child_request():
        return [r for r in fleet["oc-a"].requests()[before:]
                if is_child_request(r) and r["reply"] == CHILD_RESULT]

    child = texts(wait_for("the child's model request", child_request)[0])
    seed = child.split("=== PARENT AGENT CONTEXT ===", 1)[1].split("=== END PARENT CONTEXT", 1)[0]
    assert "PARENT-MARKER-7f3" in seed
    # The parent's turn on the child's completion event ends with its own checkpoint: wait for
    # that, then the recovered result must be in the parent's Unsurfaced Results exactly once.
    announce = wait_for("the parent's turn on the child's completion", lambda: [
        r for r in fleet["oc-a"].requests()[before:] if is_completion_turn(r)])[0]
    state = fleet.state("oc-a") / "workspace" / "memory" / "CURRENT_STATE.md"

    def unsurfaced():
        if state.stat().st_mtime <= announce["t"]:
            return None
        return state.read_text().split("## Unsurfaced Results", 1)[1]

    section = wait_for("the child's result in the parent's Unsurfaced Results",
                       lambda: CHILD_RESULT in (unsurfaced() or "") and unsurfaced())
    # counted on the note's Result line: its Task line quotes the task, which names the reply
    assert section.count(f"Result: {CHILD_RESULT}") == 1


def test_two_children_ending_together_each_reach_the_parent_once(fleet):
    """Two parent turns at once, each spawning a child: both children end within a second, each
    with its own announce turn in the parent. Neither announce turn may take the parent's
    objective, nor push the other child's note out of Unsurfaced Results unseen.

    A note leaves Unsurfaced Results only once the parent's model saw it: when a child ends
    before the parent's other turn builds its prompt (under load; 2026.8.2 also steers a
    completion into the still-running spawning turn), that turn's recovery block shows the note
    and its checkpoint drops it. Either way the result reaches the parent exactly once."""
    results = [f"Archive partition {i} verified: {uuid.uuid4().hex[:8]}" for i in (1, 2)]
    start = threading.Barrier(2)
    before = len(fleet["oc-a"].requests())

    def turn(i: int) -> None:
        start.wait(timeout=60)
        fleet["oc-a"].agent(f"Check archive partition {i} [[spawn: Verify archive partition {i} "
                            f"| reply: {results[i - 1]} | label: part{i}]] [[reply: Asked.]]")

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(turn, (1, 2)))  # a failed turn raises here
    memory = fleet.state("oc-a") / "workspace" / "memory"

    def section(name: str) -> str:
        return StateDocument.parse((memory / "CURRENT_STATE.md").read_text()).get(name)

    def shown(text: str) -> list[str]:
        """The parent's recovery blocks (after this test began) that showed `text`'s note."""
        blocks = [recovery_block(r) for r in fleet["oc-a"].requests()[before:]
                  if not is_child_request(r)]
        return [b for b in blocks if f"Result: {text}" in b]

    for text in results:
        wait_for(f"{text!r} in the parent's Unsurfaced Results or shown to its model",
                 lambda t=text: t in section("Unsurfaced Results") or shown(t),
                 explain=lambda: children_story(fleet["oc-a"], before))
    notes = section("Unsurfaced Results")
    for text in results:
        assert notes.count(f"Result: {text}") == 1 or (
            f"Result: {text}" not in notes and shown(text)), (text, notes)
    # The objective is the user's last request, not a completion event (the announce turns).
    assert section("Objective").startswith("Check archive partition "), section("Objective")
    # Each child's own state names its task, not OpenClaw's [Subagent Context] envelope.
    tasks = sorted(StateDocument.parse(path.read_text()).get("Objective")
                   for path in (memory / "subagents").glob("*/CURRENT_STATE.md"))
    for i in (1, 2):
        assert f"Verify archive partition {i} [[reply: {results[i - 1]}]]" in tasks, tasks
    task = f"Task: Verify archive partition 1 [[reply: {results[0]}]]"
    assert f"  {task}" in notes or any(task in b for b in shown(results[0])), notes


def test_mc_subagents_answers_through_chat_send(fleet):
    fleet["oc-a"].chat("/mc subagents")
    wait_for("the /mc subagents answer",
             lambda: "Subagent State Overview" in fleet["oc-a"].history_text())


def test_compact_writes_the_compaction_snapshot(fleet):
    memory = fleet.state("oc-a") / "workspace" / "memory"
    snapshot = memory / "COMPACTION_SNAPSHOT.md"
    assert not snapshot.exists()
    objective = (memory / "CURRENT_STATE.md").read_text().split("## Objective\n", 1)[1]
    objective = objective.split("\n", 1)[0].strip()
    fleet["oc-a"].chat("/compact")
    text = wait_for("COMPACTION_SNAPSHOT.md", lambda: snapshot.exists() and snapshot.read_text())
    assert "=== CONTINUITY RECOVERY ===" in text and f"Objective: {objective}" in text


def test_an_upgrade_reaches_the_new_version_on_both_hosts(fleet, releases):
    results = fleet.deploy(releases["v2"])
    assert {r.result for r in results.values()} == {"installed"}, \
        {h: r.data.get("reason") for h, r in results.items()}
    for name in fleet.hosts:
        assert fleet[name].loaded()["memory-continuity"] == "5.0.1"


def test_a_plugin_that_throws_at_load_is_rolled_back_on_both_hosts(fleet, releases):
    results = fleet.deploy(releases["broken"])
    for res in results.values():
        assert res.result == "rolled_back", res.data.get("reason")
        assert "broken release: the entry throws at load" in res.data["reason"]
        assert res.data["to"]["components"]["memory-continuity"] == "5.0.1"
    for name in fleet.hosts:  # the old version answers
        assert fleet[name].loaded() == {"memory-continuity": "5.0.1", "mc": "2.1.0"}
        # OpenClaw restores a plugin after a failed reload by copying its directory: each one
        # carries its bridge, so no restore fails on an import from outside it
        log = fleet.state(name) / "logs" / "fleet-openclaw-gateway.log"
        assert "ERR_MODULE_NOT_FOUND" not in (log.read_text() if log.exists() else "")


def test_a_release_whose_python_cannot_load_is_rolled_back_on_both_hosts(fleet, releases):
    """Its JS entries load and OpenClaw lists both plugins active; only the workers cannot
    start. Readiness asks each plugin's worker, so the deploy fails and rolls back."""
    results = fleet.deploy(releases["python_broken"])
    for res in results.values():
        assert res.result == "rolled_back", res.data.get("reason")
        assert "broken release: the Python core raises at import" in res.data["reason"]
    for name in fleet.hosts:
        assert fleet[name].loaded() == {"memory-continuity": "5.0.1", "mc": "2.1.0"}


# Progressive rollouts on real gateways: at both ends of the range (each rollout is several
# OpenClaw deploys; the sandbox tier runs them on every path, fleet/deploy/rollout.py).
_BY_AGE = sorted(OPENCLAW_VERSIONS, key=lambda v: tuple(int(p) for p in v.split(".")))
ROLLOUT_ENDS = (_BY_AGE[0], _BY_AGE[-1])


class _Crash(Exception):
    """The control side dying after a wave (the CLI tests kill a real process)."""


class _DieAfterWave(rollout.RolloutUI):
    def wave_done(self, index, results):
        raise _Crash(f"after wave {index + 1}")


def _rollout_only_at_the_ends(fleet):
    if fleet.version not in ROLLOUT_ENDS:
        pytest.skip(f"rollouts are proven on OpenClaw {' and '.join(ROLLOUT_ENDS)}")


def test_a_rollout_bad_on_one_host_is_taken_back_on_both(fleet, releases, tmp_path):
    _rollout_only_at_the_ends(fleet)
    before = {name: fleet.status()[name].status.current["release"] for name in fleet.hosts}
    tree = make_tree(tmp_path / "bad", bump="5.0.6")
    break_python_entry_on(tree / "fleet" / "plugins" / "memory_continuity", ["oc-b"],
                          "bad on oc-b only")
    bad = build(tree, tmp_path / "dist")
    hosts = list(fleet.hosts.values())
    record = rollout.Rollout.start(fleet.root / "inventory.yaml", hosts, bad, rollout.Options(
        waves="1,100%", max_fail="0", allow_unproven_openclaw=True)).run()
    outcome = {n: h["outcome"] for n, h in record["hosts"].items()}
    assert record["state"] == "aborted" and outcome == {"oc-a": "reverted", "oc-b": "reverted"}
    assert "failed to load" in record["hosts"]["oc-b"]["note"]  # its own installer said so
    after = fleet.status()
    for name in fleet.hosts:  # both answer on the release they ran before
        assert after[name].status.current["release"] == before[name]
        assert after[name].status.ready
        assert fleet[name].loaded() == {"memory-continuity": "5.0.1", "mc": "2.1.0"}


def test_a_rollout_whose_control_side_died_after_a_wave_resumes_to_both(fleet, tmp_path):
    _rollout_only_at_the_ends(fleet)
    good = build(make_tree(tmp_path / "good", bump="5.0.7"), tmp_path / "dist")
    hosts = list(fleet.hosts.values())
    inv = fleet.root / "inventory.yaml"
    started = rollout.Rollout.start(inv, hosts, good, rollout.Options(
        waves="1,100%", max_fail="0", bake_s=2.0, allow_unproven_openclaw=True), _DieAfterWave())
    with pytest.raises(_Crash):
        started.run()
    (pending,) = rollout.unfinished(inv)
    # it died before closing wave 1, which the record knows oc-a finished
    assert pending["next_wave"] == 0 and pending["hosts"]["oc-a"]["outcome"] == "deployed"
    record = rollout.Rollout(inv, rollout.load(inv, pending["id"]), hosts, good).run()
    assert record["state"] == "completed"
    assert {h["outcome"] for h in record["hosts"].values()} == {"deployed"}
    for name in fleet.hosts:
        assert fleet[name].loaded()["memory-continuity"] == "5.0.7"


def _runs(pid: int) -> bool:
    """Whether `pid` still runs. A stopped gateway whose starter has exited is reparented and
    may stay a zombie until its new parent reaps it (a container's PID 1 may never do so): a
    zombie runs nothing, holds no port, and counts as stopped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_remove_takes_fleet_off_both_hosts_and_leaves_a_config_openclaw_accepts(fleet, releases):
    """Last in the module: `fleet remove` stops each gateway, takes fleet's plugins out of
    openclaw.json (OpenClaw validated the result before it was written) and deletes fleet's
    files; the agents' memory stays, and a deploy afterwards starts afresh."""
    pids = {name: fleet.gateway_pid(name) for name in fleet.hosts}
    assert all(pids.values()), pids
    memory = {name: {p: p.read_bytes() for p in (fleet.state(name) / "workspace").rglob("*")
                     if p.is_file()} for name in fleet.hosts}
    assert any(memory["oc-a"]), "the turns above wrote memory"
    results = fleet.remove()
    assert {h: r.result for h, r in results.items()} == {"oc-a": "removed", "oc-b": "removed"}
    for name in fleet.hosts:
        assert not _runs(pids[name]), f"{name}'s gateway (pid {pids[name]}) still runs"
        state = fleet.state(name)
        assert not (state / "fleet").exists()
        config = json.loads(fleet[name].manager().config_path.read_text())
        plugins = config.get("plugins", {})
        assert not [p for p in plugins.get("load", {}).get("paths", []) if "/fleet/" in p]
        assert not {"memory-continuity", "mc"} & set(plugins.get("entries", {}))
        assert {p: p.read_bytes() for p in (state / "workspace").rglob("*")
                if p.is_file()} == memory[name], "the agents' memory stays"
        assert fleet.status()[name].data.get("installed") is False
    if fleet.version in ROLLOUT_ENDS:
        again = fleet.deploy(releases["v1"])
        assert {r.result for r in again.values()} == {"installed"}
        for name in fleet.hosts:
            assert fleet[name].loaded()["memory-continuity"] == releases["v1"].components[
                "memory-continuity"]
