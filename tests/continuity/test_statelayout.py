"""The state dir layout: what docs/architecture.md lists is what StateLayout names."""

from __future__ import annotations

import re
from pathlib import Path

from fleet.continuity.statelayout import StateLayout, release_name

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def documented_paths() -> set:
    """Every `<state>/...` path of the layout table, placeholders and trailing `/` removed."""
    text = DOC.read_text(encoding="utf-8")
    block = text.split("## Host state directory layout", 1)[1].split("```")[1]
    found = set()
    for match in re.finditer(r"^<state>/(\S+)", block, re.MULTILINE):
        path = match.group(1).rstrip("/")
        parts = []
        for part in path.split("/"):
            if "<" in part:
                break
            parts.append(part)
        if parts:
            found.add("/".join(parts))
    return found


def test_every_path_of_the_documented_layout_is_named_by_state_layout():
    named = {v for k, v in vars(StateLayout).items() if k.isupper() and isinstance(v, str)}
    named |= {"/".join(p.split("/")[:i]) for p in named for i in range(1, p.count("/") + 1)}
    named.add("workspace")  # resolved by fleet.continuity.paths (OpenClaw's rule, env-aware)
    missing = sorted(p for p in documented_paths() if p not in named)
    assert not missing, f"documented in docs/architecture.md but not in StateLayout: {missing}"


def test_paths_are_absolute_under_the_state_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    layout = StateLayout("state")
    assert layout.pidfile == tmp_path / "state" / "run" / "gateway.pid"
    assert layout.release_dir("1.2.0", "ab" * 32) == (
        tmp_path / "state" / "fleet" / "releases" / "1.2.0-abababababab")
    assert release_name("1.2.0", "0123456789abcdef") == "1.2.0-0123456789ab"
