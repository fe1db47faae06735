"""A rollback started by a run that no longer holds the host's fleet lease does not switch
(`rollback --fleet-lease RUN`, as install's): a revert its run gave up on never lands later. A
lease that ran out is not held (its run died or gave up)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from deploy_helpers import release_of, run_installer

from fleet.continuity.statelayout import StateLayout


def current(state: Path) -> str | None:
    link = state / "fleet" / "current"
    return os.readlink(link).split("/")[-1] if link.is_symlink() else None


def test_a_rollback_switches_only_while_its_run_holds_the_fleet_lease(artifacts, host_states):
    base, new, state = artifacts(), artifacts(bump="5.0.1"), host_states[0]
    for art in (base, new):
        code, data = run_installer(art.path, "install", "--state-dir", str(state), "--sha256",
                                   art.sha256, "--timeout", "30", "--manager", "fleet")
        assert code == 0 and data["result"] == "installed", data
    lease = StateLayout(state).lease
    lease.parent.mkdir(parents=True, exist_ok=True)
    lease.write_text(json.dumps({"run": "another-run", "owner": "x", "time": time.time(),
                                 "lease": 60}))
    code, data = run_installer(new.path, "rollback", "--state-dir", str(state), "--manager",
                               "fleet", "--fleet-lease", "my-run", "--to", release_of(base))
    assert data["result"] == "refused" and "no longer holds" in data["reason"], data
    assert current(state) == release_of(new)  # not switched
    lease.write_text(json.dumps({"run": "my-run", "owner": "x", "time": time.time() - 61,
                                 "lease": 60}))  # its own, but run out
    code, data = run_installer(new.path, "rollback", "--state-dir", str(state), "--manager",
                               "fleet", "--fleet-lease", "my-run", "--to", release_of(base))
    assert data["result"] == "refused" and "no longer holds" in data["reason"], data
    assert current(state) == release_of(new)
    lease.write_text(json.dumps({"run": "my-run", "owner": "x", "time": time.time(),
                                 "lease": 60}))
    code, data = run_installer(new.path, "rollback", "--state-dir", str(state), "--manager",
                               "fleet", "--fleet-lease", "my-run", "--to", release_of(base))
    assert code == 0 and data["result"] == "rolled_back", data
    assert current(state) == release_of(base)
