"""Fixtures for the release tests (helpers live in release_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from release_fixtures import Repo, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """A temp checkout of the project's release files with a bare `origin` remote."""
    return make_repo(tmp_path)
