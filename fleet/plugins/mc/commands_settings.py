"""`/mc settings` and `/mc settings <key> <value>`: the memory-continuity plugin's config.

Why: the original `/mc` wrote to a top-level `entries` key OpenClaw never reads. Here the value
goes to `plugins.entries["memory-continuity"].config` in `<state>/openclaw.json` (where the
gateway reads it), is validated against the plugin manifest's configSchema first, and is written
atomically under the file's lock, keeping every other key of the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Mapping

from fleet.continuity import archive, paths, schema, store, strictjson
from fleet.continuity.pattern import compile_pattern
from fleet.plugins.mc.agents import MC_PLUGIN_ID, Agents
from fleet.plugins.mc.textfmt import RULE

MANIFEST = Path(__file__).resolve().parent.parent / "memory_continuity" / "openclaw.plugin.json"
# What is true once the file is written: the fleet gateway re-reads openclaw.json when it changes
# and hands the plugin its config fresh on every hook call; OpenClaw hot-reloads a change under
# `plugins.entries` (docs.openclaw.ai/gateway/configuration/hot-reload) unless reload is off.
APPLIED = (
    "  Applied: the running gateway uses it from the next agent run, no restart needed.\n"
    "  (OpenClaw with gateway.reload.mode \"off\": openclaw plugins reload memory-continuity)"
)


def load_schema() -> Dict[str, Any]:
    """The memory-continuity manifest's configSchema."""
    text = store.read_text(MANIFEST)
    if text is None:
        raise RuntimeError(f"{MANIFEST}: memory-continuity manifest missing; reinstall the release")
    return json.loads(text)["configSchema"]


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value


def _usage(keys: List[str]) -> str:
    return "Usage: /mc settings <key> <value>\nKeys: " + ", ".join(keys)


def _describe(agents: Agents, props: Mapping[str, Any]) -> str:
    current = agents.mc_config()
    lines = ["MC Settings", RULE]
    for key, spec in props.items():
        value = current.get(key, spec.get("default"))
        lines.append(f"{key:<18} {_show(value):>6}   {spec.get('description', '')}")
    legacy = agents.config.get("entries")
    if isinstance(legacy, Mapping) and MC_PLUGIN_ID in legacy:
        lines += ["", 'Note: a top-level "entries" block exists; the gateway ignores it.']
    found = agents.with_memory()
    total = sum(len(archive.list_archives(a.workspace)) for a in found)
    lines += ["", "Stats:", f"  Agents with memory: {len(found)}", f"  Total archives:     {total}"]
    return "\n".join(lines)


def _parse(raw: str) -> Any:
    try:
        return strictjson.loads(raw)
    except ValueError as exc:
        raise ValueError(f"Cannot parse value: {raw} ({exc})") from None


def _section(parent: Dict[str, Any], key: str, where: str) -> Dict[str, Any]:
    child = parent.setdefault(key, {})
    if not isinstance(child, dict):
        raise ValueError(f'{where} is a {type(child).__name__}, not an object; fix openclaw.json')
    return child


def _write(config_path: Path, key: str, value: Any) -> None:
    """Under the config's lock (the installer takes it too before it commits its change), read,
    set, replace: through a symlink, the linked file is replaced and the link kept."""
    config_path = paths.config_write_target(config_path)
    with store.locked(config_path):
        config = paths.load_config(config_path)
        plugins = _section(config, "plugins", "plugins")
        entries = _section(plugins, "entries", "plugins.entries")
        fresh = MC_PLUGIN_ID not in entries
        entry = _section(entries, MC_PLUGIN_ID, f'plugins.entries["{MC_PLUGIN_ID}"]')
        if fresh:
            entry["enabled"] = True
        cfg = _section(entry, "config", f'plugins.entries["{MC_PLUGIN_ID}"].config')
        cfg[key] = value
        store.atomic_write(
            config_path, strictjson.dumps(config, indent=2, ensure_ascii=False) + "\n"
        )


def cmd_settings(agents: Agents, args: str) -> str:
    """Show every config key with its value, or set one key after validating it."""
    props = load_schema().get("properties", {})
    keys = list(props)
    parts = (args or "").split(None, 1)
    if not parts:
        return _describe(agents, props)
    if len(parts) < 2 or parts[0] in ("--help", "-h"):
        return _usage(keys)
    key, raw = parts[0], parts[1].strip()
    if key not in props:
        return f"Unknown key: {key}\nValid: {', '.join(keys)}"
    try:
        value = _parse(raw)
        schema.validate({key: value}, {"type": "object", "properties": {key: props[key]}})
        if key == "ignorePatterns":  # user regexes run in the gateway: only the safe language
            for item in value:
                compile_pattern(item)
    except ValueError as exc:
        return f"\u2717 {exc}"
    _write(agents.config_path, key, value)
    return f"\u2713 {key} = {_show(value)}\n{APPLIED}"
