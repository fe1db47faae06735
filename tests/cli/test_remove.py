"""`fleet remove`, as Kamal's remove: the gateway stopped, fleet's plugins out of its config,
fleet's releases and files deleted, the agents' own data kept; asked every time; refused where
the gateway cannot be stopped for good or the host is locked; a second remove finds nothing, and
a deploy afterwards starts afresh."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from deploy_helpers import build, make_tree, stop_gateways
from onebox import INVENTORY, fleet, host


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    yield tmp_path
    stop_gateways([tmp_path / ".fleet/sandbox/box"])


def deployed(workdir: Path, artifacts) -> Path:
    code, doc = fleet(workdir, "deploy", "--artifact", str(artifacts().path))
    assert code == 0 and host(doc)["result"] == "installed", doc
    return workdir / ".fleet/sandbox/box"


def test_remove_takes_fleet_off_and_keeps_what_the_agents_wrote(workdir, artifacts):
    state = deployed(workdir, artifacts)
    code, doc = fleet(workdir, "status")
    pid = host(doc)["data"]["gateway"]["pid"]
    session = state / "agents/main/sessions/s1.jsonl"
    session.parent.mkdir(parents=True, exist_ok=True)
    session.write_text('{"type": "session"}\n')
    memory = state / "workspace/memory/CURRENT_STATE.md"
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.write_text("# Current State\n")

    code, doc = fleet(workdir, "remove", "--yes")
    assert code == 0 and host(doc)["result"] == "removed", doc
    with pytest.raises(ProcessLookupError):  # the gateway is gone
        os.kill(pid, 0)
    assert not (state / "fleet").exists()
    assert not list(state.glob("extensions/*"))
    assert not (state / "run/gateway.pid").exists() and not (state / "logs/gateway.log").exists()
    assert session.read_text() == '{"type": "session"}\n'
    assert memory.read_text() == "# Current State\n"
    assert not list(state.glob(".fleet-removed-*"))

    code, doc = fleet(workdir, "status")
    assert host(doc)["data"]["installed"] is False, doc
    # the host's audit log went with it; the control side's log keeps the remove
    log = [json.loads(line) for line in (workdir / ".fleet/deploy-log.jsonl").open()]
    assert log[-1]["action"] == "remove", log[-1]

    code, doc = fleet(workdir, "remove", "--yes")  # nothing left: absent, not a failure
    assert code == 0 and host(doc)["result"] == "absent", doc

    state_again = deployed(workdir, artifacts)  # a deploy afterwards starts afresh
    code, doc = fleet(workdir, "status")
    assert host(doc)["data"]["ready"] is True, doc
    assert state_again == state


def test_remove_is_asked_every_time(workdir, artifacts):
    state = deployed(workdir, artifacts)
    code, doc = fleet(workdir, "remove")
    assert code == 2 and doc["ok"] is False, doc
    assert "--yes" in doc["error"] and "box" in doc["error"], doc
    assert (state / "fleet/current").exists()
    code, doc = fleet(workdir, "status")
    assert host(doc)["data"]["ready"] is True, doc


def test_remove_is_refused_where_the_gateway_cannot_be_stopped(workdir, artifacts):
    state = deployed(workdir, artifacts)
    (workdir / "inventory.yaml").write_text(INVENTORY.replace(
        "gateway: {manager: fleet}", "gateway: {manager: command, options: {restart: 'true'}}"))
    code, doc = fleet(workdir, "remove", "--yes")
    assert code == 1 and host(doc)["result"] == "refused", doc
    assert "no stop command" in host(doc)["note"], doc
    assert (state / "fleet/current").exists() and (state / "fleet/audit.jsonl").exists()


def test_remove_is_refused_on_a_locked_host(workdir, artifacts):
    state = deployed(workdir, artifacts)
    code, doc = fleet(workdir, "lock.acquire", "--message", "disk swap")
    assert code == 0, doc
    code, doc = fleet(workdir, "remove", "--yes")
    assert code != 0 and "disk swap" in json.dumps(doc), doc
    assert (state / "fleet/current").exists()
    code, doc = fleet(workdir, "status")
    assert host(doc)["data"]["ready"] is True, doc


def test_a_release_older_than_remove_is_named_with_what_to_do(workdir, tmp_path, artifacts):
    tree = make_tree(tmp_path / "old", bump="5.0.1")  # an installer from before `remove`
    cli = tree / "fleet/installer/cli.py"
    text = cli.read_text()
    start = text.index('    sub.add_parser("remove"')
    cli.write_text(text[:start] + text[text.index("\n    sub.add_parser(", start + 1) + 1:])
    old = build(tree, tmp_path / "dist")
    code, doc = fleet(workdir, "deploy", "--artifact", str(old.path))
    assert code == 0, doc
    code, doc = fleet(workdir, "remove", "--yes")
    assert code == 1 and "predates `remove`" in host(doc)["note"], doc
    assert "deploy this version of fleet there first" in host(doc)["note"]
    deployed(workdir, artifacts)  # what the note says to do, then remove works
    code, doc = fleet(workdir, "remove", "--yes")
    assert code == 0 and host(doc)["result"] == "removed", doc
