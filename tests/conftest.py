"""Shared test policy.

Tests marked `docker` need a usable Docker engine. Without one they are skipped, unless
FLEET_REQUIRE_DOCKER is set (CI sets it): then they fail, so a broken engine never passes as a skip.
Tests that run a plugin's OpenClaw entry need Node >= 24 (the `node` fixture): without one they
are skipped, unless FLEET_REQUIRE_OPENCLAW is set: then they fail. In a parallel run the tests
of both tiers share one worker (see pytest_collection_modifyitems).
Tests marked `temporal` need the Temporal SDK and the `temporal` CLI (the optional extra
`temporal`): without them they are skipped, unless FLEET_REQUIRE_TEMPORAL is set: then they
fail. They share one worker of their own and one dev server per session (`temporal_server`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Fixtures of the deploy, installer and CLI tests (artifacts, sandbox hosts), from
# tests/support (on sys.path through pyproject's `pythonpath`).
pytest_plugins = ["deploy_fixtures", "rollout_fleet"]


# The xdist groups of the tests that need a service: each group runs in one worker, one test
# after another. Every test that starts a real OpenClaw gateway (~900 MB) is in OPENCLAW, so at
# most two run at once (a test's own pair); the other Docker tests, whose harness hosts run
# fleet's light gateway, are in DOCKER and run beside them.
OPENCLAW = "openclaw"
DOCKER = "docker"
TEMPORAL = "temporal"  # the xdist group of the tests on the session's Temporal dev server


def docker_problem() -> str | None:
    """Why Docker cannot be used here, or None when it can."""
    try:
        import docker  # noqa: PLC0415
    except ImportError:
        return "the docker SDK is not installed (pip install -e '.[dev]')"
    try:
        client = docker.from_env(timeout=10)
        client.ping()
        client.close()
    except Exception as exc:  # any failure to reach the engine
        return f"no usable Docker engine: {exc}"
    return None


def openclaw_problem() -> str | None:
    """Why real OpenClaw cannot run here, or None when it can."""
    from lab.openclaw import registry, toolchain  # noqa: PLC0415

    missing = [v for v in toolchain.OPENCLAW_VERSIONS
               if (tool := toolchain.find(version=v)) is None or not toolchain.staged(tool)]
    if toolchain.find(version=toolchain.BELOW_FLOOR_VERSION) is None:
        missing.append(toolchain.BELOW_FLOOR_VERSION)
    if missing:
        return (f"OpenClaw {', '.join(missing)} not installed in {toolchain.cache_home()} "
                "(run `invoke openclaw.install`: the releases the tests run on)")
    if registry.entry() is None:
        return (f"Verdaccio {registry.VERDACCIO_VERSION}, the tests' npm registry, is not "
                f"installed in {registry.install_dir()} (run `invoke openclaw.install`)")
    return None


def temporal_problem() -> str | None:
    """Why the Temporal engine cannot be tested here, or None when it can."""
    try:
        import temporalio  # noqa: F401, PLC0415
    except ImportError:
        return "the temporalio SDK is not installed (pip install -e '.[dev,temporal]')"
    from fleet.deploy import temporalserver  # noqa: PLC0415

    try:
        temporalserver.binary()
    except temporalserver.ServerError as exc:
        return str(exc)
    return None


def _require_or_skip(config, items, marker: str, problem_of, env: str) -> None:
    marked = [item for item in items if item.get_closest_marker(marker)]
    if not marked:
        return
    problem = problem_of()
    if problem is None:
        return
    if os.environ.get(env):
        for item in marked:
            item.add_marker(pytest.mark.usefixtures(f"_{marker}_required"))
        setattr(config, f"_fleet_{marker}_problem", problem)
        return
    skip = pytest.mark.skip(reason=f"{problem} (set {env}=1 to make this an error)")
    for item in marked:
        item.add_marker(skip)


@pytest.fixture
def _temporal_required(request):
    problem = getattr(request.config, "_fleet_temporal_problem", None)
    if problem:
        pytest.fail(f"FLEET_REQUIRE_TEMPORAL is set but Temporal is unusable: {problem}")


@pytest.fixture
def _openclaw_required(request):
    problem = getattr(request.config, "_fleet_openclaw_problem", None)
    if problem:
        pytest.fail(f"FLEET_REQUIRE_OPENCLAW is set but OpenClaw is unusable: {problem}")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group markers
def pytest_collection_modifyitems(config, items):
    _require_or_skip(config, items, "openclaw", openclaw_problem, "FLEET_REQUIRE_OPENCLAW")
    _require_or_skip(config, items, "docker", docker_problem, "FLEET_REQUIRE_DOCKER")
    _require_or_skip(config, items, "temporal", temporal_problem, "FLEET_REQUIRE_TEMPORAL")
    # In a parallel run (`invoke test`: pytest-xdist, --dist loadgroup) the tests that start
    # real OpenClaw gateways (~900 MB each) run in one and the same worker, one after the other,
    # so a pair is never started twice at once; the other Docker tests share another worker.
    # The Temporal tests share one worker too (their own): one dev server, not one per worker.
    for item in items:
        group = _group_of(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


def _group_of(item) -> str | None:
    if item.get_closest_marker("openclaw"):  # a harness host with OpenClaw is here too
        return OPENCLAW
    if item.get_closest_marker("docker"):
        return DOCKER
    return TEMPORAL if item.get_closest_marker("temporal") else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """In a `--dist loadgroup` run, fail a service test before its fixtures start anything when
    the grouping did not take: pytest-xdist groups by a `@group` suffix it adds to each node id,
    and pytest 9.2 silently dropped that (https://github.com/pytest-dev/pytest-xdist/issues/1386).
    Unnoticed, two workers would each start a pair of OpenClaw gateways."""
    group = _group_of(item)
    if (getattr(item.config.option, "loadgroup", False) and group
            and not item.nodeid.endswith(f"@{group}")):
        pytest.fail(f"pytest-xdist did not keep this test in the {group} group: with this "
                    "pytest, --dist loadgroup does not work; install pytest < 9.2 "
                    "(pip install -e '.[dev]'), or run with --workers 1", pytrace=False)


@pytest.fixture
def _docker_required(request):
    problem = getattr(request.config, "_fleet_docker_problem", None)
    if problem:
        pytest.fail(f"FLEET_REQUIRE_DOCKER is set but Docker is unusable: {problem}")


@pytest.fixture(scope="session")
def node() -> str:
    """Path of a Node >= 24 (the pinned toolchain, else PATH), or skip/fail as the policy says."""
    from fleet.release.entries import find_node  # noqa: PLC0415
    from lab.openclaw.toolchain import pinned_node  # noqa: PLC0415

    found = find_node(pinned_node())
    if found.path is not None:
        return found.path
    if os.environ.get("FLEET_REQUIRE_OPENCLAW"):
        pytest.fail(f"FLEET_REQUIRE_OPENCLAW is set but there is no usable Node: {found.note}")
    pytest.skip(f"{found.note} (set FLEET_REQUIRE_OPENCLAW=1 to make this an error)")


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """An empty state dir, `<tmp_path>/state`."""
    d = tmp_path / "state"
    d.mkdir()
    return d
