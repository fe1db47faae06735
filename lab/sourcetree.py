"""Snapshots of the repo's sources, to build releases from them.

A snapshot keeps artifacts stable while others edit the working tree, and is where a test or
the OpenClaw compat matrix makes one release differ from another (memory-continuity's version, a
plugin entry that throws at load, a Python core that raises at import, on every host or only on
some, a plugin that loads but fails its self-test). Shared by the deploy, integration and
OpenClaw tests and by `lab.openclaw.compat`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Iterable

from fleet.continuity.statelayout import StateLayout

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


def _entry(plugin: Path) -> Path:
    return plugin / json.loads((plugin / "package.json").read_text())["fleet"]["entry"]


def break_python_entry_on(plugin: Path, state_dir_names: Iterable[str], message: str) -> None:
    """Make the plugin's Python entry raise `message` on import only where the release is
    installed under a state dir whose basename is in `state_dir_names` (a release that fails on
    some hosts of a fleet). The entry finds its state dir from its own real path:
    `<state>/<StateLayout.RELEASES>/<release>/<StateLayout.RELEASE_PLUGINS>/<pkg>/<entry>`."""
    depth = (len(Path(StateLayout.RELEASES).parts) + 1
             + len(Path(StateLayout.RELEASE_PLUGINS).parts) + 2)
    names = sorted(set(state_dir_names))
    with open(_entry(plugin), "a") as fh:  # at the end: after its `from __future__` import
        fh.write("\n\nimport os as _os  # noqa: E402\n\n"
                 f"_state = _os.path.realpath(__file__)\nfor _ in range({depth}):\n"
                 "    _state = _os.path.dirname(_state)\n"
                 f"if _os.path.basename(_state) in {names!r}:\n"
                 f"    raise RuntimeError({json.dumps(message)})\n")


# What each plugin's self-test exercises, broken so that only the self-test sees it: the plugin
# loads, registers and answers readiness.
_SELFTEST_BREAKS = {
    "memory_continuity": ("startup.py", "\n\ndef inject(api, locator, event, ctx):  # broken\n"
                                        "    return None  # the recovered state is dropped\n"),
    "mc": ("commands_state.py", "\n\ndef cmd_state(agents, args):  # broken\n"
                                "    raise RuntimeError('state unreadable')\n"),
}


def break_selftest(plugin: Path) -> None:
    """Make the plugin (its directory in a snapshot) fail its self-test while it still loads
    and answers readiness: memory-continuity's recovery drops the state; `/mc state` fails."""
    name, patch = _SELFTEST_BREAKS[plugin.name]
    with open(plugin / name, "a") as fh:
        fh.write(patch)
