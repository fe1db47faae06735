"""The plugin's config, validated against its own manifest schema with defaults on every call.

OpenClaw hands the config over fresh on each hook call (users edit it with `/mc settings`), so it
is read and validated each time; a bad value names the key instead of silently misbehaving.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Mapping

from fleet.continuity import regularfile
from fleet.continuity.schema import validate

PLUGIN_ID = "memory-continuity"
MANIFEST = Path(__file__).resolve().parent / "openclaw.plugin.json"

_schema_cache: Dict[str, Any] = {}


def config_schema() -> Mapping[str, Any]:
    """The manifest's `configSchema` (read once)."""
    if "schema" not in _schema_cache:
        try:
            manifest = json.loads(regularfile.read_text(MANIFEST))
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"{MANIFEST}: cannot read the plugin manifest: {exc}") from exc
        schema = manifest.get("configSchema")
        if not isinstance(schema, dict):
            raise RuntimeError(f"{MANIFEST}: `configSchema` must be an object")
        _schema_cache["schema"] = schema
    return _schema_cache["schema"]


def defaults() -> Dict[str, Any]:
    return validate({}, config_schema())


def plugin_config(api: Any) -> Dict[str, Any]:
    """`api.plugin_config` checked against the schema, defaults applied.

    Raises ValueError naming the key (`plugins.entries.memory-continuity.config.<key>`).
    """
    raw = getattr(api, "plugin_config", None)
    try:
        return validate(raw or {}, config_schema())
    except ValueError as exc:
        raise ValueError(
            f"openclaw.json plugins.entries.{PLUGIN_ID}.config: {exc}"
        ) from exc
