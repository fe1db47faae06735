"""Hostile input against one gateway: every case answers (or refuses) and the gateway stays up.

Each test reproduces one finding of the hardening review through public interfaces: the control
protocol (in process or over the socket), `/mc` commands and the files a user would look at.
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
from gateway_helpers import install, ok, run_cli, write_plugin

from fleet.continuity.paths import ConfigError
from fleet.gateway import client
from fleet.gateway.control import ControlServer
from fleet.gateway.layout import Layout
from fleet.gateway.service import Gateway

DEEP = 100_000


def real_gateway(state: Path) -> Gateway:
    """An in-process gateway with the real memory-continuity and /mc plugins of this checkout."""
    assert run_cli(state, "init").returncode == 0
    gw = Gateway(Layout(state))
    gw.load_plugins()
    assert gw.health()["ready"], gw.health()
    return gw


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Dict[str, Any]]:
    """A real gateway answering on its control socket from a thread of this process."""
    state = tmp_path / "state"
    gw = real_gateway(state)
    server = ControlServer(Layout(state).socket, gw.handle)
    server.bind()
    thread = threading.Thread(target=server.serve, args=(lambda: False,), daemon=True)
    thread.start()
    yield {"state": state, "gw": gw, "server": server, "sock": Layout(state).socket}
    server.stop()
    thread.join(5)
    server.close(2)


def raw_exchange(sock_path: Path, data: bytes, timeout: float = 20.0) -> bytes:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(str(sock_path))
    try:
        try:
            s.sendall(data)
        except BrokenPipeError:  # the server answered early (an oversized request) and closed
            pass
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return buf
    finally:
        s.close()


def health_ok(sock_path: Path) -> bool:
    return client.request(sock_path, {"op": "health"}, timeout_s=20, retry_s=2)["ok"] is True


# -- item 5: non-finite numbers ---------------------------------------------------------------

def test_settings_refuse_infinity_and_openclaw_json_stays_strict(tmp_path):
    state = tmp_path / "state"
    gw = real_gateway(state)
    text = ok(gw, "command", command="/mc settings maxArchiveCount 1e309")["text"]
    assert "\u2717" in text and "1e309" in text
    text = ok(gw, "command", command="/mc settings maxArchiveCount NaN")["text"]
    assert "\u2717" in text
    raw = (state / "openclaw.json").read_text()
    assert "Infinity" not in raw and "NaN" not in raw
    json.loads(raw, parse_constant=lambda c: pytest.fail(f"{c} in openclaw.json"))


def test_a_config_with_infinity_is_refused_naming_the_file(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "openclaw.json").write_text('{"plugins": {"entries": {"x": {"n": Infinity}}}}')
    with pytest.raises(ConfigError, match="openclaw.json"):
        Gateway(Layout(state))


def test_a_failing_hook_shows_in_hook_errors(tmp_path):
    state = tmp_path / "state"
    gw = real_gateway(state)
    (state / "workspace").mkdir(exist_ok=True)
    (state / "workspace" / "memory").write_text("a file where the memory dir belongs")
    key = ok(gw, "session.start", agentId="main")["sessionKey"]
    out = ok(gw, "session.turn", sessionKey=key, prompt="Plan the database migration please",
             steps=["Dump, restore, switch."])
    assert any("agent_end" in e and "memory-continuity" in e for e in out["hookErrors"]), out


# -- item 6: deep nesting ---------------------------------------------------------------------

def test_a_deeply_nested_request_is_refused_and_the_gateway_answers(served):
    line = b'{"op": "health", "x": ' + b"[" * DEEP + b"]" * DEEP + b"}\n"
    answer = json.loads(raw_exchange(served["sock"], line))
    assert answer["ok"] is False and "nested" in answer["error"]
    assert health_ok(served["sock"])


def test_a_deeply_nested_manifest_disables_only_that_plugin(tmp_path, state):
    good = write_plugin(tmp_path / "plugins", "good", "def register(api):\n    pass\n")
    bad = write_plugin(tmp_path / "plugins", "deep", "def register(api):\n    pass\n")
    (bad / "openclaw.plugin.json").write_text('{"id": "deep", "x": ' + "[" * DEEP + "]" * DEEP
                                              + "}")
    install(state, good)
    install(state, bad)
    gw = Gateway(Layout(state))
    gw.load_plugins()
    plugins = gw.health()["plugins"]
    assert plugins["good"]["loaded"] is True
    assert plugins["deep"]["loaded"] is False and "nested" in plugins["deep"]["error"]


def test_a_deeply_nested_openclaw_json_is_a_clear_error(state):
    (state / "openclaw.json").write_text('{"a": ' + "[" * DEEP + "]" * DEEP + "}")
    with pytest.raises(ConfigError, match="openclaw.json.*nested"):
        Gateway(Layout(state))


# -- item 10: names that become paths are matched whole ---------------------------------------

@pytest.mark.parametrize("key", [
    "agent:main:subagent:evil\n:x",
    "agent:main\n:subagent:evil:x",
    "agent:main:subagent:evil\n:subagent:y",
])
def test_a_newline_inside_a_session_key_is_refused_not_mapped_onto_another_file(key):
    from fleet.continuity import paths

    with pytest.raises(ValueError, match="invalid"):
        paths.check_session_key(key)
    assert paths.parse_session_key(key) is None



# -- item 2: a lone surrogate never poisons an agent's session index --------------------------

def test_a_lone_surrogate_is_refused_at_the_socket_and_sessions_keep_working(served):
    gw, sock = served["gw"], served["sock"]
    parent = ok(gw, "session.start", agentId="main")["sessionKey"]
    for field in ("label", "task"):
        request = json.dumps({"op": "subagent.spawn", "parentSessionKey": parent, field: "x"})
        line = request.replace('"x"', '"x\\udc80"').encode() + b"\n"
        answer = json.loads(raw_exchange(sock, line))
        assert answer["ok"] is False and "surrogate" in answer["error"], answer
    child = client.request(sock, {"op": "subagent.spawn", "parentSessionKey": parent,
                                  "label": "fine", "steps": ["done"]})
    assert child["ok"], child
    assert client.request(sock, {"op": "session.turn", "sessionKey": parent,
                                 "prompt": "next step please", "steps": ["ok"]})["ok"]


@pytest.mark.parametrize("op,field", [("subagent.spawn", "label"), ("subagent.spawn", "task"),
                                      ("subagent.end", "error"), ("session.close", "reason")])
def test_a_failed_write_changes_nothing_in_memory(tmp_path, op, field):
    """Even when bad text gets past the edge (an in-process caller), the failed index write
    leaves the in-memory record untouched, so every later save still works."""
    gw = real_gateway(tmp_path / "state")
    parent = ok(gw, "session.start", agentId="main")["sessionKey"]
    child = ok(gw, "subagent.spawn", parentSessionKey=parent, task="t")["childSessionKey"]
    args = {"subagent.spawn": {"parentSessionKey": parent},
            "subagent.end": {"childSessionKey": child, "outcome": "error"},
            "session.close": {"sessionKey": child}}[op]
    bad = gw.handle(dict(args, op=op, **{field: "x\udc80"}))
    assert bad["ok"] is False and "surrogate" in bad["error"], bad
    ok(gw, "session.turn", sessionKey=parent, prompt="still fine?", steps=["yes"])
    ok(gw, "subagent.spawn", parentSessionKey=parent, task="another")
    ended = ok(gw, "subagent.end", childSessionKey=child, outcome="ok")
    assert ended["alreadyEnded"] is False


# -- item 7: text from children ---------------------------------------------------------------

def test_control_bytes_from_a_child_never_reach_the_parent_state_file(tmp_path):
    state = tmp_path / "state"
    gw = real_gateway(state)
    parent = ok(gw, "session.start", agentId="main")["sessionKey"]
    ok(gw, "session.turn", sessionKey=parent, prompt="Migrate the billing database this week",
       steps=["Plan: dump, restore."])
    evil = "Result\x00 with NUL and \x1b[31mred\x1b[0m ANSI\x07 bell\tand a tab"
    child = ok(gw, "subagent.spawn", parentSessionKey=parent, task="check \x1b[2J lag",
               steps=[evil])["childSessionKey"]
    ok(gw, "subagent.end", childSessionKey=child, outcome="ok")
    text = (state / "workspace" / "memory" / "CURRENT_STATE.md").read_text()
    assert "with NUL" in text
    assert not any(c in text for c in "\x00\x1b\x07"), repr(text)
    assert "\t" in text.split("with NUL", 1)[1]


def test_a_huge_child_answer_stays_out_of_the_session_index(tmp_path):
    state = tmp_path / "state"
    gw = real_gateway(state)
    parent = ok(gw, "session.start", agentId="main")["sessionKey"]
    huge = "lag report line\n" * 130_000  # ~2 MB
    child = ok(gw, "subagent.spawn", parentSessionKey=parent, task="report",
               steps=[huge])["childSessionKey"]
    ok(gw, "subagent.end", childSessionKey=child, outcome="ok")
    index = state / "agents" / "main" / "sessions" / "sessions.json"
    assert index.stat().st_size < 64 * 1024
    msgs = ok(gw, "transcript", sessionKey=parent)["messages"]
    assert huge.strip() in msgs[-1]["content"][0]["text"]


# -- items 3 and 4: descriptors, request size, bursts -----------------------------------------

def start_process(state: Path, nofile: int = 0) -> int:
    """`fleet.gateway start` (detached daemon) with RLIMIT_NOFILE lowered to `nofile`; its pid."""
    import os
    import resource
    import subprocess
    import sys

    from gateway_helpers import REPO

    def limit() -> None:
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    assert run_cli(state, "init").returncode == 0
    proc = subprocess.run(
        [sys.executable, "-m", "fleet.gateway", "--state-dir", str(state), "start"],
        capture_output=True, text=True, timeout=60, preexec_fn=limit, cwd=str(REPO),
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert proc.returncode == 0, proc.stderr
    return client.request(Layout(state).socket, {"op": "health"})["result"]["pid"]


def alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def open_idle(sock_path: Path, count: int) -> list:
    conns = []
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(str(sock_path))
        conns.append(s)
    return conns


def test_hundreds_of_idle_connections_under_a_low_fd_limit_never_kill_the_gateway(
        tmp_path, gateways):
    state = tmp_path / "state"
    pid = start_process(state, nofile=128)
    gateways.append(state)
    conns = open_idle(Layout(state).socket, 300)  # the gateway has 128 descriptors
    try:
        # the excess is answered "busy" at once and closed, not left hanging
        conns[-1].settimeout(20)
        answer = json.loads(conns[-1].recv(65536).decode())
        assert answer["ok"] is False and answer.get("busy") is True
        assert alive(pid)
    finally:
        for s in conns:
            s.close()
    assert health_ok(Layout(state).socket) and alive(pid)


SERVER_UNDER_EMFILE = """
import resource, sys, threading
from pathlib import Path
from fleet.gateway.control import ControlServer
resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))
server = ControlServer(Path(sys.argv[1]), lambda req: {"ok": True, "result": "pong"})
server.max_connections = 10_000  # no cap: make accept itself run out of descriptors
server.bind()
print("ready", flush=True)
server.serve(lambda: False)
print("serve returned", flush=True)
"""


def test_accept_backs_off_when_out_of_descriptors(tmp_path):
    import os
    import subprocess
    import sys

    from gateway_helpers import REPO

    sock_path = tmp_path / "s.sock"
    proc = subprocess.Popen([sys.executable, "-c", SERVER_UNDER_EMFILE, str(sock_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        assert proc.stdout.readline().strip() == "ready"
        conns = open_idle(sock_path, 100)  # more than the server has descriptors for
        for s in conns:
            s.close()
        resp = client.request(sock_path, {"op": "ping"}, timeout_s=20, retry_s=5)
        assert resp == {"ok": True, "result": "pong"}
        assert proc.poll() is None, proc.communicate()
    finally:
        proc.kill()
        proc.communicate()


def test_a_request_over_the_size_limit_is_refused_naming_it(served):
    line = b'{"op": "health", "pad": "' + b"x" * (5 * 1024 * 1024) + b'"}\n'
    answer = json.loads(raw_exchange(served["sock"], line))
    assert answer["ok"] is False and "4 MiB" in answer["error"]
    assert health_ok(served["sock"])


def test_a_burst_of_150_clients_gets_150_answers(tmp_path, gateways):
    state = tmp_path / "state"
    start_process(state)
    gateways.append(state)
    barrier = threading.Barrier(150)
    results: list = []

    def one() -> None:
        barrier.wait()
        try:
            results.append(client.request(Layout(state).socket, {"op": "health"}, retry_s=0)["ok"])
        except client.ClientError as exc:
            results.append(str(exc))

    threads = [threading.Thread(target=one) for _ in range(150)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == [True] * 150, [r for r in results if r is not True][:3]


def rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")
def test_memory_of_large_requests_is_returned(tmp_path, gateways):
    state = tmp_path / "state"
    pid = start_process(state)
    gateways.append(state)
    sock = Layout(state).socket
    before = rss_mib(pid)
    for size in (3_500_000, 30_000_000, 30_000_000, 30_000_000, 3_500_000):
        try:
            client.request(sock, {"op": "health", "pad": "x" * size}, timeout_s=60)
        except client.ClientError:
            pass  # refused for its size: what matters is the memory
    assert health_ok(sock)
    assert rss_mib(pid) <= before + 16, (before, rss_mib(pid))


# -- item 1: user patterns cannot freeze the gateway; health answers while hooks run ---------

def test_a_catastrophic_pattern_neither_freezes_the_run_nor_health(tmp_path, gateways):
    state = tmp_path / "state"
    start_process(state)
    gateways.append(state)
    sock = Layout(state).socket
    set_it = client.request(sock, {"op": "command",
                                   "command": '/mc settings ignorePatterns ["(a+)+$"]'})
    assert "\u2713" in set_it["result"]["text"], set_it
    key = client.request(sock, {"op": "session.start", "agentId": "main"})["result"]["sessionKey"]
    done: Dict[str, Any] = {}

    def turn() -> None:  # with `re`, 2**40 steps under the GIL: the whole process stops
        done["resp"] = client.request(sock, {"op": "session.turn", "sessionKey": key,
                                             "prompt": "a" * 40 + "!", "steps": ["ok"]},
                                      timeout_s=60)

    worker = threading.Thread(target=turn, daemon=True)
    worker.start()
    answered = [client.request(sock, {"op": "health"}, timeout_s=10, retry_s=0)["ok"]
                for _ in range(5)]
    worker.join(60)
    assert answered == [True] * 5
    assert done["resp"]["ok"] and done["resp"]["result"]["hookErrors"] == []


@pytest.mark.parametrize("pattern,why", [
    ("(a)\\\\1", "backreference"), ("(?=a)b", "lookaround"), ("a{1,1000}", "above 100"),
    ("(?i)x", "inline flags"),
])
def test_settings_refuse_patterns_outside_the_safe_language_with_the_reason(
        tmp_path, pattern, why):
    gw = real_gateway(tmp_path / "state")
    text = ok(gw, "command", command=f'/mc settings ignorePatterns ["{pattern}"]')["text"]
    assert "\u2717" in text and why in text, text


SLOW_HOOK = """
import os, time
def register(api):
    flag = os.path.join(str(api.state_dir), "hook-running")
    release = os.path.join(str(api.state_dir), "hook-release")
    def slow(event, ctx):
        open(flag, "w").close()
        deadline = time.monotonic() + 30
        n = 0
        while not os.path.exists(release) and time.monotonic() < deadline:
            n += sum(i * i for i in range(2000))  # pure-Python CPU work, no sleeping
        open(flag + ".done", "w").close()
    api.on("agent_end", slow)
"""


def test_health_answers_while_a_hook_is_busy(tmp_path, state):
    """Ordering, not timing: every health call returns while the CPU-bound hook is still
    running (it only stops when told to, after them, or at its own 30 s deadline). The
    latencies are printed for the record; a timed assertion would only measure how busy the
    machine running the suite is."""
    import time

    install(state, write_plugin(tmp_path / "plugins", "slow", SLOW_HOOK))
    gw = Gateway(Layout(state), hook_timeout_s=60)
    gw.load_plugins()
    Layout(state).ensure()
    server = ControlServer(Layout(state).socket, gw.handle)
    server.bind()
    threading.Thread(target=server.serve, args=(lambda: False,), daemon=True).start()
    try:
        key = ok(gw, "session.start", agentId="main")["sessionKey"]
        runner = threading.Thread(target=gw.handle, args=({"op": "session.turn", "sessionKey": key,
                                                           "prompt": "go", "steps": ["x"]},),
                                  daemon=True)
        runner.start()
        for _ in range(500):
            if (state / "hook-running").exists():
                break
            time.sleep(0.01)
        latencies = []
        for _ in range(20):
            t0 = time.monotonic()
            assert health_ok(Layout(state).socket)
            latencies.append(time.monotonic() - t0)
        assert not (state / "hook-running.done").exists()  # all answered during the hook
        (state / "hook-release").touch()
        runner.join(30)
        print(f"health during a busy hook: max {max(latencies) * 1000:.1f} ms, "
              f"median {sorted(latencies)[10] * 1000:.1f} ms")
    finally:
        (state / "hook-release").touch()
        server.stop()
        server.close(2)


# -- item 8: temp files of killed writers are recognised and swept ----------------------------

KILLED_WRITER = """
import os, sys
from fleet.continuity import store
def hang(src, dst):  # the moment between writing the temp file and renaming it
    os.kill(os.getpid(), 9)
os.replace = hang
store.atomic_write(sys.argv[1], "half-written state " * 1000)
"""


def test_temp_files_of_writers_killed_mid_write_are_swept_at_start(tmp_path):
    import os
    import subprocess
    import sys

    from gateway_helpers import REPO

    state = tmp_path / "state"
    real_gateway(state)
    target = state / "workspace" / "memory" / "CURRENT_STATE.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(target)],
                              env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True)
        assert proc.returncode == -9
    left = [p for p in target.parent.iterdir() if p.name != "CURRENT_STATE.md.lock"]
    assert len(left) == 3, left
    mine = target.parent / f".x.fleet-tmp.{os.getpid()}.abcd"  # a live writer's: kept
    mine.write_text("in progress")
    Gateway(Layout(state))
    assert [p.name for p in target.parent.iterdir() if p.name != "CURRENT_STATE.md.lock"] == \
        [mine.name]


# -- item 9: private parts of the state dir are private whatever the umask --------------------

def test_state_dir_is_private_under_umask_022(tmp_path, gateways):
    import os
    import stat

    old = os.umask(0o022)
    try:
        state = tmp_path / "state"
        start_process(state)
        gateways.append(state)
        sock = Layout(state).socket
        key = client.request(sock, {"op": "session.start", "agentId": "main"})["result"]
        client.request(sock, {"op": "session.turn", "sessionKey": key["sessionKey"],
                              "prompt": "Plan the private migration", "steps": ["ok"]})
    finally:
        os.umask(old)
    for rel in ("agents", "workspace", "run", "logs"):
        mode = stat.S_IMODE((state / rel).stat().st_mode)
        assert mode & 0o077 == 0, (rel, oct(mode))
    for path in [state / "openclaw.json", Path(key["transcript"]),
                 state / "workspace" / "memory" / "CURRENT_STATE.md"]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, (path, oct(mode))


def test_a_fifo_at_the_lock_path_is_refused_not_waited_on(tmp_path):
    import os

    from fleet.installer.lock import read_holder

    (tmp_path / "fleet").mkdir()
    os.mkfifo(tmp_path / "fleet" / "deploy.lock")
    result: Dict[str, Any] = {}

    def probe() -> None:
        try:
            result["holder"] = read_holder(tmp_path)
        except Exception as exc:  # the refusal we want
            result["error"] = str(exc)

    worker = threading.Thread(target=probe, daemon=True)
    worker.start()
    worker.join(20)
    assert "error" in result and "not a regular file" in result["error"], result


def test_a_symlinked_pidfile_is_not_followed(tmp_path):
    import os

    from fleet.gateway.pidfile import PidFile

    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "run").mkdir()
    os.symlink(victim, tmp_path / "run" / "gateway.pid")
    with pytest.raises(OSError):
        PidFile(tmp_path / "run" / "gateway.pid").acquire()
    assert victim.read_text() == "precious"
