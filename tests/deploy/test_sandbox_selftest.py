"""The self-test gate in a sandbox deploy (three local hosts, the real installer and gateway,
through fleet.deploy.api): a good release passes it on every host, a release that fails it is
switched back everywhere naming the check, a release that fails to load on one host fails there
only, and `status` carries each plugin's hook statistics."""

from __future__ import annotations

from deploy_helpers import release_of

from fleet.installer.protocol import HookStats

HOSTS = ("a", "b", "c")


def test_a_good_release_passes_the_selftest_step_on_every_host(sandbox, artifacts):
    base = artifacts()
    results = sandbox.deploy(base)
    for host in HOSTS:
        res = results[host]
        assert res.ok and res.result == "installed", res.note
        assert "host.ready" in res.steps and "host.selftest" in res.steps, res.steps
        assert res.data["selftest"]["state"] == "passed"
    status = sandbox.run("status")
    for host in HOSTS:
        hooks = status[host].status.hooks
        assert sorted(hooks) == ["mc", "memory-continuity"]
        assert all(isinstance(h, HookStats) and h.errors == h.timeouts == 0
                   for h in hooks.values())


def test_a_release_that_fails_its_selftest_is_switched_back_everywhere(sandbox, artifacts):
    base, bad = artifacts(), artifacts(bump="5.0.4", bad_selftest=True)
    sandbox.deploy(base)
    results = sandbox.deploy(bad)
    for host in HOSTS:
        res = results[host]
        assert res.result == "rolled_back" and not res.ok, res.note
        assert "self-test failed: memory-continuity: check 'recovery'" in res.note, res.note
        assert res.to_release["release"] == release_of(base)
        assert sandbox.current(host) == release_of(base)
        assert sandbox.health(host)["versions"]["memory-continuity"] == base.version
        assert sandbox.audit(host)[-1]["result"] == "rolled_back"


def test_a_release_that_fails_to_load_on_one_host_fails_there_only(sandbox, artifacts):
    base, partial = artifacts(), artifacts(bump="5.0.5", fail_on=("b",))
    sandbox.deploy(base)
    results = sandbox.deploy(partial)
    assert {h: r.result for h, r in results.items()} == {
        "a": "installed", "b": "rolled_back", "c": "installed"}
    assert "broken release: import fails on b" in results["b"].note, results["b"].note
    assert {h: sandbox.current(h) for h in HOSTS} == {
        "a": release_of(partial), "b": release_of(base), "c": release_of(partial)}
    assert results["a"].data["selftest"]["state"] == "passed"
