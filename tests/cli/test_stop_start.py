"""`fleet stop` / `fleet start`, as Kamal's app stop/start: the gateway stopped and left stopped
(status says who stopped it and what starts it), then started and ready; a ready gateway is left
alone; a manager that cannot stop a gateway for good is refused with what to do; a maintenance
lock, or a host outside the sandbox not yet confirmed, refuses both and changes nothing."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from deploy_helpers import stop_gateways
from onebox import INVENTORY, fleet, host


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    yield tmp_path
    stop_gateways([tmp_path / ".fleet/sandbox/box"])


def test_stop_leaves_it_stopped_and_start_brings_it_back(workdir, artifacts):
    code, doc = fleet(workdir, "deploy", "--artifact", str(artifacts().path))
    assert code == 0, doc
    code, doc = fleet(workdir, "stop")
    assert code == 0 and host(doc)["result"] == "stopped", doc
    code, doc = fleet(workdir, "status")
    data = host(doc)["data"]
    assert data["ready"] is False and "fleet stop" in data["problem"], data
    assert "fleet start starts it" in data["problem"]
    code, doc = fleet(workdir, "start")
    assert code == 0 and host(doc)["result"] == "started", doc
    code, doc = fleet(workdir, "status")
    assert host(doc)["data"]["ready"] is True, doc
    code, doc = fleet(workdir, "start")  # already ready: nothing restarted
    assert code == 0 and host(doc)["result"] == "running", doc


def test_stop_is_refused_where_the_manager_cannot_stop_it(workdir, artifacts):
    code, doc = fleet(workdir, "deploy", "--artifact", str(artifacts().path))
    assert code == 0, doc
    (workdir / "inventory.yaml").write_text(INVENTORY.replace(
        "gateway: {manager: fleet}", "gateway: {manager: command, options: {restart: 'true'}}"))
    code, doc = fleet(workdir, "stop")
    assert code == 1 and host(doc)["result"] == "refused", doc
    assert "no stop command" in host(doc)["note"], doc


def pasted(note: str, cwd: Path) -> int:
    """Run the `fleet lock.release ...` a refusal names, as pasted, from another directory."""
    words = shlex.split(note.split("When the work is done: ", 1)[1])
    assert words[:2] == ["fleet", "lock.release"], note
    cwd.mkdir(exist_ok=True)
    return fleet(cwd, *words[1:])[0]


def ready(workdir: Path, *select: str) -> bool:
    return host(fleet(workdir, "status", *select)[1])["data"]["ready"]


def test_stop_and_start_are_refused_on_a_locked_host(workdir, artifacts):
    code, doc = fleet(workdir, "deploy", "--artifact", str(artifacts().path))
    assert code == 0, doc
    code, doc = fleet(workdir, "lock.acquire", "-m", "disk swap")
    assert code == 0, doc
    code, doc = fleet(workdir, "stop")
    assert code == 1 and host(doc)["result"] == "refused", doc
    note = host(doc)["note"]
    assert "locked for maintenance" in note and "disk swap" in note, note
    assert ready(workdir)  # still running: the stop changed nothing
    assert pasted(note, workdir / "elsewhere") == 0
    code, doc = fleet(workdir, "stop")
    assert code == 0 and host(doc)["result"] == "stopped", doc
    fleet(workdir, "lock.acquire", "-m", "disk swap")
    code, doc = fleet(workdir, "start")
    assert code == 1 and host(doc)["result"] == "refused", doc
    assert "disk swap" in host(doc)["note"] and not ready(workdir)
    assert pasted(host(doc)["note"], workdir / "elsewhere") == 0
    code, doc = fleet(workdir, "start")
    assert code == 0 and host(doc)["result"] == "started", doc


OUTSIDE = """\
vars: {connection: local, gateway: {manager: fleet}, timeouts: {ready: 30, command: 120}}
hosts:
  box: {state_dir: outside/box}
"""


@pytest.fixture
def outside(tmp_path):
    """`box` outside the sandbox, in two inventories: `confirmed.yaml` (said yes to once, by
    its deploy) and `inventory.yaml` (never)."""
    (tmp_path / "inventory.yaml").write_text(OUTSIDE)
    (tmp_path / "confirmed.yaml").write_text(OUTSIDE)
    yield tmp_path
    stop_gateways([tmp_path / "outside/box"])


def test_stop_and_start_outside_the_sandbox_need_a_yes(outside, artifacts):
    code, doc = fleet(outside, "deploy", "-H", "box", "--inventory", "confirmed.yaml", "--yes",
                      "--artifact", str(artifacts().path))
    assert code == 0, doc
    code, doc = fleet(outside, "stop", "-H", "box")  # inventory.yaml: never confirmed
    assert code == 2 and "outside the sandbox and not yet confirmed" in doc["error"], doc
    assert "--yes" in doc["error"] and ready(outside, "-H", "box")
    code, doc = fleet(outside, "stop", "-H", "box", "--inventory", "confirmed.yaml")
    assert code == 0 and host(doc)["result"] == "stopped", doc
    code, doc = fleet(outside, "start", "-H", "box")
    assert code == 2 and "not yet confirmed" in doc["error"], doc
    assert not ready(outside, "-H", "box")
    code, doc = fleet(outside, "start", "-H", "box", "--yes")
    assert code == 0 and host(doc)["result"] == "started", doc
    code, doc = fleet(outside, "stop", "-H", "box")  # asked once: confirmed now
    assert code == 0 and host(doc)["result"] == "stopped", doc
