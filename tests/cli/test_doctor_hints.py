"""What `fleet doctor` tells an operator to run works when pasted: a host's own hint ("fix:
`invoke restart`") comes back naming the host and its inventory, from any directory."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal

import pytest
from deploy_helpers import stop_gateways
from onebox import INVENTORY, fleet


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops/inventory.yaml").write_text(INVENTORY)
    yield tmp_path / "ops"
    stop_gateways([tmp_path / "ops/.fleet/sandbox/box"])


def test_a_hosts_fix_hint_names_the_host_and_inventory_and_works_pasted(workdir, artifacts):
    code, doc = fleet(workdir, "deploy", "--artifact", str(artifacts().path))
    assert code == 0, doc
    supervisor = json.loads((workdir / ".fleet/sandbox/box/run/supervisor.pid").read_text())
    os.kill(supervisor["pid"], signal.SIGKILL)  # the gateway goes on, unsupervised
    code, doc = fleet(workdir, "doctor")
    checks = {c["check"]: c for c in doc["hosts"][0]["data"]["checks"]}
    hint = re.search(r"fix: `([^`]+)`", checks["supervisor"]["message"])
    assert hint, checks["supervisor"]
    words = shlex.split(hint.group(1))
    assert words[:4] == ["fleet", "restart", "-H", "box"], words
    assert words[4:] == ["--inventory", str(workdir / "inventory.yaml")], words
    code, doc = fleet(workdir.parent, *words[1:])  # pasted elsewhere: it works
    assert code == 0 and doc["hosts"][0]["result"] == "restarted", doc
    code, doc = fleet(workdir, "doctor")
    checks = {c["check"]: c for c in doc["hosts"][0]["data"]["checks"]}
    assert checks["supervisor"]["severity"] == "ok", checks["supervisor"]
