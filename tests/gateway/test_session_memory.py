"""What the gateway keeps in memory is an implementation choice; what a client reads is not.

Finished sessions (closed, or children whose end is settled) are held only as the text of their
index record, the index is assembled from per-record texts, and `transcript` with a `limit`
reads only the end of the file: each must answer exactly as before.
"""

from __future__ import annotations

import json

from gateway_helpers import ok
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.gateway import transcript as transcript_mod
from fleet.gateway.layout import Layout
from fleet.gateway.service import Gateway
from fleet.gateway.transcript import Transcript


def _restart(gw: Gateway) -> Gateway:
    fresh = Gateway(Layout(gw.layout.state_dir))
    fresh.load_plugins()
    return fresh


def test_a_closed_session_reads_the_same_after_it_left_memory_and_after_a_restart(
        recorder_gateway):
    gw = recorder_gateway
    key = ok(gw, "session.start", agentId="main")["sessionKey"]
    ok(gw, "session.turn", sessionKey=key, prompt="plan the migration", steps=["Planned."])
    child = ok(gw, "subagent.spawn", parentSessionKey=key, task="check replica",
               steps=["replica in sync"])["childSessionKey"]
    ended = ok(gw, "subagent.end", childSessionKey=child, outcome="ok")
    # The child is finished (announce delivered, subagent_ended fired): it reads as before.
    again_end = ok(gw, "subagent.end", childSessionKey=child, outcome="ok")
    assert again_end["alreadyEnded"] is True and again_end["ended"] == ended["ended"]
    assert ok(gw, "transcript", sessionKey=child)["session"]["announce"]["state"] == "delivered"
    assert [m["content"][0]["text"] for m in ok(gw, "transcript", sessionKey=child,
                                                limit=1)["messages"]] == ["replica in sync"]
    open_view = ok(gw, "transcript", sessionKey=key)
    closed = ok(gw, "session.close", sessionKey=key, reason="new")
    assert closed["closedAt"]

    after = ok(gw, "transcript", sessionKey=key)
    assert after["messages"] == open_view["messages"]
    assert after["session"] == dict(open_view["session"], closedAt=closed["closedAt"])
    listed = {s["sessionKey"]: s for s in ok(gw, "sessions", all=True)["sessions"]}
    assert listed[key] == after["session"]
    assert listed[child]["requesterSessionKey"] == key
    refused = gw.handle({"op": "session.turn", "sessionKey": key, "prompt": "more"})
    assert not refused["ok"] and "is closed" in refused["error"]

    # Another session of the agent rewrites the index, with the closed record as it was.
    ok(gw, "session.start", sessionKey="agent:main:other")
    again = _restart(gw)
    assert ok(again, "transcript", sessionKey=key) == after
    assert {s["sessionKey"]: s for s in ok(again, "sessions", all=True)["sessions"]} == {
        s["sessionKey"]: s for s in ok(gw, "sessions", all=True)["sessions"]}
    reopened = ok(again, "session.start", sessionKey=key)
    assert reopened["resumed"] is False and reopened["sessionId"] != closed["sessionId"]


def test_the_session_index_on_disk_is_one_json_object_of_every_record(recorder_gateway):
    gw = recorder_gateway
    keys = [ok(gw, "session.start", sessionKey=f"agent:main:s{i}")["sessionKey"]
            for i in range(3)]
    ok(gw, "session.close", sessionKey=keys[1])
    index = json.loads(gw.layout.session_index("main").read_text(encoding="utf-8"))
    assert sorted(index) == sorted(keys) and list(index) == sorted(index)
    public = {s["sessionKey"]: s for s in ok(gw, "sessions", all=True)["sessions"]}
    for key in keys:
        assert {k: index[key][k] for k in public[key]} == public[key]


def _transcript_with(tmp_path, texts):
    t = Transcript(tmp_path / "s.jsonl")
    t.create("sid", "agent:main:main", str(tmp_path))
    for i, text in enumerate(texts):
        role = "user" if i % 2 else "assistant"
        t.append([{"role": role, "content": [{"type": "text", "text": text}]}])
        if i % 3 == 2:  # a compaction marker counts as a message too
            t.append([{"role": "system", "content": [],
                       "__openclaw": {"kind": "compaction", "tokensBefore": i}}])
    return t


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(max_size=40), max_size=12), count=st.integers(0, 20),
       block=st.integers(1, 64))
def test_transcript_tail_is_the_end_of_messages(tmp_path_factory, texts, count, block):
    """`tail(n)` == `messages()[-n:]` whatever the text (multi-byte characters, U+2028, quotes)
    and wherever the read blocks cut lines."""
    t = _transcript_with(tmp_path_factory.mktemp("t"), texts)
    old = transcript_mod._TAIL_BLOCK
    transcript_mod._TAIL_BLOCK = block
    try:
        tail = t.tail(count)
    finally:
        transcript_mod._TAIL_BLOCK = old
    assert tail == (t.messages()[-count:] if count else [])


def test_a_torn_last_line_is_skipped_by_both_reads(tmp_path):
    t = _transcript_with(tmp_path, ["one", "two\u2028still two", "three"])
    whole = t.messages()
    assert [m["content"][0]["text"] for m in whole if m["content"]][1] == "two\u2028still two"
    with open(t.path, "a", encoding="utf-8") as fh:
        fh.write('{"type": "message", "message": {"role": "assis')  # killed mid-write
    assert t.messages() == whole
    assert t.tail(2) == whole[-2:]
    assert Transcript(tmp_path / "missing.jsonl").tail(3) == []


def test_transcript_limit_through_the_gateway(recorder_gateway):
    gw = recorder_gateway
    key = ok(gw, "session.start", agentId="main")["sessionKey"]
    for i in range(5):
        ok(gw, "session.messages", sessionKey=key, steps=[f"note {i}"])
    whole = ok(gw, "transcript", sessionKey=key)["messages"]
    assert len(whole) == 5
    for limit in (0, 1, 3, 5, 9):
        got = ok(gw, "transcript", sessionKey=key, limit=limit)["messages"]
        assert got == (whole[-limit:] if limit else [])


_WORDS = st.sampled_from(["role", "content", "type", "text", "user", "assistant", "toolCall",
                          "kind", "compaction", "arguments", "x", "Role", "text "])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _WORDS | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_WORDS | st.text(max_size=8),
                                                                 inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None)
@given(messages=st.lists(st.dictionaries(_WORDS | st.text(max_size=8), _JSON, max_size=5),
                         min_size=1, max_size=6))
def test_messages_read_back_exactly_as_appended(tmp_path_factory, messages):
    """A turn's hooks get each message as it was appended: same keys in the same order, same
    values and types (the strings messages repeat are shared when read, never changed)."""
    path = tmp_path_factory.mktemp("m") / "s.jsonl"
    t = Transcript(str(path))
    t.create("sid", "agent:main:main", str(path.parent))
    t.append(messages)
    back = t.messages()
    assert json.dumps(back) == json.dumps(messages)
    assert [list(m) for m in back] == [list(m) for m in messages]
    assert t.tail(len(messages)) == back
