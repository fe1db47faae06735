"""Fuzzing the control protocol of one real gateway process: arbitrary JSON and arbitrary bytes
never kill it, and `health` answers after every case."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from gateway_helpers import REPO, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.gateway import client
from fleet.gateway.layout import Layout

OPS = ["health", "session.start", "session.turn", "session.messages", "session.close", "sessions",
       "subagent.spawn", "subagent.end", "transcript", "persistent.invoke", "persistent.status",
       "persistent.cancel", "command", "commands", "nope"]  # never "shutdown": that is legitimate

SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40))
JSON = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.text(max_size=12), kids, max_size=4), max_leaves=20)
KEYS = st.sampled_from(["sessionKey", "parentSessionKey", "childSessionKey", "agentId", "prompt",
                        "steps", "messages", "task", "label", "outcome", "reason", "error",
                        "command", "limit", "key", "all"])
REQUESTS = st.builds(lambda op, args: dict(args, op=op), st.sampled_from(OPS),
                     st.dictionaries(KEYS, JSON, max_size=5))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    state = tmp_path_factory.mktemp("fuzz") / "state"
    assert run_cli(state, "init").returncode == 0
    proc = subprocess.run([sys.executable, "-m", "fleet.gateway", "--state-dir", str(state),
                           "start"], capture_output=True, text=True, timeout=60, cwd=str(REPO),
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    sock = Layout(state).socket
    pid = client.request(sock, {"op": "health"})["result"]["pid"]
    # a real session and child, so fuzzed ops also reach live records
    parent = client.request(sock, {"op": "session.start", "agentId": "main"})["result"]
    yield {"sock": sock, "pid": pid, "parent": parent["sessionKey"]}
    run_cli(state, "stop", "--timeout", "5")


def send_raw(sock_path: Path, data: bytes) -> bytes:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(str(sock_path))
    try:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    finally:
        s.close()


def still_serving(gw) -> None:
    os.kill(gw["pid"], 0)  # alive
    health = client.request(gw["sock"], {"op": "health"}, timeout_s=30, retry_s=2)
    assert health["ok"] and health["result"]["pid"] == gw["pid"]


FUZZ = settings(max_examples=int(os.environ.get("FLEET_FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@FUZZ
@given(request=REQUESTS)
def test_arbitrary_json_requests(gateway, request):
    if "sessionKey" in request and isinstance(request["sessionKey"], bool):
        request["sessionKey"] = gateway["parent"]
    answer = json.loads(send_raw(gateway["sock"], json.dumps(request).encode() + b"\n"))
    assert isinstance(answer, dict) and isinstance(answer.get("ok"), bool)
    still_serving(gateway)


@FUZZ
@given(data=st.binary(max_size=2000) | st.text(max_size=500).map(str.encode))
def test_arbitrary_bytes(gateway, data):
    for line in send_raw(gateway["sock"], data).splitlines():
        assert isinstance(json.loads(line), dict)
    still_serving(gateway)


@FUZZ
@given(value=JSON, depth=st.integers(0, 3000))
def test_odd_but_valid_json_values(gateway, value, depth):
    wrapped = ("[" * depth + json.dumps(value) + "]" * depth).encode()
    for line in send_raw(gateway["sock"], b'{"op": "health", "x": ' + wrapped + b"}\n"
                         ).splitlines():
        assert isinstance(json.loads(line), dict)
    still_serving(gateway)
