"""The maintenance lock through the `fleet` script, on local hosts: while it is held every
deploy, rollback and restart there is refused naming who, why and since when; after release
they go through again; an expiring lock lapses by itself."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deploy_helpers import stop_gateways
from fleetcli import FLEET

INVENTORY = """\
vars: {connection: local, gateway: {manager: fleet}, timeouts: {ready: 30, command: 120}}
hosts:
  box1: {state_dir: .fleet/sandbox/box1}
  box2: {state_dir: .fleet/sandbox/box2}
  nopython: {state_dir: .fleet/sandbox/nopython, python: /nonexistent/python3}
groups:
  sandbox: {hosts: [box1, box2]}
"""


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    yield tmp_path
    stop_gateways([tmp_path / ".fleet" / "sandbox" / n for n in ("box1", "box2")])


def fleet(cwd: Path, *args: str) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-c", FLEET, *args, "--json"], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, json.loads(proc.stdout)


def results(doc: dict) -> dict:
    return {h["host"]: h["result"] for h in doc["hosts"]}


def test_a_maintenance_lock_refuses_every_run_until_it_is_released(workdir, artifacts):
    art = artifacts()
    code, doc = fleet(workdir, "deploy", "--artifact", str(art.path))
    assert code == 0 and set(results(doc).values()) == {"installed"}

    code, doc = fleet(workdir, "lock.acquire", "-H", "box1", "-m", "OS upgrade until 14:00")
    assert code == 0 and results(doc) == {"box1": "locked"}
    code, doc = fleet(workdir, "lock.status")
    assert code == 0 and results(doc) == {"box1": "locked", "box2": "free"}
    assert "OS upgrade until 14:00" in doc["hosts"][0]["note"]

    for args in (["deploy", "--force", "--artifact", str(art.path)], ["restart"], ["rollback"]):
        code, doc = fleet(workdir, *args)
        assert code == 1 and set(results(doc).values()) == {"refused"}, (args, doc)
        note = {h["host"]: h["note"] for h in doc["hosts"]}["box1"]
        assert "locked for maintenance by" in note and "OS upgrade until 14:00" in note
        assert "since 20" in note and "fleet lock.release -H box1 --inventory " in note
    # the hint works when pasted, from anywhere
    hint = shlex.split(note.split("When the work is done: ", 1)[1])
    assert hint[:2] == ["fleet", "lock.release"]
    elsewhere = workdir / "elsewhere"
    elsewhere.mkdir()
    code, doc = fleet(elsewhere, *hint[1:])
    assert code == 0 and results(doc) == {"box1": "unlocked"}
    code, doc = fleet(workdir, "lock.acquire", "-H", "box1", "-m", "OS upgrade until 14:00")

    code, doc = fleet(workdir, "lock.acquire", "-H", "box1", "-m", "another")
    assert code == 1 and "locked for maintenance by" in doc["hosts"][0]["note"]

    code, doc = fleet(workdir, "lock.release", "-H", "box1,box2")
    assert code == 0 and results(doc) == {"box1": "unlocked", "box2": "unlocked"}
    assert "OS upgrade until 14:00" in doc["hosts"][0]["note"]
    assert doc["hosts"][1]["note"] == "was not locked"
    code, doc = fleet(workdir, "restart")
    assert code == 0 and set(results(doc).values()) == {"restarted"}


def test_a_lock_with_an_expiry_lapses_and_a_lock_needs_a_reason(workdir):
    code, doc = fleet(workdir, "lock.acquire", "-H", "box2")
    assert code == 2 and "-m/--message" in doc["error"]
    code, doc = fleet(workdir, "lock.acquire", "-H", "box2", "-m", "x", "--expires", "soon")
    assert code == 2 and "--expires 'soon'" in doc["error"]
    code, doc = fleet(workdir, "lock.acquire", "-H", "box2", "-m", "long check",
                      "--expires", "1h")
    assert code == 0 and results(doc) == {"box2": "locked"}
    assert "until" in fleet(workdir, "lock.status", "-H", "box2")[1]["hosts"][0]["note"]
    assert results(fleet(workdir, "lock.release", "-H", "box2")[1]) == {"box2": "unlocked"}
    code, doc = fleet(workdir, "lock.acquire", "-H", "box2", "-m", "quick check",
                      "--expires", "1s")
    assert code == 0 and results(doc) == {"box2": "locked"}
    deadline = time.monotonic() + 60
    while results(fleet(workdir, "lock.status", "-H", "box2")[1]) != {"box2": "free"}:
        assert time.monotonic() < deadline, "the expired lock was still reported"
        time.sleep(0.2)


def test_a_host_where_the_lock_command_cannot_run_fails_saying_what_it_printed(workdir):
    code, doc = fleet(workdir, "lock.status", "-H", "nopython,box2")
    assert code == 1 and results(doc) == {"nopython": "failed", "box2": "free"}
    note = doc["hosts"][0]["note"]
    assert note.startswith("no answer from the lock command (exit ") and "python3" in note
