"""The no-op redeploy, answered by the lease take: active release + the gateway's ready.json +
a live pid that is a fleet gateway + no installer lock.

End to end on a sandbox host (the real installer and gateway, local connection), plus the take's
script alone against hand-made state dirs for the cases a real gateway cannot easily show.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from deploy_helpers import release_of

from fleet.deploy import lease
from fleet.gateway import process
from fleet.gateway.layout import Layout
from fleet.gateway.pidfile import running_pid


def ready_json(sandbox, host: str = "a") -> Path:
    return sandbox.state(host) / "run" / "ready.json"


def wait_dead(pid: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} still alive")


def test_redeploy_of_the_active_release_is_answered_by_the_lease_take(sandbox, artifacts):
    base = artifacts()
    first = sandbox.deploy(base, hosts="a")["a"]
    assert first.result == "installed", first.note
    pid = sandbox.health("a")["pid"]
    # what the gateway wrote: one line of sorted JSON
    text = ready_json(sandbox).read_text()
    rec = json.loads(text)
    assert text == json.dumps(rec, sort_keys=True) + "\n"
    assert rec["pid"] == pid and rec["release"] == release_of(base)
    assert rec["sha256"] == base.sha256
    audit = len(sandbox.audit("a"))
    again = sandbox.deploy(base, hosts="a")["a"]
    assert again.result == "unchanged" and again.ok, again.note
    assert again.data["fast_path"] is True and again.data["restarted"] is False
    assert again.to_release["release"] == release_of(base)
    assert again.to_release["components"] == base.components
    assert len(sandbox.audit("a")) == audit  # the installer did not run
    assert sandbox.health("a")["pid"] == pid


def test_after_kill_9_the_redeploy_goes_through_the_installer_and_ends_ready(sandbox,
                                                                             artifacts):
    base = artifacts()
    sandbox.deploy(base, hosts="a")
    pid = sandbox.health("a")["pid"]
    layout = Layout(sandbox.state("a"))
    supervisor = running_pid(process.supervisor_pidfile(layout))
    os.kill(supervisor, signal.SIGKILL)  # both gone, as after a power cut: nothing brings it back
    wait_dead(supervisor)
    os.kill(pid, signal.SIGKILL)
    wait_dead(pid)
    assert json.loads(ready_json(sandbox).read_text())["pid"] == pid  # stale file left behind
    audit = len(sandbox.audit("a"))
    again = sandbox.deploy(base, hosts="a")["a"]
    assert again.ok, again.note
    assert not again.data.get("fast_path")
    assert len(sandbox.audit("a")) == audit + 1
    health = sandbox.health("a")
    assert health["ready"] and health["pid"] != pid and health["release"] == release_of(base)
    assert json.loads(ready_json(sandbox).read_text())["pid"] == health["pid"]
    # and from now on the no-op is answered by the take again
    assert sandbox.deploy(base, hosts="a")["a"].data.get("fast_path") is True


def test_an_installer_killed_after_its_switch_is_reported_then_reconciled(sandbox, artifacts):
    """The installer dies (kill -9) after switching and restarting, before its audit line: the
    deploy reports the release the host runs (read back), and the next deploy goes through the
    installer, which records that release and clears the dead installer's lock."""
    base, bumped = artifacts(), artifacts(bump="5.0.1")
    sandbox.deploy(base, hosts="a")
    kill = sandbox.fault("a", "audit", "kill")
    killed = sandbox.deploy(bumped, hosts="a")["a"]
    assert killed.result == "failed" and not killed.ok
    assert killed.to_release["release"] == release_of(bumped), killed.note
    assert "the host runs " + release_of(bumped) in killed.note
    assert "lock is still there" in killed.note
    kill.unlink()
    again = sandbox.deploy(bumped, hosts="a")["a"]
    assert again.ok and again.result == "unchanged", again.note
    assert not again.data.get("fast_path") and "audit log reconciled" in again.note
    log = sandbox.audit("a")
    assert log[-2]["action"] == "reconcile" and log[-2]["to"] == release_of(bumped)
    assert log[-1]["to"] == release_of(bumped)
    assert not (sandbox.state("a") / "fleet" / "deploy.lock").exists()
    assert sandbox.deploy(bumped, hosts="a")["a"].data.get("fast_path") is True


def test_ready_file_of_another_release_is_not_taken_as_unchanged(sandbox, artifacts):
    base = artifacts()
    sandbox.deploy(base, hosts="a")
    path = ready_json(sandbox)
    rec = json.loads(path.read_text())
    rec["release"] = "0.0.1-000000000000"
    path.write_text(json.dumps(rec, sort_keys=True) + "\n")
    audit = len(sandbox.audit("a"))
    again = sandbox.deploy(base, hosts="a")["a"]
    assert again.ok, again.note
    assert not again.data.get("fast_path")
    assert len(sandbox.audit("a")) == audit + 1


def test_ready_file_naming_a_dead_pid_is_not_taken_as_unchanged(sandbox, artifacts):
    base = artifacts()
    sandbox.deploy(base, hosts="a")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = ready_json(sandbox)
    rec = json.loads(path.read_text())
    rec["pid"] = dead.pid
    path.write_text(json.dumps(rec, sort_keys=True) + "\n")
    again = sandbox.deploy(base, hosts="a")["a"]
    assert again.ok, again.note
    assert not again.data.get("fast_path")


# --- the take's judgement alone ------------------------------------------------------------

SHA = "ab" * 32
VERSION = "1.2.3"
RELEASE = f"{VERSION}-{SHA[:12]}"


def fake_host(tmp_path: Path, pid, release: str = RELEASE, sha: str = SHA,
              ready_pid=None) -> Path:
    state = tmp_path / "state"
    rel = state / "fleet" / "releases" / release
    rel.mkdir(parents=True)
    meta = {"components": {"mc": "1.0"}, "plugins": {"mc": "mc"}, "sha256": sha,
            "version": VERSION}
    (rel / "fleet_release.json").write_text(json.dumps(meta, sort_keys=True))
    (state / "fleet" / "current").symlink_to(Path("releases") / release)
    (state / "run").mkdir()
    (state / "run" / "gateway.pid").write_text("" if pid is None else f"{pid}\n")
    rec = {"pid": pid if ready_pid is None else ready_pid, "ready": True, "release": release,
           "sha256": sha, "startedAt": "t", "versions": {"mc": "1.0"}}
    (state / "run" / "ready.json").write_text(json.dumps(rec, sort_keys=True) + "\n")
    return state


def check(state: Path) -> bool:
    """Whether the lease take, asked by a deploy of RELEASE, answers `unchanged` on `state`."""
    record = {"owner": "me", "pid": os.getpid(), "from": "here", "lease": 60.0,
              "deadline": time.time() + 60,
              "artifact": {"sha256": SHA, "size": 10, "release": RELEASE}}
    out = subprocess.run([sys.executable, "-I", "-S", "-c", lease.LEASE_PY, str(state), "take",
                          "run-1", json.dumps(record)], capture_output=True, text=True,
                         timeout=30)
    assert out.stderr == "" and out.returncode == 0, out.stderr  # quiet on every path
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer["ok"] is True, answer
    return answer["artifact"] == "unchanged"


def live(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", *argv])


def test_take_judgement_cases(tmp_path):
    gw = live("-m", "fleet.gateway")  # a live process whose cmdline names fleet.gateway
    other = live("something-else")  # a live pid that is not a gateway (reused pid)
    try:
        cases = {
            "ok": (fake_host(tmp_path / "ok", gw.pid), True),
            "reused pid": (fake_host(tmp_path / "reuse", other.pid),
                           not Path(f"/proc/{other.pid}/cmdline").exists()),
            "other release": (fake_host(tmp_path / "rel", gw.pid, release="9.9.9-abababababab"),
                              False),
            "other sha": (fake_host(tmp_path / "sha", gw.pid, sha="cd" * 32), False),
            "pidfile empty (clean stop)": (fake_host(tmp_path / "empty", None, ready_pid=gw.pid),
                                           False),
            "ready names another pid": (fake_host(tmp_path / "pid", gw.pid,
                                                  ready_pid=gw.pid * 10 + 1), False),
            "ready pid is a prefix": (fake_host(tmp_path / "pfx", gw.pid // 10 or 1,
                                                ready_pid=gw.pid), False),
        }
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        cases["dead pid"] = (fake_host(tmp_path / "dead", dead.pid), False)
        no_ready = fake_host(tmp_path / "noready", gw.pid)
        (no_ready / "run" / "ready.json").unlink()
        cases["no ready file"] = (no_ready, False)
        locked = fake_host(tmp_path / "locked", gw.pid)  # an installer died here: reconcile
        (locked / "fleet" / "deploy.lock").write_text('{"pid": 1}')
        cases["installer lock left"] = (locked, False)
        got = {name: check(state) for name, (state, _) in cases.items()}
        assert got == {name: want for name, (_, want) in cases.items()}
    finally:
        for proc in (gw, other):
            proc.kill()
            proc.wait()
