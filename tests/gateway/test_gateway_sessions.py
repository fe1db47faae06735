"""Sessions, turns, subagents and announces through the in-process gateway (one op table)."""

from __future__ import annotations

import json
import re

from gateway_helpers import hook_log, ok

from fleet.continuity import subagenttask


def test_turn_fires_hooks_with_openclaw_shapes_and_returns_injected_context(recorder_gateway):
    gw = recorder_gateway
    s = ok(gw, "session.start", agentId="main")
    assert s["sessionKey"] == "agent:main:main"
    assert s["workspaceDir"] == str(gw.layout.state_dir / "workspace")
    turn = ok(gw, "session.turn", sessionKey=s["sessionKey"], prompt="build the thing",
              steps=[{"text": "On it.", "tool": "exec", "args": {"cmd": "make"},
                      "result": "ok"}, "Built."])
    assert turn["injectedContext"] == "CTX for agent:main:main"
    assert turn["appended"] == 4
    log = hook_log(gw.layout.state_dir)
    start, end = log[0], log[1]
    assert start["hook"] == "before_prompt_build"
    assert start["event"] == {"prompt": "build the thing", "messageCount": 0, "roles": []}
    run_id = start["ctx"]["runId"]
    assert start["ctx"] == {"runId": run_id, "agentId": "main", "sessionKey": "agent:main:main",
                            "sessionId": s["sessionId"], "workspaceDir": s["workspaceDir"],
                            "trigger": "user"}
    assert end["hook"] == "agent_end"
    assert end["ctx"] == start["ctx"]
    assert sorted(end["event"]) == ["durationMs", "messageCount", "roles", "runId", "success"]
    assert end["event"]["runId"] == run_id
    assert end["event"]["roles"] == ["user", "assistant", "toolResult", "assistant"]
    assert end["event"]["success"] is True and isinstance(end["event"]["durationMs"], int)
    lines = (gw.layout.state_dir / "agents/main/sessions" / f"{s['sessionId']}.jsonl"
             ).read_text().splitlines()
    assert json.loads(lines[0])["type"] == "session"
    assert [json.loads(x)["message"]["role"] for x in lines[1:]] == end["event"]["roles"]


def test_session_start_resumes_an_open_session_and_close_fires_session_end(recorder_gateway):
    gw = recorder_gateway
    a = ok(gw, "session.start")
    b = ok(gw, "session.start", sessionKey="AGENT:main:main")
    assert (b["resumed"], b["sessionId"]) == (True, a["sessionId"])
    ok(gw, "session.close", sessionKey=a["sessionKey"], reason="new")
    hooks = [h["hook"] for h in hook_log(gw.layout.state_dir)]
    assert hooks[-2:] == ["before_reset", "session_end"]
    reset, end = hook_log(gw.layout.state_dir)[-2:]
    assert reset["ctx"] == {"agentId": "main", "sessionKey": a["sessionKey"],
                            "sessionId": a["sessionId"], "workspaceDir": a["workspaceDir"]}
    assert sorted(reset["event"]) == ["messageCount", "reason", "roles", "sessionFile"]
    assert end["ctx"] == {"sessionId": a["sessionId"], "sessionKey": a["sessionKey"],
                          "agentId": "main"}  # a session ctx: no workspaceDir
    assert sorted(end["event"]) == ["durationMs", "messageCount", "reason", "sessionId",
                                    "sessionKey"]
    assert end["event"]["reason"] == "new"
    resp = gw.handle({"op": "session.turn", "sessionKey": a["sessionKey"], "prompt": "x"})
    assert not resp["ok"] and "closed" in resp["error"]
    c = ok(gw, "session.start")
    assert c["sessionId"] != a["sessionId"] and c["resumed"] is False


def test_compaction_step_fires_before_compaction_and_writes_a_marker(recorder_gateway):
    gw = recorder_gateway
    key = ok(gw, "session.start")["sessionKey"]
    ok(gw, "session.turn", sessionKey=key, prompt="p",
       steps=["a", {"compaction": {"tokensBefore": 1000}}, "b"])
    compaction = [h for h in hook_log(gw.layout.state_dir) if h["hook"] == "before_compaction"]
    assert len(compaction) == 1
    assert compaction[0]["event"]["messageCount"] == 2  # the prompt and "a"
    assert sorted(compaction[0]["event"]) == ["messageCount", "tokenCount"]
    assert sorted(compaction[0]["ctx"]) == ["agentId", "sessionId", "sessionKey", "workspaceDir"]
    msgs = ok(gw, "transcript", sessionKey=key)["messages"]
    marker = msgs[2]
    assert marker["role"] == "system" and marker["content"] == [
        {"type": "text", "text": "Compaction"}]
    assert marker["__openclaw"]["kind"] == "compaction" and marker["__openclaw"]["seq"] == 1


def spawn(gw, parent, **extra):
    return ok(gw, "subagent.spawn", parentSessionKey=parent, task="deep search", **extra)


def test_spawned_child_has_openclaw_key_and_its_requester_only_in_subagent_hooks(
        recorder_gateway):
    gw = recorder_gateway
    parent = ok(gw, "session.start")["sessionKey"]
    child = spawn(gw, parent, agentId="research", steps=["found it"])
    key = child["childSessionKey"]
    assert re.fullmatch(r"agent:research:subagent:[0-9a-f-]{36}", key)
    assert child["workspaceDir"] == str(gw.layout.state_dir / "workspace-research")
    log = hook_log(gw.layout.state_dir)
    spawned = [h for h in log if h["hook"] == "subagent_spawned"]
    assert len(spawned) == 1
    assert spawned[0]["event"] == {"runId": child["runId"], "childSessionKey": key,
                                   "agentId": "research", "mode": "run",
                                   "threadRequested": False}
    assert spawned[0]["ctx"] == {"runId": child["runId"], "childSessionKey": key,
                                 "requesterSessionKey": parent}
    start = [h for h in log if h["hook"] == "before_prompt_build"][-1]
    assert log.index(spawned[0]) < log.index(start)  # OpenClaw's order
    assert start["ctx"]["sessionKey"] == key
    assert "requesterSessionKey" not in start["ctx"]
    # the task in OpenClaw's envelope, as the child's model receives it
    assert start["event"]["prompt"].startswith("[Subagent Context] ")
    assert subagenttask.unwrap(start["event"]["prompt"]) == "deep search"
    assert child["turn"]["injectedContext"] == f"CTX for {key}"


def test_subagent_ended_fires_once_and_the_parent_receives_the_announce(recorder_gateway):
    gw = recorder_gateway
    parent = ok(gw, "session.start")["sessionKey"]
    child = spawn(gw, parent, steps=["Answer: 42"])
    key = child["childSessionKey"]
    first = ok(gw, "subagent.end", childSessionKey=key, outcome="ok")
    second = ok(gw, "subagent.end", childSessionKey=key, outcome="error", error="late")
    ended = [h for h in hook_log(gw.layout.state_dir) if h["hook"] == "subagent_ended"]
    assert len(ended) == 1
    assert ended[0]["ctx"] == {"runId": child["runId"], "childSessionKey": key,
                               "requesterSessionKey": parent}
    ev = ended[0]["event"]
    assert ev == {"targetSessionKey": key, "targetKind": "subagent",
                  "reason": "subagent-complete", "sendFarewell": True, "runId": child["runId"],
                  "endedAt": ev["endedAt"], "outcome": "ok"}
    assert isinstance(ev["endedAt"], int)
    assert second["alreadyEnded"] is True and second["ended"]["outcome"] == "ok"
    text = first["announce"]["text"]
    assert first["announce"]["state"] == "delivered"
    assert "status: completed successfully" in text and "\nAnswer: 42\n" in text
    last = ok(gw, "transcript", sessionKey=parent)["messages"][-1]
    assert last["content"][0]["text"] == text
    assert last["provenance"]["sourceSessionKey"] == key


def test_the_announce_is_a_run_of_the_parent_with_openclaws_provenance(recorder_gateway):
    """OpenClaw 2026.9.6 delivers an announce by running the requester: run id
    `announce:v1:<child>:<child run>`, empty prompt, `inputProvenance` in before_prompt_build's
    ctx only; then subagent_ended."""
    gw = recorder_gateway
    parent = ok(gw, "session.start")["sessionKey"]
    child = spawn(gw, parent, steps=["Answer: 42"])
    key = child["childSessionKey"]
    ok(gw, "subagent.end", childSessionKey=key, outcome="ok")
    log = hook_log(gw.layout.state_dir)
    run_id = f"announce:v1:{key}:{child['runId']}"
    build = [h for h in log if h["hook"] == "before_prompt_build" and h["ctx"]["runId"] == run_id]
    end = [h for h in log if h["hook"] == "agent_end" and h["ctx"]["runId"] == run_id]
    assert len(build) == len(end) == 1
    assert build[0]["ctx"]["sessionKey"] == parent and build[0]["event"]["prompt"] == ""
    assert build[0]["ctx"]["inputProvenance"] == {
        "kind": "inter_session", "sourceSessionKey": key, "sourceChannel": "internal",
        "sourceTool": "subagent_announce"}
    assert "inputProvenance" not in end[0]["ctx"]
    assert end[0]["event"]["roles"][-1] == "user"  # the completion event is the run's input
    ended = next(h for h in log if h["hook"] == "subagent_ended")
    assert log.index(build[0]) < log.index(end[0]) < log.index(ended)


def test_announce_after_compaction_waits_for_the_real_answer(recorder_gateway):
    gw = recorder_gateway
    parent = ok(gw, "session.start")["sessionKey"]
    child = spawn(gw, parent, steps=[
        {"tool": "exec", "args": {"command": "find /"}, "result": "/a\n/b\n/c"},
        {"compaction": True}])
    key = child["childSessionKey"]
    end = ok(gw, "subagent.end", childSessionKey=key)
    assert end["announce"]["state"] == "pending"
    parent_texts = [m["content"][0]["text"] for m in
                    ok(gw, "transcript", sessionKey=parent)["messages"]]
    assert not any("/a\n/b" in t for t in parent_texts)
    more = ok(gw, "session.turn", sessionKey=key, prompt="continue",
              steps=["Deep search done: the answer is B."])
    assert more["announce"]["state"] == "delivered"
    assert "Deep search done: the answer is B." in more["announce"]["text"]
    parent_texts = [m["content"][0]["text"] for m in
                    ok(gw, "transcript", sessionKey=parent)["messages"]]
    announces = [t for t in parent_texts if t.startswith("[Internal task completion event]")]
    assert len(announces) == 1 and "/a\n/b" not in announces[0]


def test_timeout_and_silent_children(recorder_gateway):
    gw = recorder_gateway
    parent = ok(gw, "session.start")["sessionKey"]
    slow = spawn(gw, parent, steps=[{"tool": "exec", "args": {}, "result": "raw"},
                                    {"compaction": True}])
    res = ok(gw, "subagent.end", childSessionKey=slow["childSessionKey"], outcome="timeout")
    assert res["announce"]["state"] == "delivered"
    assert "status: timed out" in res["announce"]["text"]
    assert "[Partial progress: 1 tool call(s) executed before timeout]" in res["announce"]["text"]
    quiet = spawn(gw, parent, steps=["NO_REPLY"])
    res = ok(gw, "subagent.end", childSessionKey=quiet["childSessionKey"])
    assert res["announce"]["state"] == "silent"
    texts = [m["content"][0]["text"] for m in ok(gw, "transcript", sessionKey=parent)["messages"]]
    assert sum(t.startswith("[Internal task completion event]") for t in texts) == 1


def test_bad_requests_get_clear_errors(recorder_gateway):
    gw = recorder_gateway
    assert "unknown op" in gw.handle({"op": "nope"})["error"]
    assert "op" in gw.handle(["not", "a", "dict"])["error"]
    err = gw.handle({"op": "session.turn", "sessionKey": "agent:main:zzz"})["error"]
    assert "unknown session" in err
    key = ok(gw, "session.start")["sessionKey"]
    err = gw.handle({"op": "session.turn", "sessionKey": key, "steps": [{"dance": 1}]})["error"]
    assert "steps[0]" in err
    err = gw.handle({"op": "subagent.end", "childSessionKey": key})["error"]
    assert "not a subagent session" in err
    child = spawn(gw, key)["childSessionKey"]
    err = gw.handle({"op": "subagent.end", "childSessionKey": child, "outcome": "meh"})["error"]
    assert "outcome" in err
    err = gw.handle({"op": "session.start", "sessionKey": "agent:../x:main"})["error"]
    assert "agent id" in err


def test_commands_are_dispatched_by_name_with_the_documented_ctx(recorder_gateway):
    gw = recorder_gateway
    res = ok(gw, "command", command="/rec state --all", sessionKey="agent:main:main")
    assert res == {"command": "rec", "plugin": "recorder", "text": "args=state --all"}
    assert "unknown command /nope" in gw.handle({"op": "command", "command": "/nope"})["error"]


def test_allow_prompt_injection_false_keeps_a_plugins_context_out(recorder_gateway):
    gw = recorder_gateway
    (gw.layout.state_dir / "openclaw.json").write_text(json.dumps(
        {"plugins": {"entries": {"recorder": {"hooks": {"allowPromptInjection": False}}}}}))
    key = ok(gw, "session.start")["sessionKey"]
    assert ok(gw, "session.turn", sessionKey=key, prompt="p")["injectedContext"] is None


def test_a_held_announce_ignores_intermediate_steps_until_the_answer(recorder_gateway):
    gw = recorder_gateway
    parent = ok(gw, "session.start")["sessionKey"]
    child = spawn(gw, parent, steps=[{"yield": True}])["childSessionKey"]
    assert ok(gw, "subagent.end", childSessionKey=child)["announce"]["state"] == "pending"
    step = ok(gw, "session.turn", sessionKey=child, prompt="wake",
              steps=[{"text": "Collecting results.", "tool": "read", "args": {}, "result": "r"}])
    assert step["announce"]["state"] == "pending"
    # Only a run of the child releases it (as in OpenClaw): messages appended without a run
    # do not, the next run's answer does.
    assert "announce" not in ok(gw, "session.messages", sessionKey=child, steps=["Appended."])
    done = ok(gw, "session.turn", sessionKey=child, prompt="finish", steps=["Summary: all good."])
    assert done["announce"]["state"] == "delivered"
    assert "Summary: all good." in done["announce"]["text"]
    assert "Collecting results." not in done["announce"]["text"]
    again = ok(gw, "session.turn", sessionKey=child, prompt="more", steps=["Another note."])
    assert "announce" not in again  # delivered once, never twice


def test_a_child_that_ended_without_an_answer_announces_no_output(recorder_gateway):
    gw = recorder_gateway
    parent = ok(gw, "session.start")["sessionKey"]
    child = spawn(gw, parent, steps=[{"tool": "exec", "args": {}, "result": "RAW LISTING"}])
    res = ok(gw, "subagent.end", childSessionKey=child["childSessionKey"])
    assert res["announce"]["state"] == "delivered"
    assert "\n(no output)\n" in res["announce"]["text"]
    assert "RAW LISTING" not in res["announce"]["text"]
