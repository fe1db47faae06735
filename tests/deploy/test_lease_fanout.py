"""The fleet lease take's fan-out is bounded: at most TAKE_PARALLEL hosts connect and take at
once, on no more threads than that, and a host waiting its turn is timed from when its own take
starts (a fleet of a thousand hosts must not fail hosts for the control machine's own load)."""

from __future__ import annotations

import json
import shlex
import threading
import time

import pytest

from fleet.deploy import lease
from fleet.deploy.connection import CommandResult
from fleet.deploy.inventory import Host

HOLDER = {"owner": "other", "pid": 1, "from": "elsewhere", "age_s": 3, "lease_s": 600}


class FakeHosts:
    """A run's `conns` over fake hosts: each take answers after `delay` seconds with a lease
    (or `refuse`'s holder), counting how many hosts are connecting or taking at once and how
    many threads the process has meanwhile."""

    def __init__(self, delay: float = 0.02, refuse: tuple[str, ...] = ()):
        self.delay = delay
        self.refuse = refuse
        self.lock = threading.Lock()
        self.busy: set[str] = set()  # hosts connecting or running a lease command now
        self.most = 0  # the most at once
        self.threads: list[int] = []  # threading.active_count() as each take ran
        self.taken: set[str] = set()
        self.released: set[str] = set()
        self.asked: list[str] = []

    def _enter(self, name: str) -> None:
        with self.lock:
            self.busy.add(name)
            self.most = max(self.most, len(self.busy))
            self.threads.append(threading.active_count())

    def get(self, host: Host) -> FakeHosts.Conn:
        self._enter(host.name)
        return FakeHosts.Conn(self, host)

    def drop(self, host: Host) -> None:
        with self.lock:
            self.busy.discard(host.name)

    class Conn:
        def __init__(self, hosts: FakeHosts, host: Host):
            self.hosts, self.host = hosts, host

        def run(self, command: str, timeout: float) -> CommandResult:
            hosts, name = self.hosts, self.host.name
            words = shlex.split(command)
            action = words[words.index("-c") + 3]
            hosts._enter(name)
            try:
                time.sleep(hosts.delay)
                with hosts.lock:
                    if action == "release":
                        hosts.released.add(name)
                        return CommandResult(0, '{"ok": true}\n', "")
                    hosts.asked.append(name)
                    if name in hosts.refuse:
                        return CommandResult(3, json.dumps({"ok": False, "holder": HOLDER}), "")
                    hosts.taken.add(name)
                    return CommandResult(0, '{"ok": true, "artifact": null}\n', "")
            finally:
                with hosts.lock:
                    hosts.busy.discard(name)

        def close(self) -> None:
            pass


def fleet(count: int, connect: float = 10.0) -> list[Host]:
    return [Host(f"h{i:03d}", host="192.0.2.1", timeouts={"connect": connect})
            for i in range(count)]


@pytest.fixture
def bound(monkeypatch):
    monkeypatch.setattr(lease, "TAKE_PARALLEL", 4)
    return 4


def test_more_hosts_than_the_bound_all_get_the_lease_never_more_than_the_bound_at_once(bound):
    hosts, fake = fleet(40), FakeHosts()
    before = threading.active_count()
    held = lease.take(hosts, "tester", 60, fake)
    assert not held.refused and not held.late and not held.unanswered
    assert sorted(h.name for h in held.held) == [h.name for h in hosts]
    assert fake.most <= bound
    assert max(fake.threads) <= before + bound + 1  # the pool, not a thread per host
    fake.most = 0
    lease.release(held, fake)
    assert fake.released == {h.name for h in hosts} and fake.most <= bound


def test_a_refusal_on_one_host_releases_every_lease_taken(bound):
    hosts, fake = fleet(30), FakeHosts(refuse=("h005",))
    held = lease.take(hosts, "tester", 60, fake)
    assert held.refused and list(held.refusals) == ["h005"] and not held.held
    assert "other" in held.refusals["h005"]
    assert fake.taken and fake.taken <= fake.released  # all or none
    assert fake.most <= bound
    # the run is refused as a whole: the hosts still waiting their turn are not asked at all
    assert len(fake.asked) < len(hosts)


def test_a_queued_host_is_timed_from_its_own_take(monkeypatch, bound):
    """Five rounds of takes that each answer well within a host's budget, but together take
    longer than one budget: none is late or failed for having waited its turn."""
    monkeypatch.setattr(lease, "TAKE_MARGIN_S", 0.0)
    monkeypatch.setattr(lease, "TAKE_WAIT_S", 0.5)  # each host's budget: 0.5 + 0.5 s
    hosts, fake = fleet(5 * bound, connect=0.5), FakeHosts(delay=0.3)
    held = lease.take(hosts, "tester", 60, fake)
    assert not held.late and not held.unanswered and not held.unreached
    assert sorted(h.name for h in held.held) == [h.name for h in hosts]
    for host in hosts:
        assert held.wait(host) is None


def test_a_host_whose_take_never_started_is_not_worked_on():
    """A late host still queued when the run's wait for it ended (`Lease.wait`) never gets a
    take: it is unanswered, so the run changes nothing there, and nothing is released there."""
    held = lease.Lease("run")
    host = Host("queued")
    held.late.add(host.name)
    assert held.wait(host) is None
    assert "did not start in time" in held.unanswered[host.name]
    held.targets = [host]
    fake = FakeHosts()
    lease.release(held, fake)
    assert not fake.released
