"""`init`: lay out a state dir and link plugins into it, so a gateway runs from a checkout.

Deploys use the installer instead (extensions -> release symlinks); this is for dev and tests.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

from fleet.continuity import private, regularfile
from fleet.continuity.atomicfile import atomic_symlink
from fleet.gateway.layout import Layout
from fleet.gateway.sessions import atomic_write_json


class ScaffoldError(RuntimeError):
    """init would overwrite something it does not own."""


def default_plugin_source() -> Path:
    return Path(__file__).resolve().parent.parent / "plugins"


def plugin_sources(source: Path) -> List[Path]:
    """Plugin dirs under `source` (or `source` itself when it is one)."""
    if (source / "openclaw.plugin.json").is_file():
        return [source]
    if not source.is_dir():
        raise ScaffoldError(f"{source}: no such directory to link plugins from")
    return sorted(d for d in source.iterdir() if (d / "openclaw.plugin.json").is_file())


def _link(target: Path, link: Path) -> str:
    """Point `link` at `target` atomically (temp symlink + rename); refuse to replace a real dir."""
    if link.is_symlink():
        if Path(os.readlink(str(link))) == target:
            return "kept"
    elif link.exists():
        raise ScaffoldError(
            f"{link} exists and is not a symlink; move it away to let init link {target}"
        )
    atomic_symlink(link, target)
    return "linked"


def init(layout: Layout, link_from: Optional[Path] = None) -> Dict[str, Any]:
    layout.ensure()
    private.make_dir(layout.agents_dir)
    private.make_dir(layout.state_dir / "workspace")
    source = Path(link_from).resolve() if link_from else default_plugin_source()
    linked: Dict[str, str] = {}
    for plugin_dir in plugin_sources(source):
        try:
            manifest = json.loads(regularfile.read_text(plugin_dir / "openclaw.plugin.json"))
            pid = manifest["id"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ScaffoldError(f"{plugin_dir / 'openclaw.plugin.json'}: unusable ({exc})") from exc
        if not isinstance(pid, str) or "/" in pid or pid.startswith("."):
            raise ScaffoldError(f"{plugin_dir / 'openclaw.plugin.json'}: bad id {pid!r}")
        linked[pid] = _link(plugin_dir, layout.extensions / pid)
    config_path = layout.config_path
    created = False
    if not config_path.exists():
        config = {
            "agents": {"list": [{"id": "main", "default": True}]},
            "plugins": {
                "entries": {pid: {"enabled": True, "config": {}} for pid in sorted(linked)}
            },
        }
        atomic_write_json(config_path, config)
        created = True
    return {
        "stateDir": str(layout.state_dir),
        "config": str(config_path),
        "configCreated": created,
        "plugins": linked,
        "source": str(source),
    }
