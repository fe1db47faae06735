"""Plugin manifests: `openclaw.plugin.json` (id, version, configSchema, requires) and the Python
entry file named by `package.json` `fleet.entry`. Every error names the file and key and says
what to write.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Dict

from fleet.continuity import regularfile, strictjson
from fleet.continuity.schema import check_schema

_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")  # fullmatch: "$" would accept "x\n"
# A version becomes a release dir name: PEP 440 / semver characters, never a path.
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def is_plugin_id(value: object) -> bool:
    """The one rule for a plugin id, which names `<state>/extensions/<id>`."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None and ".." not in value


def is_version_name(value: object) -> bool:
    """A version string that is safe as a path part (`releases/<version>-<sha12>`)."""
    return isinstance(value, str) and _VERSION.fullmatch(value) is not None and ".." not in value


class PluginLoadError(Exception):
    """One plugin could not be loaded; the message says which file or key and why."""


def read_json(path: Path, what: str) -> Dict[str, Any]:
    try:
        data = strictjson.loads(regularfile.read_text(path))
    except FileNotFoundError as exc:
        raise PluginLoadError(f"{path}: {what} is missing") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise PluginLoadError(f"{path}: cannot read {what}: {exc}") from exc
    except ValueError as exc:
        raise PluginLoadError(f"{path}: {what} is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise PluginLoadError(f"{path}: {what} must be a JSON object")
    return data


def validate_manifest(directory: Path, match_dir_name: bool = True) -> Dict[str, Any]:
    """The manifest if it has a usable id, version and configSchema; else PluginLoadError.

    `match_dir_name`: the id must be the directory's name (true under `<state>/extensions`; a
    release's own plugin dir, which the OpenClaw worker loads, is named after the package).
    """
    path = directory / "openclaw.plugin.json"
    manifest = read_json(path, "plugin manifest")
    pid = manifest.get("id")
    if not is_plugin_id(pid):
        raise PluginLoadError(f"{path}: key 'id' must be a lower-case plugin id, got {pid!r}")
    if match_dir_name and pid != directory.name:
        raise PluginLoadError(
            f"{path}: id {pid!r} does not match its directory name {directory.name!r}; "
            f"install it as extensions/{pid}"
        )
    version = manifest.get("version")
    if not isinstance(version, str) or not version.strip():
        raise PluginLoadError(f"{path}: key 'version' must be a non-empty string")
    if "configSchema" not in manifest:
        raise PluginLoadError(
            f"{path}: key 'configSchema' is required (use "
            '{"type": "object", "additionalProperties": false} for no config)'
        )
    try:
        check_schema(manifest["configSchema"], f"{path}: configSchema")
    except ValueError as exc:
        raise PluginLoadError(str(exc)) from exc
    requires = manifest.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise PluginLoadError(f"{path}: key 'requires' must be a list of plugin ids")
    return manifest


def entry_name(pkg: Dict[str, Any], pkg_path: Path) -> str:
    """The Python entry's file name: package.json `fleet.entry`, else `plugin.py`.

    One plugin directory serves two hosts: `main` and `openclaw.extensions` name the JavaScript
    entry OpenClaw loads, `fleet.entry` the Python module this gateway (and the worker behind the
    JavaScript entry) imports.
    """
    block = pkg.get("fleet", {})
    if not isinstance(block, dict):
        raise PluginLoadError(f"{pkg_path}: key 'fleet' must be an object like "
                              '{"entry": "plugin.py"}')
    name = block.get("entry", "plugin.py")
    if not isinstance(name, str) or not name.endswith(".py"):
        raise PluginLoadError(f"{pkg_path}: key 'fleet.entry' must name a .py file, got {name!r}")
    return name


def entry_file(directory: Path, plugin_id: str) -> Path:
    """The Python entry named by package.json `fleet.entry` (default plugin.py), kept inside the
    plugin dir."""
    main = "plugin.py"
    pkg_path = directory / "package.json"
    if pkg_path.exists():
        pkg = read_json(pkg_path, "package.json")
        main = entry_name(pkg, pkg_path)
    path = (directory / main).resolve()
    if not str(path).startswith(str(directory.resolve()) + os.sep):
        raise PluginLoadError(f"{pkg_path}: 'fleet.entry' {main!r} points outside the plugin "
                              "directory")
    if not path.is_file():
        raise PluginLoadError(f"{path}: entry file named by package.json 'fleet.entry' does not "
                              "exist")
    return path
