"""Fixtures for the continuity tests: a state dir with two agents and a registered plugin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from continuity_fakes import FakeApi


@pytest.fixture
def openclaw_config() -> Dict[str, Any]:
    return {"agents": {"list": [{"id": "main", "default": True}, {"id": "coder"}]}}


@pytest.fixture
def api(state_dir: Path, openclaw_config: Dict[str, Any]) -> FakeApi:
    from fleet.plugins.memory_continuity import plugin

    (state_dir / "openclaw.json").write_text(json.dumps(openclaw_config))
    fake = FakeApi(state_dir, openclaw_config)
    plugin.register(fake)
    return fake


@pytest.fixture
def make_api(state_dir: Path, openclaw_config: Dict[str, Any]):
    """Another plugin instance on the same state dir (a restarted gateway or worker)."""
    from fleet.plugins.memory_continuity import plugin

    def make() -> FakeApi:
        fake = FakeApi(state_dir, openclaw_config)
        plugin.register(fake)
        return fake

    return make
