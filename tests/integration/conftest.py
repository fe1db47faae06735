"""Fixtures for integration tests on real SSH hosts in Docker (marker `docker`).

A session-scoped 3-host harness serves read-only tests; `fresh_fleet` makes throw-away hosts for
tests whose faults damage a host. On a failing test the hosts' container logs and gateway logs are
attached to the report (pytest_runtest_makereport), since removal at teardown destroys them.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from pathlib import Path

import pytest
from integration_helpers import TaskRun, deploy, make_tree

from lab.harness import cleanup
from lab.harness import hosts as harness_hosts
from lab.harness.run import Harness, docker_client, start_harness

_RUNS_KEY = pytest.StashKey[list]()


@pytest.fixture(scope="session")
def docker_engine():
    client = docker_client()
    yield client
    client.close()


@pytest.fixture(scope="session")
def harness(docker_engine, tmp_path_factory, request) -> Harness:
    """Three hosts (cloud/opc, pi/administrator, edge-1/opc) for the whole session."""
    directory = tmp_path_factory.mktemp("harness")
    run, timing = start_harness(docker_engine, directory, count=3, log=print)
    # A killed session skips fixture teardown: remove the run at interpreter exit too (SIGTERM is
    # turned into SystemExit so atexit runs); a hard kill is left to the next session's sweep.
    atexit.register(cleanup.remove_run, docker_engine, run.run_id)
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    request.config.stash.setdefault(_RUNS_KEY, []).append(run)
    print(f"harness ready: {timing}")
    yield run
    run.close(logs_dir=_logs_dir(request.config))
    request.config.stash[_RUNS_KEY].remove(run)


@pytest.fixture
def fresh_fleet(docker_engine, harness, tmp_path, request):
    """Factory for a throw-away harness run: fresh_fleet([HostSpec, ...]) -> Harness."""
    made: list[Harness] = []

    def make(specs: list[harness_hosts.HostSpec]) -> Harness:
        run = Harness(docker_engine, tmp_path / f"fresh{len(made)}", images=harness.images)
        atexit.register(cleanup.remove_run, docker_engine, run.run_id)
        run.directory.mkdir(parents=True)
        from lab.harness.keys import generate_key  # noqa: PLC0415

        run.key = generate_key(run.directory)
        made.append(run)
        request.config.stash.setdefault(_RUNS_KEY, []).append(run)
        run.start_hosts(specs)
        return run

    yield make
    for run in made:
        run.close(logs_dir=_logs_dir(request.config))
        request.config.stash[_RUNS_KEY].remove(run)


def _logs_dir(config) -> Path | None:
    path = os.environ.get("FLEET_HARNESS_LOGS")
    return Path(path) if path else None


def _host_report(host: harness_hosts.Host) -> str:
    parts = [f"--- container log ({host.name}) ---", host.logs(tail=150)]
    try:
        if host.status() == "paused":
            host.container.unpause()
        gateway_log = host.exec(f"tail -n 80 {host.state_dir}/logs/gateway.log", timeout=10)
        parts += [f"--- gateway log ({host.name}) ---", gateway_log.stdout or gateway_log.stderr]
        audit = host.exec(f"tail -n 10 {host.state_dir}/fleet/audit.jsonl", timeout=10)
        parts += [f"--- audit ({host.name}) ---", audit.stdout or audit.stderr]
    except Exception as exc:  # the host may be dead; logs above are what we have
        parts.append(f"<exec into {host.name} failed: {exc}>")
    return "\n".join(parts)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when not in ("call", "setup") or not report.failed:
        return
    for run in item.config.stash.get(_RUNS_KEY, []):
        for host in list(run.hosts.values()):
            report.sections.append((f"harness {run.run_id} {host.name}", _host_report(host)))



@pytest.fixture(scope="session")
def openclaw_toolchain():
    """The project's Node + OpenClaw install (for OpenClaw hosts' image layer). Missing: skipped,
    unless FLEET_REQUIRE_OPENCLAW is set, which installs it (`invoke openclaw.install`'s code)."""
    from lab.openclaw import toolchain  # noqa: PLC0415

    found = toolchain.find()
    if found is not None:
        return found
    if not os.environ.get("FLEET_REQUIRE_OPENCLAW"):
        pytest.skip("the OpenClaw toolchain is not installed (invoke openclaw.install); "
                    "set FLEET_REQUIRE_OPENCLAW=1 to install it and make this an error")
    return toolchain.install(log=print)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory):
    """artifacts(version=None, broken=False) -> built .pyz (cached): reproducible releases."""
    from fleet.release.artifact import build_artifact  # noqa: PLC0415

    base = make_tree(tmp_path_factory.mktemp("src") / "tree")
    cache: dict = {}

    def get(version: str | None = None, broken: bool = False):
        key = (version, broken)
        if key not in cache:
            work = tmp_path_factory.mktemp("src")
            tree = base if key == (None, False) else make_tree(work / "tree", version, broken)
            cache[key] = build_artifact(tree, work / "dist")
        return cache[key]

    return get


@pytest.fixture(scope="session")
def base_deploy(harness, artifacts) -> TaskRun:
    """The first `invoke deploy` of the base release to the session harness."""
    run = deploy(harness.inventory_path, artifacts())
    assert run.code == 0, f"deploy failed: {run.data}\n{run.stderr[-2000:]}"
    return run


@pytest.fixture(scope="session")
def deployed(harness, base_deploy):
    """The session harness once a release has been deployed to it through `invoke deploy`."""
    return harness
