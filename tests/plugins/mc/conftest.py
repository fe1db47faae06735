"""Fixtures for /mc tests."""

from __future__ import annotations

import pytest
from mc_helpers import NOW, Mc

from fleet.plugins.mc import textfmt


@pytest.fixture
def mc(tmp_path, monkeypatch):
    monkeypatch.setattr(textfmt, "utcnow", lambda: NOW)
    return Mc(tmp_path)
