"""Fixtures for integration tests on real SSH hosts in Docker (marker `docker`).

A session-scoped 3-host harness serves read-only tests; `fresh_fleet` makes throw-away hosts for
tests whose faults damage a host. On a failing test the hosts' container logs and gateway logs are
attached to the report (pytest_runtest_makereport), since removal at teardown destroys them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet.harness import hosts as harness_hosts
from fleet.harness.run import Harness, docker_client, start_harness

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
        run = Harness(docker_engine, tmp_path / f"fresh{len(made)}", image_tag=harness.image_tag)
        run.directory.mkdir(parents=True)
        from fleet.harness.keys import generate_key  # noqa: PLC0415

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
def deployed(harness, tmp_path_factory):
    """The session harness with the repo's release installed (TEMPORARY: direct installer)."""
    from fleet.harness import ssh  # noqa: PLC0415
    from fleet.release.artifact import build_artifact  # noqa: PLC0415

    art = build_artifact(Path(__file__).resolve().parents[2], tmp_path_factory.mktemp("dist"))
    for name, host in harness.hosts.items():
        client = ssh.connect(harness.target(name))
        try:
            sftp = client.open_sftp()
            sftp.put(str(art.path), f"/home/{host.user}/fleet.pyz")
            sftp.close()
        finally:
            client.close()
        result = harness.ssh(name, f"python3 fleet.pyz install --state-dir {host.state_dir} "
                                   f"--sha256 {art.sha256}", timeout=120)
        assert result.ok, result.stdout + result.stderr
    return harness
