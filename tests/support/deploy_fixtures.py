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
    """Builds on demand, cached per (bump, broken): base, bumped, broken releases."""
    cache = {}

    def get(bump: str | None = None, broken: bool = False, rebuild: str | None = None) -> Built:
        key = (bump, broken, rebuild)
        if key not in cache:
            work = tmp_path_factory.mktemp("src")
            cache[key] = build(make_tree(work / "tree", bump, broken, rebuild), work / "dist")
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

