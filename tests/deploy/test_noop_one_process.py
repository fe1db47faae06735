"""What a deploy starts on each host, counted by the interpreter the inventory names.

Every host-side process fleet starts is the inventory's `python` (the shell line `exec`s it),
so a wrapper there that logs each start before it `exec`s the real interpreter counts them:
a no-op redeploy of the active release is ONE process per host (the lease take answers
`unchanged` and takes no lease), a full deploy is two (the take, then the upload and installer,
which gives the lease back itself). A dead gateway, a host whose lease another run holds and
`--force` still get the full way.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from deploy_helpers import Sandbox, release_of, stop_gateways

from fleet.continuity.statelayout import StateLayout
from fleet.deploy import maintenance
from fleet.gateway import process
from fleet.gateway.layout import Layout
from fleet.gateway.pidfile import running_pid

INVENTORY = """\
vars:
  connection: local
  python: {python}
  gateway: {{manager: fleet}}
  timeouts: {{ready: 30, command: 120}}
hosts:
  a: {{state_dir: hosts/a}}
  b: {{state_dir: hosts/b}}
groups:
  sandbox: {{hosts: [a, b]}}
"""


@pytest.fixture
def counted(tmp_path):
    """A sandbox of two hosts whose `python` logs every start to `starts.log`."""
    log = tmp_path / "starts.log"
    wrapper = tmp_path / "python-counted"
    wrapper.write_text(f'#!/bin/sh\necho "$$" >> {log}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    box = Sandbox(tmp_path, INVENTORY.format(python=wrapper))
    box.starts = log
    yield box
    stop_gateways([box.state(n) for n in box.inventory.hosts])


def starts(box) -> int:
    """Host processes started since the last call."""
    n = len(box.starts.read_text().splitlines()) if box.starts.exists() else 0
    box.starts.write_text("")
    return n


def no_lease(box, host: str) -> bool:
    return not StateLayout(box.state(host)).lease.exists()


def test_a_noop_redeploy_is_one_process_per_host_and_a_deploy_two(counted, artifacts):
    base = artifacts()
    first = counted.deploy(base)
    assert all(r.result == "installed" for r in first.values()), first
    assert starts(counted) == 2 * 2  # per host: the take, the upload + installer
    assert no_lease(counted, "a") and no_lease(counted, "b")  # given back by the installer
    audit = {h: len(counted.audit(h)) for h in ("a", "b")}
    again = counted.deploy(base)
    for host, res in again.items():
        assert res.result == "unchanged" and res.ok, res.note
        assert res.data["fast_path"] is True and res.data["restarted"] is False
        assert res.to_release["release"] == release_of(base)
        assert res.duration_s > 0  # the take's round trip, shown in the table
        assert len(counted.audit(host)) == audit[host]  # the installer did not run
        assert no_lease(counted, host)
    assert starts(counted) == 2  # one per host


def test_force_goes_through_the_installer(counted, artifacts):
    base = artifacts()
    counted.deploy(base, hosts="a")
    starts(counted)
    forced = counted.deploy(base, hosts="a", force=True)["a"]
    assert forced.ok and forced.result == "restarted", forced.note
    assert not forced.data.get("fast_path")
    assert starts(counted) == 2


def test_a_dead_gateway_gets_the_full_way(counted, artifacts):
    base = artifacts()
    counted.deploy(base, hosts="a")
    layout = Layout(counted.state("a"))
    supervisor = running_pid(process.supervisor_pidfile(layout))
    pid = counted.health("a")["pid"]
    for victim in (supervisor, pid):  # nothing brings it back
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.kill(victim, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)
    starts(counted)
    again = counted.deploy(base, hosts="a")["a"]
    assert again.ok and not again.data.get("fast_path"), again.note
    assert starts(counted) >= 2
    health = counted.health("a")
    assert health["ready"] and health["pid"] != pid


def test_a_host_held_by_another_lock_is_refused_not_unchanged(counted, artifacts):
    base = artifacts()
    counted.deploy(base, hosts="a")
    hosts = counted.inventory.select("a")
    held = maintenance.acquire(hosts, counted.sink, "disk swap", "ops@example")
    assert held[0].ok
    try:
        res = counted.deploy(base, hosts="a")["a"]
        assert res.result == "refused" and "disk swap" in res.note
    finally:
        maintenance.release(hosts, counted.sink)
    assert counted.deploy(base, hosts="a")["a"].result == "unchanged"


def test_an_installer_lock_left_behind_gets_the_full_way(counted, artifacts):
    base = artifacts()
    counted.deploy(base, hosts="a")
    lock = StateLayout(counted.state("a")).lock
    lock.write_text('{"owner": "gone", "pid": 999999, "time": 0, "lease": 1}\n')
    starts(counted)
    again = counted.deploy(base, hosts="a")["a"]
    assert again.ok and not again.data.get("fast_path"), again.note
    assert starts(counted) == 2
    assert not lock.exists()


def test_the_wrapper_counts_every_start(tmp_path):
    """The counter itself: a started interpreter is logged once."""
    log = tmp_path / "starts.log"
    wrapper = tmp_path / "py"
    wrapper.write_text(f'#!/bin/sh\necho "$$" >> {log}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    assert os.system(f"{wrapper} -c pass") == 0
    assert Path(log).read_text().count("\n") == 1
