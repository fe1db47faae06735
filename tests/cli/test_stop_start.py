"""`fleet stop` / `fleet start`, as Kamal's app stop/start: the gateway stopped and left stopped
(status says who stopped it and what starts it), then started and ready; a ready gateway is left
alone; a manager that cannot stop a gateway for good is refused with what to do."""

from __future__ import annotations

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
