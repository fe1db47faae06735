"""A fake of the gateway's plugin api, and a state dir with two agents, for the plugin tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from fleet.continuity.document import StateDocument


class FakeLogger:
    def __init__(self) -> None:
        self.lines: List[Tuple[str, str]] = []

    def info(self, msg: Any) -> None:
        self.lines.append(("info", f"[memory-continuity] {msg}"))

    def warn(self, msg: Any) -> None:
        self.lines.append(("warn", f"[memory-continuity] {msg}"))

    def error(self, msg: Any) -> None:
        self.lines.append(("error", f"[memory-continuity] {msg}"))

    def text(self, level: Optional[str] = None) -> str:
        return "\n".join(m for lvl, m in self.lines if level is None or lvl == level)


class FakeApi:
    """What docs/architecture.md promises a plugin: id, state_dir, configs, logger, on()."""

    def __init__(self, state_dir: Path, openclaw_config: Dict[str, Any],
                 plugin_config: Optional[Dict[str, Any]] = None) -> None:
        self.id = "memory-continuity"
        self.version = "5.0.0"
        self.state_dir = state_dir
        self.openclaw_config = openclaw_config
        self.plugin_config = plugin_config or {}
        self.logger = FakeLogger()
        self.hooks: Dict[str, List[Tuple[int, Callable]]] = {}

    def on(self, hook: str, handler: Callable, priority: int = 0) -> None:
        self.hooks.setdefault(hook, []).append((priority, handler))

    def fire(self, hook: str, event: Dict[str, Any], ctx: Dict[str, Any]) -> Any:
        """Run a hook as the gateway does: higher priority first, prompt strings joined."""
        results = [h(event, ctx) for _p, h in sorted(self.hooks.get(hook, []),
                                                      key=lambda ph: -ph[0])]
        prompts = [r["prependSystemContext"] for r in results
                   if isinstance(r, dict) and r.get("prependSystemContext")]
        return "\n\n".join(prompts) if prompts else None


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    d = tmp_path / "state"
    d.mkdir()
    return d


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


def write_state(path: Path, objective: str = "None", unsurfaced: str = "None",
                stamp: str = "2026-03-31T07:51:52.123Z", **sections: str) -> None:
    doc = StateDocument.new(stamp)
    doc.set("Objective", objective)
    doc.set("Unsurfaced Results", unsurfaced)
    for name, value in sections.items():
        doc.set(name.replace("_", " "), value)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc.render(), encoding="utf-8")


def files_under(root: Path) -> Dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}
