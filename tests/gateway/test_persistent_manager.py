"""Persistent subagents through the in-process gateway."""

from __future__ import annotations

from gateway_helpers import hook_log, ok

CFG = {"lifetime": "persistent_session"}


def parent(gw, key="agent:main:main"):
    return ok(gw, "session.start", sessionKey=key)["sessionKey"]


def test_one_instance_per_session_and_key_reused_across_calls(recorder_gateway):
    gw = recorder_gateway
    p1 = parent(gw)
    p2 = parent(gw, "agent:main:other")
    a = ok(gw, "persistent.invoke", sessionKey=p1, key="ask_openclaw", config=CFG,
           input="q1", steps=["a1"])
    b = ok(gw, "persistent.invoke", sessionKey=p1, key="ask_openclaw", config=CFG,
           input="q2", steps=["a2"])
    c = ok(gw, "persistent.invoke", sessionKey=p2, key="ask_openclaw", config=CFG,
           input="q3", steps=["a3"])
    d = ok(gw, "persistent.invoke", sessionKey=p1, key="generate_image", config=CFG,
           input="q4", steps=["a4"])
    assert (a["reused"], b["reused"], c["reused"], d["reused"]) == (False, True, False, False)
    child = a["instance"]["childSessionKey"]
    assert b["instance"]["childSessionKey"] == child
    assert c["instance"]["childSessionKey"] != child
    assert d["instance"]["childSessionKey"] != child
    assert b["instance"]["invocations"] == 2
    assert (a["text"], b["text"], a["state"]) == ("a1", "a2", "completed")
    # the instance keeps its own transcript across calls
    msgs = ok(gw, "transcript", sessionKey=child)["messages"]
    texts = [m["content"][0]["text"] for m in msgs]
    assert texts == ["q1", "a1", "q2", "a2"]
    # the instance is a child of its parent: spawned once (mode "session"), with its requester
    spawned = [h for h in hook_log(gw.layout.state_dir)
               if h["hook"] == "subagent_spawned" and h["event"]["childSessionKey"] == child]
    assert [(h["event"]["mode"], h["ctx"]["requesterSessionKey"]) for h in spawned] == [
        ("session", p1)]


def test_instances_are_disposed_when_the_parent_session_closes(recorder_gateway):
    gw = recorder_gateway
    p = parent(gw)
    first = ok(gw, "persistent.invoke", sessionKey=p, key="k", config=CFG, input="q",
               steps=["need more"], waitingInput=True)
    assert first["state"] == "waiting_input"
    ok(gw, "session.close", sessionKey=p)
    st = ok(gw, "persistent.status")
    assert st["instances"] == []
    assert [r["state"] for r in st["runs"]] == ["cancelled"]
    child = ok(gw, "transcript", sessionKey=first["instance"]["childSessionKey"])["session"]
    assert child.get("closedAt")
    p = parent(gw)  # same key, new session: a fresh instance
    again = ok(gw, "persistent.invoke", sessionKey=p, key="k", config=CFG, input="q",
               steps=["hi"])
    assert again["reused"] is False


def test_waiting_input_run_is_resumed_by_the_next_call(recorder_gateway):
    gw = recorder_gateway
    p = parent(gw)
    a = ok(gw, "persistent.invoke", sessionKey=p, key="k", config=CFG, input="q",
           steps=["which file?"], waitingInput=True)
    b = ok(gw, "persistent.invoke", sessionKey=p, key="k", config=CFG, input="notes.md",
           steps=["done"])
    assert a["runId"] == b["runId"]
    runs = ok(gw, "persistent.status", sessionKey=p)["runs"]
    assert runs[0]["history"] == ["running", "waiting_input", "running", "completed"]


def test_pending_message_queues_completion_and_failure_notifications(recorder_gateway):
    gw = recorder_gateway
    p = parent(gw)
    cfg = dict(CFG, pendingMessage="Working on it, I'll tell you.")
    done = ok(gw, "persistent.invoke", sessionKey=p, key="ask", config=cfg, input="q",
              steps=["the answer is 42"])
    failed = ok(gw, "persistent.invoke", sessionKey=p, key="ask", config=cfg, input="q2",
                steps=[], error="provider unavailable")
    assert done["notificationQueued"] and failed["notificationQueued"]
    assert failed["state"] == "failed"
    turn = ok(gw, "session.turn", sessionKey=p, prompt="anything new?", steps=["yes"])
    assert turn["notifications"] == [
        "[ask] completed: the answer is 42",
        "[ask] failed: provider unavailable",
    ]
    # drained: the next turn gets none
    assert ok(gw, "session.turn", sessionKey=p, prompt="more?", steps=["no"])["notifications"] == []
    msgs = ok(gw, "transcript", sessionKey=p)["messages"]
    tool_results = [m for m in msgs if m["role"] == "toolResult"]
    assert [m["content"][0]["text"] for m in tool_results] == [
        "Working on it, I'll tell you.", "Working on it, I'll tell you."]


def test_silent_result_enters_context_without_a_notification(recorder_gateway):
    gw = recorder_gateway
    p = parent(gw)
    cfg = dict(CFG, pendingMessage="On it.")
    res = ok(gw, "persistent.invoke", sessionKey=p, key="ask", config=cfg, input="again",
             steps=["same result as before"], scheduling="silent")
    assert res["notificationQueued"] is False
    msgs = ok(gw, "transcript", sessionKey=p)["messages"]
    texts = [m["content"][0]["text"] for m in msgs if m["role"] == "toolResult"]
    assert texts == ["On it.", "same result as before"]
    assert ok(gw, "session.turn", sessionKey=p, prompt="x", steps=["y"])["notifications"] == []


def test_bad_invocations_are_refused_with_the_key_named(recorder_gateway):
    gw = recorder_gateway
    p = parent(gw)
    resp = gw.handle({"op": "persistent.invoke", "sessionKey": p, "key": "k",
                      "config": {"lifetime": "forever"}})
    assert not resp["ok"] and "config.lifetime" in resp["error"]
    resp = gw.handle({"op": "persistent.invoke", "sessionKey": p, "config": CFG})
    assert not resp["ok"] and "key" in resp["error"]
    resp = gw.handle({"op": "persistent.invoke", "sessionKey": p, "key": "k", "config": CFG,
                      "scheduling": "loud"})
    assert not resp["ok"] and "scheduling" in resp["error"]


def test_a_failed_turn_fails_the_run_instead_of_leaving_it_running(recorder_gateway):
    gw = recorder_gateway
    p = parent(gw)
    resp = gw.handle({"op": "persistent.invoke", "sessionKey": p, "key": "k", "config": CFG,
                      "input": "q", "steps": [{"bogus": 1}]})
    assert not resp["ok"] and "steps[0]" in resp["error"]
    assert [r["state"] for r in ok(gw, "persistent.status", sessionKey=p)["runs"]] == ["failed"]
    again = ok(gw, "persistent.invoke", sessionKey=p, key="k", config=CFG, input="q",
               steps=["fine"])
    assert again["reused"] is True and again["state"] == "completed"


def test_instances_survive_a_gateway_restart(recorder_gateway):
    from fleet.gateway.service import Gateway

    gw = recorder_gateway
    p = parent(gw)
    first = ok(gw, "persistent.invoke", sessionKey=p, key="k", config=CFG, input="q",
               steps=["a"])
    gw2 = Gateway(gw.layout)  # a new process reading the same state dir
    gw2.load_plugins()
    second = ok(gw2, "persistent.invoke", sessionKey=p, key="k", config=CFG, input="q2",
                steps=["b"])
    assert second["reused"] is True
    assert second["instance"]["childSessionKey"] == first["instance"]["childSessionKey"]
    assert second["instance"]["invocations"] == 2
