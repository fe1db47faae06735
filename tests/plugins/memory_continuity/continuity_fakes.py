"""Test doubles for the memory-continuity plugin: the gateway's api, and state-file helpers.

A plain module (not conftest) so spawned worker processes can import it too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

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


def write_child(path: Path, objective: str = "None", unsurfaced: str = "None") -> None:
    """A child's state file plus the handoff record its run would leave, its answer being
    `unsurfaced` ("None": no answer), as the child's agent_end writes them."""
    from fleet.plugins.memory_continuity import handoff  # noqa: PLC0415

    write_state(path, objective=objective, unsurfaced=unsurfaced)
    answer = {"state": "empty", "text": None} if unsurfaced == "None" else {
        "state": "text", "text": unsurfaced}
    handoff.write(path.parent, {"version": handoff.VERSION, "updatedAt": "2026-03-31T07:51:52Z",
                                "task": objective, "ok": answer, "timeout": answer})
