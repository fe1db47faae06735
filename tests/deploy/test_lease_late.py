"""The fleet lease with a host that never answers (a paused machine: TCP accepts, no SSH banner):
the other hosts do not wait for it, and it is not connected to again after its take failed."""

from __future__ import annotations

import socket
import threading

from deploy_helpers import SANDBOX_INVENTORY, Sandbox, release_of, stop_gateways

from fleet.deploy.lease import _go_on


def test_the_run_goes_on_without_late_answers_only_when_most_answered_and_they_are_late():
    assert not _go_on([], 8, 30.0)
    assert not _go_on([0.2, 0.3, 0.3], 8, 30.0)  # fewer than half answered
    assert not _go_on([0.4, 0.6, 0.6, 0.8], 8, 0.5)  # not late yet: the median answer, 0.6 s
    assert _go_on([0.4, 0.6, 0.6, 0.8], 8, 0.61)
    assert not _go_on([0.01] * 7, 8, 0.3)  # at least half a second, however fast the others
    assert _go_on([0.01] * 7, 8, 0.5)


def test_a_take_that_answers_late_holds_nothing_and_the_host_is_not_worked_on():
    """A take that ran after its deadline took no lease: the host is `unanswered` (its work
    reports the take failed and changes nothing), never held, never refused."""
    from fleet.deploy.connection import CommandResult
    from fleet.deploy.inventory import Host
    from fleet.deploy.lease import Lease

    held = Lease("run")
    held._record(Host("h"), CommandResult(0, '{"ok": false, "late": true, "now": 1.0}\n', ""))
    assert not held.held and not held.refused and "ran after its deadline" in held.unanswered["h"]


class SilentServer:
    """Accepts TCP connections and never says a word (a paused host behind its port)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self):
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_a_host_that_never_answers_holds_no_one_back_and_is_tried_once(tmp_path, artifacts):
    silent = SilentServer()
    box = Sandbox(tmp_path, f"""\
vars:
  connection: local
  gateway: {{manager: fleet}}
  timeouts: {{ready: 30, command: 120}}
hosts:
  a: {{state_dir: hosts/a}}
  b: {{state_dir: hosts/b}}
  paused:
    connection: ssh
    host: 127.0.0.1
    port: {silent.port}
    known_hosts: kh
    timeouts: {{connect: 20}}
groups:
  three: {{hosts: [a, b, paused]}}
""")
    base = artifacts()
    try:
        results = box.deploy(base, hosts="three")
    finally:
        silent.close()
        stop_gateways([box.state("a"), box.state("b")])  # started by the deploy
    assert results["a"].result == results["b"].result == "installed", results
    assert results["paused"].result == "unreachable" and not results["paused"].ok
    assert "while taking the fleet lease" in results["paused"].note
    assert len(silent.accepted) == 1  # the take only: no second connect, no release
    finals = [host for host, step, _ in box.events if step in ("installed", "unreachable")]
    assert finals.index("paused") > max(finals.index("a"), finals.index("b"))
    assert box.current("a") == box.current("b") == release_of(base)
    assert not (box.state("a") / "fleet" / "run.lease").exists()  # released after the run


def test_a_host_whose_lease_take_fails_is_not_changed(tmp_path, artifacts):
    box = Sandbox(tmp_path, SANDBOX_INVENTORY.replace(
        "b: {state_dir: hosts/b}", "b: {state_dir: hosts/b, python: /bin/false}"))
    base = artifacts()
    try:
        results = box.deploy(base, hosts="a,b")
    finally:
        stop_gateways([box.state("a")])
    assert results["a"].result == "installed", results
    assert results["b"].result == "failed" and not results["b"].ok
    assert "taking the fleet lease on this host failed (exit 1" in results["b"].note
    assert "nothing was changed" in results["b"].note
    assert not (box.state("b") / "fleet" / "artifacts").exists()  # not even an upload
    assert box.current("b") is None
