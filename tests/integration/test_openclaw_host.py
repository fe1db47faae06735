"""The OpenClaw host of the harness (`claw`): systemd as PID 1, Node + OpenClaw from the project's
toolchain in an image layer, the scripted model on the container's own loopback, OpenClaw's
gateway the login user's systemd service (installed by `openclaw gateway install`, as an operator
does once). `openclaw gateway restart` really replaces the gateway; `invoke deploy` with the
`openclaw` manager puts fleet's plugins into it over SSH; then real agent turns, driven over SSH
with OpenClaw's own CLI, spawn children whose model requests carry the parent's seed.

One claw host for the module (one real gateway); the tests run in file order, each from where the
previous one left it. Needs the toolchain (`invoke openclaw.install`); marker `openclaw`.
"""

from __future__ import annotations

import atexit
import json
import shlex
import threading
import uuid

import pytest
from integration_helpers import deploy

from fleet.installer.openclawgw import health_from_listing
from lab.harness import cleanup, hosts, openclawlayer
from lab.harness.keys import generate_key
from lab.harness.run import Harness
from lab.openclaw.drive import is_child_request, is_completion_turn, texts, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.openclaw, pytest.mark.timeout(1800)]

CLAW = hosts.HostSpec("claw", "opc", init="systemd", openclaw=True)
PLUGINS = ("memory-continuity", "mc")
STATE_MD = "/home/opc/.openclaw/workspace/memory/CURRENT_STATE.md"
MODEL_LOG = "/home/opc/model-requests.jsonl"
OBJECTIVE = "Migrate the harbour database to Postgres 16 this week"


@pytest.fixture(scope="module")
def claw(docker_engine, tmp_path_factory, openclaw_toolchain):
    run = Harness(docker_engine, tmp_path_factory.mktemp("claw"))
    atexit.register(cleanup.remove_run, docker_engine, run.run_id)
    run.key = generate_key(run.directory)
    try:
        run.start_hosts([CLAW])
        yield run
    finally:
        run.close()


def plugin_versions(run) -> dict[str, str]:
    """Versions of fleet's plugins that the running gateway itself lists as active, over SSH."""
    out = run.ssh("claw", "openclaw gateway call plugins.list --json", timeout=180)
    assert out.ok, out.stdout[-2000:] + out.stderr[-2000:]
    return health_from_listing(json.loads(out.stdout), list(PLUGINS), None, None)["versions"]


def agent(run, message: str, timeout: int = 600) -> None:
    """One real agent turn of agent `main`, through OpenClaw's CLI over SSH as opc."""
    out = run.ssh("claw", f"openclaw agent --agent main --message {shlex.quote(message)} "
                          f"--json --timeout {timeout}", timeout=timeout + 60)
    assert out.ok, out.stdout[-2000:] + out.stderr[-2000:]


def requests(run) -> list[dict]:
    """What the scripted model received (its JSON-lines log), read over SSH. The log is appended
    to while we read: what follows the last newline is a line still being written, left out."""
    out = run.ssh("claw", f"cat {MODEL_LOG} 2>/dev/null || true", timeout=60)
    complete = out.stdout.split("\n")[:-1]
    return [json.loads(line) for line in complete if line.strip()]


def parent_state(run) -> str:
    return run.ssh("claw", f"cat {STATE_MD} 2>/dev/null || true", timeout=60).stdout


def unsurfaced(run) -> str:
    """The parent's `## Unsurfaced Results` section, where recovered child results go."""
    return parent_state(run).partition("## Unsurfaced Results")[2]


def completion_turns(run, since: int) -> int:
    """How many of the parent's turns on a child's completion event the model has seen."""
    return sum(1 for r in requests(run)[since:] if is_completion_turn(r))


def test_openclaw_runs_as_the_login_user_and_gateway_restart_replaces_it(claw):
    run = claw
    version = run.ssh("claw", "openclaw --version")
    assert version.ok and "2026.9.6" in version.stdout, version.stdout + version.stderr
    assert run.ssh("claw", "systemctl --user is-active fleet-model.service").ok
    first = openclawlayer.main_pid(run, "claw")
    owner = run.hosts["claw"].exec_ok(f"ps -o user= -p {first}").strip()
    assert owner == "opc", "the login user runs the gateway"
    # Its exit status is not asserted: on a loaded machine its own readiness budget (62 s) can
    # run out while the new gateway still starts; what must hold is the new ready gateway.
    run.ssh("claw", "openclaw gateway restart", timeout=240)
    second = openclawlayer.wait_ready(run, "claw", old_pid=first)
    assert second != first


def test_invoke_deploy_puts_the_plugins_into_the_running_gateway(claw, artifacts):
    base = artifacts()
    result = deploy(claw.inventory_path, base)
    assert result.code == 0, (result.data, result.stderr[-3000:])
    assert result.hosts()["claw"]["result"] == "installed"
    assert plugin_versions(claw) == {pid: base.components[pid] for pid in PLUGINS}


def test_a_child_gets_the_parents_seed_and_its_result_reaches_the_parent_once(claw):
    agent(claw, f"{OBJECTIVE} [[reply: Plan: dump, restore, switch DNS.]]")
    wait_for("the parent's CURRENT_STATE.md", lambda: OBJECTIVE in parent_state(claw))
    before = len(requests(claw))
    result = "Replication lag on db-2 is 3 seconds, safe to switch"
    agent(claw, "PARENT-MARKER-c1a: check the replication lag on db-2 "
                f"[[spawn: Check the replication lag on db-2 | reply: {result} | label: lag]] "
                "[[reply: Asked a subagent.]]")

    def child_request():
        return [r for r in requests(claw)[before:]
                if is_child_request(r) and r.get("reply") == result]

    child = texts(wait_for("the child's model request", child_request)[0])
    assert "=== PARENT AGENT CONTEXT ===" in child, child[-2000:]
    seed = child.split("=== PARENT AGENT CONTEXT ===", 1)[1].split("=== END PARENT CONTEXT", 1)[0]
    assert "PARENT-MARKER-c1a" in seed
    assert "PARENT-MARKER-c1a" not in child.split("[Subagent Task]", 1)[1]
    wait_for("the parent's turn on the child's completion",
             lambda: completion_turns(claw, before) >= 1)
    wait_for("the child's result in the parent's Unsurfaced Results",
             lambda: result in unsurfaced(claw))
    # counted on the note's Result line: its Task line quotes the task, which names the reply
    assert unsurfaced(claw).count(f"Result: {result}") == 1


def test_two_children_ending_together_lose_nothing(claw):
    results = [f"Archive partition {i} verified: {uuid.uuid4().hex[:8]}" for i in (1, 2)]
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def turn(i: int) -> None:
        try:
            start.wait(timeout=30)
            agent(claw, f"Check archive partition {i} [[spawn: Verify archive partition {i} | "
                        f"reply: {results[i - 1]} | label: part{i}]] [[reply: Asked.]]")
        except BaseException as exc:  # reported below
            errors.append(exc)

    before = len(requests(claw))
    threads = [threading.Thread(target=turn, args=(i,)) for i in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=900)
    assert not errors, errors
    # OpenClaw may fold both completion events into one parent turn: wait for one, then for both
    # results.
    wait_for("the parent's turn on a completion", lambda: completion_turns(claw, before) >= 1)
    for text in results:
        wait_for(f"{text!r} in the parent's Unsurfaced Results",
                 lambda t=text: t in unsurfaced(claw))
    section = unsurfaced(claw)
    assert [section.count(f"Result: {text}") for text in results] == [1, 1], section
    # The parent's turns on the completions (announce, settle wake) do not take its objective.
    objective = parent_state(claw).partition("## Objective")[2].partition("\n## ")[0]
    assert "Check archive partition" in objective, objective


def test_mc_subagents_answers(claw):
    params = {"sessionKey": "agent:main:main", "message": "/mc subagents",
              "idempotencyKey": uuid.uuid4().hex}
    sent = claw.ssh("claw", "openclaw gateway call chat.send --json --params "
                            f"{shlex.quote(json.dumps(params))}", timeout=300)
    assert sent.ok, sent.stdout[-2000:] + sent.stderr[-2000:]
    history = {"sessionKey": "agent:main:main", "limit": 10}

    def answered():
        out = claw.ssh("claw", "openclaw gateway call chat.history --json --params "
                               f"{shlex.quote(json.dumps(history))}", timeout=120)
        return out.ok and "Subagent State Overview" in out.stdout

    wait_for("the /mc subagents answer", answered)


def test_an_upgrade_reaches_the_running_gateway(claw, artifacts):
    upgrade = artifacts("5.0.1")
    moved = deploy(claw.inventory_path, upgrade)
    assert moved.code == 0, (moved.data, moved.stderr[-3000:])
    assert plugin_versions(claw) == {pid: upgrade.components[pid] for pid in PLUGINS}
    assert upgrade.components["memory-continuity"] == "5.0.1"
