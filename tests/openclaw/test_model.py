"""The scripted OpenAI-compatible model: what OpenClaw sends, what it gets back, what is logged."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from lab.openclaw import model

MODEL_FILE = Path(model.__file__)


@pytest.fixture
def server(tmp_path):
    srv = model.ModelServer(0, str(tmp_path / "requests.jsonl"))
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def _post(port: int, body, path="/v1/chat/completions", raw: bytes | None = None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers.get("Content-Type"), resp.read().decode()


def _events(text: str) -> list:
    lines = [line[len("data: "):] for line in text.split("\n\n") if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def _streamed_reply(port: int, messages, tools=()):
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
            "messages": messages, "tools": [{"type": "function", "function": {"name": n}}
                                            for n in tools]}
    ctype, text = _post(port, body)
    assert ctype == "text/event-stream"
    content, calls = "", []
    for event in _events(text):
        for choice in event["choices"]:
            content += choice["delta"].get("content") or ""
            calls += choice["delta"].get("tool_calls") or []
    return content, calls


def _user(text):
    return {"role": "user", "content": text}


def test_streamed_text_reply_and_request_log(server, tmp_path):
    content, calls = _streamed_reply(server.port, [_user("hi [[reply: HELLO-7]]")])
    assert (content, calls) == ("HELLO-7", [])
    records = [json.loads(x) for x in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert len(records) == 1
    assert records[0]["body"]["messages"][0]["content"] == "hi [[reply: HELLO-7]]"
    assert records[0]["reply"] == "HELLO-7" and records[0]["stream"] is True


def test_non_streamed_reply_and_default_counter(server):
    ctype, text = _post(server.port, {"messages": [_user("anything")]})
    reply = json.loads(text)
    assert ctype == "application/json"
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "OK 1"}
    assert reply["choices"][0]["finish_reason"] == "stop"


def test_spawn_goes_through_the_tool_search_bridge(server):
    parent = [_user("go [[spawn: Summarise the log | reply: CHILD-OK | label: kid]] "
                    "[[reply: on it]]")]
    content, calls = _streamed_reply(server.port, parent, tools=["read", "tool_call"])
    assert content == "" and len(calls) == 1
    assert calls[0]["function"]["name"] == "tool_call"
    args = json.loads(calls[0]["function"]["arguments"])
    assert args == {"id": "sessions_spawn", "args": {
        "task": "Summarise the log [[reply: CHILD-OK]]", "label": "kid", "mode": "run"}}
    # once the tool answered, the parent's own reply directive applies
    answered = parent + [{"role": "assistant", "content": None, "tool_calls": calls},
                         {"role": "tool", "content": "{\"status\": \"accepted\"}"}]
    assert _streamed_reply(server.port, answered, tools=["tool_call"]) == ("on it", [])


def test_a_spawn_openclaw_skipped_for_an_incoming_message_is_made_again(server):
    """OpenClaw 2026.9.x steers a message that arrives mid-run (a child's completion event) into
    the run and answers the pending call with its skip text: the spawn is asked for again, once."""
    asked = _user("check [[spawn: Verify partition 1 | reply: P1-OK]] [[reply: Asked.]]")
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}
    event = _user("[Internal task completion event]\nsource: subagent")
    skipped = [asked, call, {"role": "tool", "content": model.STEERING_SKIP}, event]
    _, calls = _streamed_reply(server.port, skipped, tools=["sessions_spawn"])
    task = json.loads(calls[0]["function"]["arguments"])["task"]
    assert task == "Verify partition 1 [[reply: P1-OK]]"
    ran = skipped + [call, {"role": "tool", "content": '{"status": "accepted"}'}]
    content, calls = _streamed_reply(server.port, ran, tools=["sessions_spawn"])
    assert calls == [] and content.startswith("OK ")


def test_spawn_directly_when_the_tool_is_offered(server):
    _, calls = _streamed_reply(server.port, [_user("[[spawn: T]]")], tools=["sessions_spawn"])
    assert calls[0]["function"]["name"] == "sessions_spawn"
    assert json.loads(calls[0]["function"]["arguments"])["label"] == "child"


def test_child_run_answers_its_task_reply(server):
    child = [{"role": "system", "content": "You are a subagent"},
             _user("[Tue] [Subagent Context] depth 1/5\n\n[Subagent Task]\n\n"
                   "Summarise the log [[reply: CHILD-OK]]\n\nBegin."),
             _user("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> x <<<END_OPENCLAW_INTERNAL_CONTEXT>>>")]
    assert _streamed_reply(server.port, child) == ("CHILD-OK", [])
    plain_child = [_user("[Subagent Task]\n\nno directive")]
    assert _streamed_reply(server.port, plain_child)[0] == "CHILD-DONE"


def test_a_child_whose_task_is_in_its_system_prompt_answers_that_tasks_reply(server):
    """OpenClaw 2026.5.x: the task only under `## Your Role` of the child's system prompt."""
    child = [{"role": "system", "content": "## Your Role\n- You were created to handle: Check "
                                           "db-2 [[reply: LAG-3S]]\n\n## Rules\n"},
             _user("[Subagent Context] You are running as a subagent (depth 1/1).\n\nBegin. "
                   "Your assigned task is in the system prompt under **Your Role**.")]
    assert _streamed_reply(server.port, child) == ("LAG-3S", [])


def test_heartbeat_stays_silent(server):
    beat = [_user("Follow the heartbeat monitor scratch context when provided.")]
    assert _streamed_reply(server.port, beat)[0] == "NO_REPLY"


def test_script_rules_file(tmp_path):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "status?", "reply": "all green"}]))
    script = model.Script.load(str(rules))
    assert script.decide({"messages": [_user("status?")]}, 1) == ("text", "all green")
    rules.write_text(json.dumps({"match": "x"}))
    with pytest.raises(ValueError, match="expected a JSON list"):
        model.Script.load(str(rules))


def test_bad_requests_are_answered_and_the_server_keeps_serving(server):
    for raw in (b"{not json", b"[1, 2]", b"\xff\xfe"):
        with pytest.raises(urllib.error.HTTPError) as info:
            _post(server.port, None, raw=raw)
        assert info.value.code == 400
    with pytest.raises(urllib.error.HTTPError) as info:
        _post(server.port, {}, path="/v1/embeddings")
    assert info.value.code == 404
    # messages of the wrong shape still get an answer
    _, text = _post(server.port, {"messages": [1, {"role": "user", "content": [{"x": 1}]}]})
    assert json.loads(text)["choices"][0]["message"]["content"].startswith("OK")
    assert _streamed_reply(server.port, [_user("[[reply: still here]]")])[0] == "still here"


def test_standalone_file_prints_its_port_and_stops_on_sigterm(tmp_path):
    log = tmp_path / "log.jsonl"
    proc = subprocess.Popen([sys.executable, "-S", str(MODEL_FILE), "--port", "0",
                             "--log", str(log)], stdout=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready["pid"] == proc.pid
        assert _streamed_reply(ready["port"], [_user("[[reply: standalone]]")])[0] == "standalone"
        assert len(log.read_text().splitlines()) == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
