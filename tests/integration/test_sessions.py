"""Parent/child sessions on every harness host, driven over SSH through the gateway client.

Each host runs the deployed gateway; every request goes through the release's own client as the
host's login user (opc or administrator). Markers are unique per host so a result can only be found
where it was produced.
"""

from __future__ import annotations

import threading

import pytest

from lab.harness.remote import RemoteGateway

pytestmark = pytest.mark.docker

HOSTS = ["cloud", "pi", "edge-1"]
TOOL_OUTPUT = "RAW-TOOL-OUTPUT do-not-announce"


@pytest.fixture(scope="module")
def gateways(deployed):
    return {name: RemoteGateway(deployed, name) for name in HOSTS}


def _state_file(gw: RemoteGateway, workspace: str = "workspace") -> str:
    return gw.read(f"{gw.host.state_dir}/{workspace}/memory/CURRENT_STATE.md") or ""


def _parent(gw: RemoteGateway, name: str, marker: str) -> str:
    """A parent session whose checkpointed state names `marker` as its objective."""
    key = f"agent:main:{name}"
    gw.call("session.start", sessionKey=key)
    gw.call("session.turn", sessionKey=key, prompt=f"Migrate the harbour database {marker}",
            steps=[f"Plan drafted for {marker}"])
    return key


def _announces(gw: RemoteGateway, parent: str) -> list[str]:
    messages = gw.call("transcript", sessionKey=parent)["messages"]
    texts = []
    for msg in messages:
        meta = msg.get("__openclaw") or {}
        if meta.get("kind") == "subagent_announce":
            texts.append("\n".join(b.get("text", "") for b in msg["content"]))
    return texts


@pytest.mark.parametrize("name", HOSTS)
def test_parent_state_seeds_the_child_and_its_result_is_recovered(gateways, name):
    gw = gateways[name]
    marker = f"SEED-{name}"
    parent = _parent(gw, "seed", marker)
    assert marker in _state_file(gw), "the parent's run must checkpoint its objective"
    child = gw.call("subagent.spawn", parentSessionKey=parent, task="verify backups",
                    prompt="verify backups", steps=[f"Backups verified: RESULT-{name}"])
    injected = child["turn"]["injectedContext"] or ""
    assert "=== PARENT AGENT CONTEXT ===" in injected and marker in injected
    ended = gw.call("subagent.end", childSessionKey=child["childSessionKey"], outcome="ok")
    assert ended["announce"]["state"] == "delivered"
    assert f"RESULT-{name}" in _state_file(gw), "the child's unsurfaced result reaches the parent"
    assert any(f"RESULT-{name}" in text for text in _announces(gw, parent))


@pytest.mark.parametrize("name", HOSTS)
def test_child_compacting_mid_run_announces_only_its_final_answer(gateways, name):
    gw = gateways[name]
    parent = _parent(gw, "compact", f"COMPACT-{name}")
    child = gw.call("subagent.spawn", parentSessionKey=parent, task="scan logs",
                    prompt="scan logs",
                    steps=[{"tool": "exec", "args": {"command": "grep -r ERROR /var/log"},
                            "result": TOOL_OUTPUT},
                           {"compaction": {}}])
    key = child["childSessionKey"]
    ended = gw.call("subagent.end", childSessionKey=key, outcome="ok")
    assert ended["announce"]["state"] == "pending", "nothing final yet: the announce must wait"
    assert _announces(gw, parent) == []
    gw.call("session.turn", sessionKey=key, prompt="continue",
            steps=[f"FINAL-ANSWER-{name}: 3 errors, all in cron"])
    texts = _announces(gw, parent)
    assert len(texts) == 1
    assert f"FINAL-ANSWER-{name}" in texts[0] and TOOL_OUTPUT not in texts[0]


@pytest.mark.parametrize("name", HOSTS)
def test_persistent_subagent_is_reused_and_disposed_with_its_session(gateways, name):
    gw = gateways[name]
    parent = _parent(gw, "persist", f"PERSIST-{name}")
    first = gw.call("persistent.invoke", sessionKey=parent, key="ask_openclaw",
                    input="first question", steps=["first answer"])
    second = gw.call("persistent.invoke", sessionKey=parent, key="ask_openclaw",
                     input="second question", steps=["second answer"])
    assert (first["reused"], second["reused"]) == (False, True)
    child = first["instance"]["childSessionKey"]
    assert second["instance"]["childSessionKey"] == child
    assert second["instance"]["invocations"] == 2
    assert len(gw.call("persistent.status", sessionKey=parent)["instances"]) == 1
    gw.call("session.close", sessionKey=parent, reason="new")
    assert gw.call("persistent.status", sessionKey=parent)["instances"] == []
    closed = gw.call("transcript", sessionKey=child)["session"]
    assert closed.get("closedAt"), "the instance's session closes with its parent"


@pytest.mark.parametrize("name", HOSTS)
def test_two_children_ending_at_once_lose_no_result(gateways, name):
    gw = gateways[name]
    parent = _parent(gw, "pair", f"PAIR-{name}")
    children = [
        gw.call("subagent.spawn", parentSessionKey=parent, task=f"check archive partition {i}",
                prompt=f"check archive partition {i}",
                steps=[f"PART-{i}-{name} done"])["childSessionKey"]
        for i in (1, 2)
    ]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def end(key: str) -> None:
        try:
            start.wait(timeout=30)
            gw.call("subagent.end", childSessionKey=key, outcome="ok")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=end, args=(key,)) for key in children]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    assert not errors, errors
    state = _state_file(gw)
    announced = "\n".join(_announces(gw, parent))
    for i in (1, 2):
        assert f"PART-{i}-{name}" in state
        assert f"PART-{i}-{name}" in announced

