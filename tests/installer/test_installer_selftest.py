"""The installer's self-test gate after readiness (step `selftest`) and the hook statistics in
`status`, with our real gateway (`--manager fleet`) and with a gateway that knows neither (the
stand-in of the `command` manager: an older release)."""

from __future__ import annotations

import os
from pathlib import Path

from deploy_helpers import release_of, run_installer, stop_gateways


def install(art, state: Path, *manager_args: str) -> tuple[int, dict]:
    return run_installer(art.path, "install", "--state-dir", str(state), "--sha256", art.sha256,
                         "--timeout", "30", *(manager_args or ("--manager", "fleet")))


def current(state: Path) -> str | None:
    link = state / "fleet" / "current"
    return os.readlink(link).split("/")[-1] if link.is_symlink() else None


def test_a_good_release_passes_its_selftest_and_status_shows_hook_statistics(artifacts,
                                                                              host_states):
    base, state = artifacts(), host_states[0]
    code, data = install(base, state)
    assert code == 0 and data["result"] == "installed", data
    assert {"ready", "selftest"} <= set(data["steps"]), data["steps"]
    assert data["selftest"]["state"] == "passed" and data["selftest"]["reason"] == ""
    assert {p: v["state"] for p, v in data["selftest"]["plugins"].items()} == {
        "mc": "passed", "memory-continuity": "passed"}
    assert data["selftest"]["plugins"]["memory-continuity"]["checks"] == 7

    code, status = run_installer(base.path, "status", "--state-dir", str(state))
    assert code == 0 and sorted(status["hooks"]) == ["mc", "memory-continuity"], status
    assert status["hooks"]["memory-continuity"]["calls"] == 0  # the self-test is not counted
    assert set(status["hooks"]["mc"]) == {"calls", "errors", "timeouts", "restarts", "since"}

    stop_gateways([state])
    code, status = run_installer(base.path, "status", "--state-dir", str(state))
    assert code == 0 and status["gateway"] is None and status["hooks"] is None


def test_a_release_that_fails_its_selftest_is_switched_back_naming_the_check(artifacts,
                                                                             host_states):
    """The bad release loads and is ready: only the self-test catches it, and the host goes
    back to its old release exactly as after a failed readiness."""
    base, bad, state = artifacts(), artifacts(bump="5.0.4", bad_selftest=True), host_states[0]
    assert install(base, state)[0] == 0
    code, data = install(bad, state)
    assert code == 1 and data["result"] == "rolled_back", data
    assert data["reason"].startswith("self-test failed: memory-continuity: check 'recovery': "
                                     "expected the parent's prompt to carry"), data["reason"]
    assert data["selftest"]["state"] == "failed"
    failed = data["selftest"]["plugins"]["memory-continuity"]
    assert [c["name"] for c in failed["checks"] if not c["ok"]][:1] == ["recovery"]
    assert "ready" in data["steps"] and "rollback" in data["steps"]
    assert data["to"]["release"] == release_of(base) and current(state) == release_of(base)
    assert data["gateway"]["versions"]["memory-continuity"] == base.version


def test_a_gateway_that_does_not_know_the_selftest_is_unsupported_and_installs(
        artifacts, host_states, fake_manager_args):
    base, state = artifacts(), host_states[0]
    code, data = install(base, state, *fake_manager_args)
    assert code == 0 and data["result"] == "installed", data
    assert data["selftest"]["state"] == "unsupported"
    assert ("selftest: unsupported (mc, memory-continuity do not know the self-test)"
            in data["notes"])
    code, status = run_installer(base.path, "status", "--state-dir", str(state),
                                 *fake_manager_args)
    assert code == 0 and status["hooks"] is None


def test_an_injected_failure_at_the_selftest_step_switches_back(artifacts, host_states,
                                                                fake_manager_args):
    base, bumped, state = artifacts(), artifacts(bump="5.0.1"), host_states[0]
    install(base, state, *fake_manager_args)
    (state / "fleet" / "faults").mkdir(parents=True)
    (state / "fleet" / "faults" / "selftest").write_text("fail\n")
    code, data = install(bumped, state, *fake_manager_args)
    assert code == 1 and data["result"] == "rolled_back"
    assert "injected fault at step 'selftest'" in data["reason"]
    assert current(state) == release_of(base)
