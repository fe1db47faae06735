"""`restart` and `rollback` on a host with no release: a failure that says so. Before, the
shell's "not installed" status answer came back as result `status`, ok, as if done."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("action", ["restart", "rollback"])
def test_restart_or_rollback_where_nothing_is_installed_fails_and_says_so(sandbox, action):
    [res] = sandbox.run(action, hosts="a").values()
    assert (res.result, res.ok) == ("failed", False)
    assert res.note == f"nothing to {action}: no release is installed on a; deploy one first"
