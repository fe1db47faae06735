"""The plugin directory as both gateways see it: manifest, package.json, standalone import."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from mc_helpers import FakeApi, state_text

import fleet.plugins.mc as mc_pkg

PLUGIN_DIR = Path(mc_pkg.__file__).resolve().parent


def test_manifest_and_package_agree():
    manifest = json.loads((PLUGIN_DIR / "openclaw.plugin.json").read_text())
    package = json.loads((PLUGIN_DIR / "package.json").read_text())
    assert manifest["id"] == "mc"
    assert manifest["version"] == package["version"] == "2.1.0"
    assert manifest["requires"] == ["memory-continuity"]
    assert (PLUGIN_DIR / package["fleet"]["entry"]).is_file()  # the Python entry
    assert package["type"] == "module" and package["main"] == "index.js"  # OpenClaw's entry
    assert package["openclaw"]["extensions"] == ["./index.js"]
    assert (PLUGIN_DIR / "index.js").is_file()


def test_entry_imports_as_standalone_module_and_answers(tmp_path):
    package = json.loads((PLUGIN_DIR / "package.json").read_text())
    entry = PLUGIN_DIR / package["fleet"]["entry"]
    spec = importlib.util.spec_from_file_location("mc_entry_under_test", entry)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    api = FakeApi()
    module.register(api)
    handler = api.commands["mc"][0]
    state = tmp_path / "state"
    ws = state / "workspace" / "memory"
    ws.mkdir(parents=True)
    (ws / "CURRENT_STATE.md").write_text(state_text(objective="From the gateway"))
    reply = handler({"args": "state --all", "stateDir": str(state), "config": {}})
    assert reply["text"].startswith("```\nMemory States (1 agents)\n")
    assert "From the gateway" in reply["text"]


def test_every_subcommand_in_the_help_answers(tmp_path):
    """Subcommand modules are imported when first asked: each one named in the help resolves
    and answers (its own reply or the agent lookup's), none ends in `MC error`."""
    from fleet.plugins.mc import plugin

    state = tmp_path / "state"
    (state / "workspace" / "memory").mkdir(parents=True)
    named = {line.split()[1] for line in plugin.HELP.splitlines() if line.startswith("/mc ")}
    assert named == set(plugin.COMMANDS)
    for sub in sorted(named):
        args = "nosuchagent" if sub in ("restore", "clear") else ""
        reply = plugin.handle({"args": f"{sub} {args}".strip(), "stateDir": str(state),
                               "config": {}})
        assert "MC error" not in reply["text"], (sub, reply)
