"""Helpers for /mc tests: a tmp OpenClaw state dir, a fake gateway api, a frozen clock."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from fleet.plugins.mc import plugin

NOW = datetime(2026, 3, 31, 12, 0, tzinfo=timezone.utc)
FENCE = "```"


def state_text(objective="Ship the release", step="Testing", decisions="- Use zipapp",
               next_action="Deploy", blockers="None", unsurfaced="None",
               updated="2026-03-31T11:55:00.000Z") -> str:
    return (
        f"# Current State\n> Last updated: {updated}\n\n"
        f"## Objective\n{objective}\n\n## Current Step\n{step}\n\n"
        f"## Key Decisions\n{decisions}\n\n## Next Action\n{next_action}\n\n"
        f"## Blockers\n{blockers}\n\n## Unsurfaced Results\n{unsurfaced}\n"
    )


class FakeLogger:
    def __init__(self):
        self.lines = []

    def info(self, msg, *a):
        self.lines.append(msg)

    warn = error = info


class FakeApi:
    """The part of fleet.gateway's api the /mc plugin uses."""

    def __init__(self):
        self.commands = {}
        self.logger = FakeLogger()

    def register_command(self, name, handler, description=""):
        self.commands[name] = (handler, description)


class Mc:
    """A state dir with agents `main` (default) and `ops` (configured workspace elsewhere)."""

    def __init__(self, root: Path):
        self.state = root / "state"
        self.state.mkdir()
        self.ops_ws = root / "elsewhere" / "ops-ws"
        self.config = {
            "agents": {"list": [{"id": "main", "default": True},
                                {"id": "ops", "workspace": str(self.ops_ws)}]},
            "plugins": {"entries": {"memory-continuity": {"enabled": True, "config": {}}}},
            "gateway": {"mode": "local"},
        }
        self.write_config()
        api = FakeApi()
        plugin.register(api)
        self.handler = api.commands["mc"][0]

    def write_config(self):
        (self.state / "openclaw.json").write_text(json.dumps(self.config, indent=2))

    def ws(self, agent="main") -> Path:
        return self.state / "workspace" if agent == "main" else self.ops_ws

    def mem(self, agent="main") -> Path:
        return self.ws(agent) / "memory"

    def write_state(self, agent="main", text=None) -> Path:
        path = self.mem(agent) / "CURRENT_STATE.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(state_text() if text is None else text)
        return path

    def raw(self, args: str) -> str:
        return self.handler({"args": args, "stateDir": str(self.state), "config": {}})["text"]

    def __call__(self, args: str) -> str:
        """The reply body; asserts the original `/mc` fence."""
        text = self.raw(args)
        assert text.startswith(FENCE + "\n") and text.endswith("\n" + FENCE), text
        return text[len(FENCE) + 1:-len(FENCE) - 1]
