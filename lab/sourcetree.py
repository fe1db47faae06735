"""Snapshots of the repo's sources, to build releases from them.

A snapshot keeps artifacts stable while others edit the working tree, and is where a test or
the OpenClaw compat matrix makes one release differ from another (memory-continuity's version, a
plugin entry that throws at load, a Python core that raises at import). Shared by the deploy,
integration and OpenClaw tests and by `lab.openclaw.compat`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Iterable

REPO = Path(__file__).resolve().parent.parent
PROJECT_FILES = ("pyproject.toml", "README.md")


def snapshot(dst: Path, files: Iterable[str] = PROJECT_FILES, version: str | None = None) -> Path:
    """Copy `fleet/` (without bytecode) and the top-level `files` that exist into `dst`, with
    memory-continuity at `version` when given; returns that plugin's directory in `dst`."""
    shutil.copytree(
        REPO / "fleet", dst / "fleet", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    for name in files:
        if (REPO / name).exists():
            shutil.copy(REPO / name, dst / name)
    plugin = dst / "fleet" / "plugins" / "memory_continuity"
    if version:
        for name in ("openclaw.plugin.json", "package.json"):
            data = json.loads((plugin / name).read_text())
            data["version"] = version
            (plugin / name).write_text(json.dumps(data, indent=2) + "\n")
    return plugin


def break_js_entry(plugin: Path, message: str) -> None:
    """Make the plugin's OpenClaw entry (`index.js`) throw `message` when OpenClaw loads it."""
    entry = plugin / "index.js"
    entry.write_text(f"throw new Error({json.dumps(message)});\n" + entry.read_text())


def break_python_entry(plugin: Path, message: str) -> None:
    """Make the plugin's Python entry raise `message` on import (a release that fails to load
    in our gateway)."""
    main = json.loads((plugin / "package.json").read_text())["fleet"]["entry"]
    (plugin / main).write_text(f"raise RuntimeError({json.dumps(message)})\n")
