"""Fixtures for gateway tests: state dirs, an in-process gateway, started processes to stop."""

from __future__ import annotations

from pathlib import Path
from typing import List

import pytest
from gateway_helpers import RECORDER, install, run_cli, write_plugin

from fleet.gateway.layout import Layout
from fleet.gateway.scaffold import init
from fleet.gateway.service import Gateway


@pytest.fixture
def state(state_dir: Path) -> Path:
    """The shared empty state dir (tests/conftest.py), by the name the gateway tests use."""
    return state_dir


@pytest.fixture
def recorder_gateway(tmp_path: Path, state: Path) -> Gateway:
    """An in-process gateway with the recording plugin loaded."""
    install(state, write_plugin(tmp_path / "plugins", "recorder", RECORDER))
    gw = Gateway(Layout(state))
    gw.load_plugins()
    assert gw.health()["ready"], gw.health()
    return gw


@pytest.fixture
def real_gateway(state: Path) -> Gateway:
    """An in-process gateway on an `init`-ed state dir: the real memory-continuity and /mc."""
    init(Layout(state))
    gw = Gateway(Layout(state))
    gw.load_plugins()
    assert gw.health()["ready"], gw.health()
    return gw


@pytest.fixture
def gateways():
    """Tracks state dirs with started gateways and stops them at teardown."""
    started: List[Path] = []
    yield started
    for s in started:
        run_cli(s, "stop", "--timeout", "3")
