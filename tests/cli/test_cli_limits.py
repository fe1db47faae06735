"""Limits on what a user types, through the `fleet` script as a user runs it: `--parallel`
within what the pool can run, a run that fails while starting its threads gives its leases
back, `--expires` bounded (and a lock written before that bound still reads), inventory
timeouts bounded, and inventory host names that are invisible, or one name spelled twice, are
refused naming the file and the host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from deploy_helpers import stop_gateways
from fleetcli import FLEET

# Makes threads fail to start, as a process out of threads does ("can't start new thread"):
# FAIL_THREADS=pool fails the run's pool threads, FAIL_THREADS=take the lease take's second
# worker thread, FAIL_THREADS=take-all every one of them.
FAIL_THREADS = """\
import os, threading
_start = threading.Thread.start
_takes = []
def _failing_start(self):
    what = os.environ.get("FAIL_THREADS", "")
    if what == "pool" and self.name.startswith("fleet-host-"):
        raise RuntimeError("can't start new thread")
    if what.startswith("take") and self.name.startswith("fleet-take-"):
        _takes.append(self)
        if what == "take-all" or len(_takes) == 2:
            raise RuntimeError("can't start new thread")
    return _start(self)
threading.Thread.start = _failing_start
"""
INVENTORY = """\
vars: {connection: local, gateway: {manager: fleet}, timeouts: {ready: 30, command: 120}}
hosts:
  box1: {state_dir: .fleet/sandbox/box1}
  box2: {state_dir: .fleet/sandbox/box2}
  box3: {state_dir: .fleet/sandbox/box3}
groups:
  sandbox: {hosts: [box1, box2, box3]}
"""
BOXES = ("box1", "box2", "box3")


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    yield tmp_path
    stop_gateways([tmp_path / ".fleet" / "sandbox" / n for n in BOXES])


def fleet(cwd: Path, *args: str, env: dict | None = None,
          prelude: str = "") -> tuple[int, dict, str]:
    proc = subprocess.run([sys.executable, "-c", prelude + FLEET, *args, "--json"], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **(env or {})))
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def results(doc: dict) -> dict:
    return {h["host"]: h["result"] for h in doc["hosts"]}


def leases(workdir: Path) -> list[str]:
    return [n for n in BOXES
            if (workdir / ".fleet" / "sandbox" / n / "fleet" / "run.lease").exists()]


@pytest.mark.parametrize("task", ["deploy", "restart", "rollback", "status", "doctor"])
def test_parallel_above_what_the_pool_runs_is_refused_naming_flag_and_limit(workdir, task):
    code, doc, _ = fleet(workdir, task, "--parallel", "100000")
    assert code == 2 and doc["hosts"] == []
    assert "--parallel 100000: at most 256" in doc["error"]
    assert "use --parallel 256 or less" in doc["error"]
    assert not (workdir / ".fleet" / "sandbox").exists()  # no host was touched


def test_parallel_at_its_maximum_runs(workdir):
    code, doc, _ = fleet(workdir, "status", "--parallel", "256")
    assert code == 1 and set(results(doc)) == set(BOXES)  # every host answered (none ready)


def test_a_run_whose_threads_cannot_start_fails_each_host_and_leaves_no_lease(workdir):
    code, doc, _ = fleet(workdir, "restart", env={"FAIL_THREADS": "pool"},
                         prelude=FAIL_THREADS)
    assert code == 1 and results(doc) == dict.fromkeys(BOXES, "failed")
    note = doc["hosts"][0]["note"]
    assert "could not start" in note and "can't start new thread" in note
    assert "nothing was done on this host" in note and "Lower --parallel" in note
    assert leases(workdir) == []  # every lease the run took was given back
    code, doc, _ = fleet(workdir, "lock.acquire", "-m", "right after")
    assert code == 0 and results(doc) == dict.fromkeys(BOXES, "locked")


def test_a_lease_take_short_of_threads_takes_every_host_on_the_ones_it_has(workdir):
    _, doc, _ = fleet(workdir, "restart", env={"FAIL_THREADS": "take"}, prelude=FAIL_THREADS)
    assert set(results(doc)) == set(BOXES)
    for host in doc["hosts"]:  # every host taken, by one worker: nothing installed there yet
        assert host["note"].startswith("nothing to restart"), host
    assert leases(workdir) == []
    assert fleet(workdir, "lock.status")[0] == 0


def test_a_lease_take_without_threads_leaves_every_host_alone_and_no_lease(workdir):
    code, doc, _ = fleet(workdir, "restart", env={"FAIL_THREADS": "take-all"},
                         prelude=FAIL_THREADS)
    assert code == 1
    for host in doc["hosts"]:
        assert host["result"] == "failed", host
        assert "could not start a thread to take the fleet lease" in host["note"]
        assert "can't start new thread" in host["note"] and "not tried again" in host["note"]
    assert leases(workdir) == []
    assert fleet(workdir, "lock.status")[0] == 0


@pytest.mark.parametrize("expires, words", [
    ("99999999999999h", "--expires '99999999999999h': at most 30d"),
    ("31d", "--expires '31d': at most 30d"),
    ("2592001", "--expires '2592001': at most 30d"),
])
def test_expires_beyond_its_maximum_is_refused_and_takes_nothing(workdir, expires, words):
    code, doc, _ = fleet(workdir, "lock.acquire", "-m", "upgrade", "--expires", expires)
    assert code == 2 and words in doc["error"], doc
    assert "leave out --expires" in doc["error"]  # a lock without an end is the other way
    assert not (workdir / ".fleet" / "sandbox").exists()
    code, doc, _ = fleet(workdir, "lock.acquire", "-H", "box1", "-m", "upgrade",
                         "--expires", "30d")
    assert code == 0 and results(doc) == {"box1": "locked"}  # the maximum itself is fine


def test_a_lock_with_an_expiry_beyond_any_date_still_reads_and_releases(workdir):
    """A lock an older fleet wrote with `--expires 99999999999999h`: status, deploys and the
    release name it instead of failing on the date."""
    code, doc, _ = fleet(workdir, "lock.acquire", "-H", "box1", "-m", "forever-ish")
    assert code == 0
    lease = workdir / ".fleet" / "sandbox" / "box1" / "fleet" / "run.lease"
    record = json.loads(lease.read_text())
    record["expires"] = record["time"] + 99999999999999 * 3600.0
    lease.write_text(json.dumps(record))
    code, doc, _ = fleet(workdir, "lock.status", "-H", "box1")
    assert code == 0 and results(doc) == {"box1": "locked"}
    assert "forever-ish" in doc["hosts"][0]["note"] and "until" in doc["hosts"][0]["note"]
    code, doc, _ = fleet(workdir, "restart", "-H", "box1")
    assert code == 1 and results(doc) == {"box1": "refused"}
    assert "forever-ish" in doc["hosts"][0]["note"]
    code, doc, _ = fleet(workdir, "lock.release", "-H", "box1")
    assert code == 0 and results(doc) == {"box1": "unlocked"}
    assert not lease.exists()


@pytest.mark.parametrize("key", ["connect", "command", "transfer", "ready", "lock"])
def test_an_inventory_timeout_beyond_a_day_is_refused_naming_file_and_key(workdir, key):
    (workdir / "inventory.yaml").write_text(INVENTORY.replace(
        "box2: {state_dir: .fleet/sandbox/box2}",
        f"box2: {{state_dir: .fleet/sandbox/box2, timeouts: {{{key}: 1.0e+300}}}}"))
    code, doc, _ = fleet(workdir, "status")
    assert code == 2, doc
    assert f"{workdir / 'inventory.yaml'}: hosts.box2.timeouts.{key}" in doc["error"]
    assert "at most 86400" in doc["error"]


@pytest.mark.parametrize("name, shown, what", [
    ("box\\u202E1", "box\\u202e1", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("b\\u200Box", "b\\u200box", "U+200B ZERO WIDTH SPACE"),
    ("box\\e[31m", "box\\u001b[31m", "U+001B a control character"),
    ("\\u3164", "\\u3164", "U+3164 HANGUL FILLER"),
])
def test_a_host_name_with_a_hidden_character_is_refused_naming_file_and_host(workdir, name,
                                                                             shown, what):
    inventory = workdir / "inventory.yaml"
    inventory.write_text(INVENTORY.replace("box3: {", f'"{name}": {{'))
    code, doc, _ = fleet(workdir, "status", "-H", "box1")
    assert code == 2 and doc["hosts"] == []
    assert f"{inventory}: hosts.{shown}: host name '{shown}'" in doc["error"], doc["error"]
    assert what in doc["error"] and "rename this host with visible characters" in doc["error"]
    assert not (workdir / ".fleet").exists()


def test_two_spellings_of_one_host_name_are_refused_naming_both(workdir):
    inventory = workdir / "inventory.yaml"
    inventory.write_text(INVENTORY.replace("box3: {", '"caf\\u00e9": {').replace(
        "box2: {", '"cafe\\u0301": {').replace("[box1, box2, box3]", "[box1]"))
    code, doc, _ = fleet(workdir, "status", "-H", "box1")
    assert code == 2
    assert (f"{inventory}: hosts.caf\u00e9: 'caf\u00e9' (c a f U+00E9) and 'cafe\u0301' "
            "(c a f e U+0301) are one name after Unicode normalisation (NFKC); keep one "
            "spelling") in doc["error"], doc["error"]
    inventory.write_text(INVENTORY.replace("box3: {", '"\\uff42\\uff4f\\uff58\\uff11": {'))
    code, doc, _ = fleet(workdir, "status", "-H", "box1")
    assert code == 2 and "'box1' are one name after Unicode normalisation" in doc["error"]


def test_any_spelling_of_a_name_selects_the_one_the_file_defines(workdir):
    (workdir / "inventory.yaml").write_text(INVENTORY.replace("box3: {", '"caf\\u00e9": {')
                                            .replace("box3]", '"cafe\\u0301"]'))
    code, doc, _ = fleet(workdir, "status", "-H", "\uff42\uff4f\uff58\uff11,cafe\u0301")
    assert code == 1 and [h["host"] for h in doc["hosts"]] == ["box1", "caf\u00e9"]
    code, doc, _ = fleet(workdir, "status")  # the group's member spelled the other way
    assert [h["host"] for h in doc["hosts"]] == ["box1", "box2", "caf\u00e9"]


def test_an_inventory_that_is_not_utf8_or_too_large_is_refused_naming_where(workdir):
    inventory = workdir / "inventory.yaml"
    inventory.write_bytes(INVENTORY.encode().replace(b"box2: {", b"box2: {user: op\xe9, "))
    code, doc, _ = fleet(workdir, "status")
    assert code == 2 and f"{inventory}:4: not UTF-8 (byte 0xe9 at line 4, column 18" in \
        doc["error"], doc["error"]
    assert "fix that line" in doc["error"]
    with inventory.open("w") as fh:
        fh.write(INVENTORY + "# padding\n" * 500_000)  # 5 MB of comments
    code, doc, _ = fleet(workdir, "status")
    assert code == 2 and "bytes, larger than 4 MiB" in doc["error"]
    assert "split the fleet into several inventories" in doc["error"]
    inventory.unlink()
    os.mkfifo(inventory)
    code, doc, _ = fleet(workdir, "status")
    assert code == 2 and f"{inventory}: a FIFO, not a regular file" in doc["error"]


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args, words", [
    (["sim", "--jobs", "100000"], "--jobs 100000: at most 256 (one process each, ~60 MB)"),
    (["sim", "--seeds", "10000000000"], "--seeds 10000000000: at most 100000000"),
    (["sim", "--seed", str(2**70)], "--seed 1180591620717411303424: at most"),
    (["bench", "--count", "100000"], "--count 100000: at most 1000 (the largest benchmark"),
    (["harness.up", "--count", "5000"], "--count 5000: at most 64 (one container each"),
    (["openclaw.compat", "--jobs", "50"], "--jobs 50: at most 2 (a gateway holds ~900 MB)"),
    (["test", "--workers", "9999"], "--workers 9999: at most 64 (one test process each)"),
])
def test_the_checkouts_lab_tasks_refuse_counts_beyond_their_bound(args, words):
    """The lab's tasks started a process, a container or a thread per unit asked for: a typo
    of a few zeros took the machine."""
    proc = subprocess.run([sys.executable, "-m", "invoke", "-r", str(REPO), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert words in proc.stderr and "Traceback" not in proc.stderr
