"""What an agent (or anyone) can put where a state file belongs: a FIFO, a link to a device, a link
out of the workspace, a huge file. The gateway's turns, `/mc` and the host-side doctor answer at
once and name the file; nothing is waited on, followed, read whole or written through.

An agent with a shell tool can make any of these in its own workspace; before, a FIFO held each
turn for 10 s and leaked a gateway thread blocked in open() for good, and a link to /dev/zero made
the host-side doctor read until the kernel's OOM killer stopped it.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from gateway_helpers import REPO, ok, run_cli

from fleet.continuity import regularfile
from fleet.continuity.paths import ConfigError
from fleet.gateway.layout import Layout
from fleet.gateway.service import Gateway

SECRET = "root-password-hunter2"


def state_file(state: Path) -> Path:
    memory = state / "workspace" / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    return memory / "CURRENT_STATE.md"


def turn(gw: Gateway, key: str, prompt: str, limit_s: float = 60.0) -> dict:
    """One turn on a thread: a turn that blocks fails the test instead of hanging it."""
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(
        out=ok(gw, "session.turn", sessionKey=key, prompt=prompt, steps=["Done."])), daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"the turn {prompt!r} did not answer within {limit_s} s"
    return box["out"]


def host_doctor(state: Path) -> dict:
    """`python -m fleet.installer doctor` as a deploy runs it, under a 1 GiB address-space limit
    (reading /dev/zero whole would end in MemoryError instead of taking the machine)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    proc = subprocess.run([sys.executable, "-m", "fleet.installer", "doctor", "--state-dir",
                           str(state)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), preexec_fn=limit)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def state_findings(report: dict) -> list:
    return [f for t in report["continuity"]["targets"] for f in t["findings"]
            if f["check"] == "exists"]


def test_a_fifo_as_the_state_file_never_holds_a_turn_nor_leaks_a_thread(state, real_gateway):
    gw = real_gateway
    os.mkfifo(state_file(state))
    key = ok(gw, "session.start", agentId="main")["sessionKey"]
    first = turn(gw, key, "Plan the database migration please")
    assert any("FIFO" in e and "CURRENT_STATE.md" in e for e in first["hookErrors"]), first
    threads = threading.active_count()
    for n in range(3):
        turn(gw, key, f"Next step {n} of the migration")
    assert threading.active_count() == threads  # no thread left blocked in open()
    assert state_file(state).is_fifo()  # nothing replaced it behind the user's back
    assert gw.health()["ready"]


def test_a_link_out_of_the_workspace_is_neither_read_into_a_prompt_nor_written_through(
        tmp_path, state, real_gateway):
    gw = real_gateway
    secret = tmp_path / "secret.md"
    secret.write_text(f"## Objective\n{SECRET}\n")
    state_file(state).symlink_to(secret)
    key = ok(gw, "session.start", agentId="main")["sessionKey"]
    out = turn(gw, key, "What were we doing?")
    assert SECRET not in json.dumps(out)
    assert any("symlink" in e for e in out["hookErrors"]), out
    assert secret.read_text() == f"## Objective\n{SECRET}\n"
    assert state_file(state).is_symlink()
    text = ok(gw, "command", command="/mc doctor")["text"]
    assert "symlink" in text and SECRET not in text


def test_the_host_doctor_names_a_link_to_dev_zero_and_ends(tmp_path):
    state = tmp_path / "state"
    assert run_cli(state, "init").returncode == 0
    state_file(state).symlink_to("/dev/zero")
    report = host_doctor(state)
    [finding] = state_findings(report)
    assert finding["severity"] == "critical"
    assert "CURRENT_STATE.md: a symlink, not a regular file" in finding["message"]
    assert report["severity"] == "critical"


def test_the_host_doctor_names_a_fifo_and_a_huge_state_file(tmp_path):
    state = tmp_path / "state"
    assert run_cli(state, "init").returncode == 0
    os.mkfifo(state_file(state))
    [finding] = state_findings(host_doctor(state))
    assert "a FIFO, not a regular file" in finding["message"], finding

    state_file(state).unlink()
    with open(state_file(state), "wb") as fh:
        fh.truncate(9 * regularfile.MIB)
    [finding] = state_findings(host_doctor(state))
    assert "9 MiB, larger than 8 MiB" in finding["message"], finding


def test_a_fifo_as_openclaw_json_is_a_clear_error_not_a_hang(tmp_path):
    state = tmp_path / "state"
    assert run_cli(state, "init").returncode == 0
    (state / "openclaw.json").unlink()
    os.mkfifo(state / "openclaw.json")
    box: dict = {}

    def start() -> None:
        try:
            Gateway(Layout(state))
        except ConfigError as exc:
            box["error"] = str(exc)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the gateway waited on a FIFO as its config"
    assert "openclaw.json: a FIFO, not a regular file" in box["error"]


@pytest.mark.parametrize("make, kind, words", [
    (lambda p: os.mkfifo(p), regularfile.NOT_REGULAR, "a FIFO, not a regular file"),
    (lambda p: p.symlink_to("/dev/zero"), regularfile.NOT_REGULAR, "a character device"),
    (lambda p: p.mkdir(), regularfile.NOT_REGULAR, "a directory"),
    (lambda p: p.write_bytes(b"x" * 2000), regularfile.TOO_BIG, "2,000 bytes, larger than"),
])
def test_the_reader_refuses_what_is_not_a_bounded_regular_file(tmp_path, make, kind, words):
    path = tmp_path / "f"
    make(path)
    with pytest.raises(regularfile.FileRefused) as err:
        regularfile.read_bytes(path, 1000)
    assert err.value.kind == kind and words in str(err.value) and str(path) in str(err.value)


def test_the_reader_cuts_when_asked_and_refuses_links_when_told(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abcdef")
    assert regularfile.read_bytes(path, 3, cut=True) == b"abc"
    assert regularfile.read_bytes(tmp_path / "missing", 3) is None
    link = tmp_path / "link"
    link.symlink_to(path)
    assert regularfile.read_bytes(link, 10) == b"abcdef"
    with pytest.raises(regularfile.FileRefused, match="a symlink"):
        regularfile.read_bytes(link, 10, follow=False)
    _ = resource  # the doctor tests bound memory with it


def test_the_host_doctor_answers_with_fifos_in_place_of_fleets_own_files(tmp_path):
    """The audit log, the fleet lease and a fault file as FIFOs: read by status and doctor,
    never waited on."""
    from fleet.continuity.statelayout import StateLayout

    state = tmp_path / "state"
    assert run_cli(state, "init").returncode == 0
    layout = StateLayout(state)
    for path in (layout.audit, layout.lease, layout.faults_dir / "doctor"):
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
    report = host_doctor(state)
    assert report["result"] == "doctor" and report["ok"], report
