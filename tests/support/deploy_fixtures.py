"""Fixtures for the deploy, installer and CLI tests: source trees with chosen versions,
artifacts, sandbox hosts (registered for every folder by `pytest_plugins` in tests/conftest.py).

Artifacts are built with `fleet.release.artifact.build_artifact` from copies of this repo's sources,
so a test can deploy a bumped version or a release whose plugin fails on import.
"""

from __future__ import annotations

import sys

import pytest
from deploy_helpers import (
    FAKEGW,
    Built,
    Sandbox,
    build,
    make_tree,
    stop_gateways,
)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory):
    """Builds on demand, cached per option set: base, bumped, broken releases, releases that
    fail to load on some hosts only (`fail_on`: state dir names) or fail their self-test."""
    cache = {}

    def get(bump: str | None = None, broken: bool = False, rebuild: str | None = None,
            fail_on: tuple[str, ...] = (), bad_selftest: bool = False) -> Built:
        fail_on = tuple(sorted(set(fail_on)))
        key = (bump, broken, rebuild, fail_on, bad_selftest)
        if key not in cache:
            work = tmp_path_factory.mktemp("src")
            tree = make_tree(work / "tree", bump, broken, rebuild, fail_on=fail_on,
                             bad_selftest=bad_selftest)
            cache[key] = build(tree, work / "dist")
        return cache[key]

    return get


@pytest.fixture
def fake_manager_args():
    """Installer flags that use the stand-in gateway through the `command` manager."""
    py = sys.executable
    return ["--manager", "command",
            "--manager-opt", f'restart={py} {FAKEGW} restart "$FLEET_STATE_DIR"',
            "--manager-opt", f'stop={py} {FAKEGW} stop "$FLEET_STATE_DIR"']


@pytest.fixture
def host_states(tmp_path):
    """Three state dirs; every gateway started under them is stopped afterwards."""
    dirs = [tmp_path / "hosts" / name for name in ("a", "b", "c")]
    yield dirs
    stop_gateways(dirs)


@pytest.fixture
def sandbox(tmp_path):
    box = Sandbox(tmp_path)
    yield box
    stop_gateways([box.state(n) for n in box.inventory.hosts])

