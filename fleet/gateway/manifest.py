"""Plugin manifests: `openclaw.plugin.json` (id, version, configSchema, requires) and the entry
file named by `package.json` `main`. Every error names the file and key and says what to write.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Dict

from fleet.continuity import strictjson
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
        data = strictjson.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PluginLoadError(f"{path}: {what} is missing") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise PluginLoadError(f"{path}: cannot read {what}: {exc}") from exc
    except ValueError as exc:
        raise PluginLoadError(f"{path}: {what} is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise PluginLoadError(f"{path}: {what} must be a JSON object")
    return data


def validate_manifest(directory: Path) -> Dict[str, Any]:
    """The manifest if it has a usable id, version and configSchema; else PluginLoadError."""
    path = directory / "openclaw.plugin.json"
    manifest = read_json(path, "plugin manifest")
    pid = manifest.get("id")
    if not is_plugin_id(pid):
        raise PluginLoadError(f"{path}: key 'id' must be a lower-case plugin id, got {pid!r}")
    if pid != directory.name:
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


def entry_file(directory: Path, plugin_id: str) -> Path:
    """The entry named by package.json `main` (default plugin.py), kept inside the plugin dir."""
    main = "plugin.py"
    pkg_path = directory / "package.json"
    if pkg_path.exists():
        pkg = read_json(pkg_path, "package.json")
        oc = pkg.get("openclaw") if isinstance(pkg.get("openclaw"), dict) else {}
        if oc.get("id") not in (None, plugin_id):
            raise PluginLoadError(
                f"{pkg_path}: openclaw.id {oc.get('id')!r} differs from the manifest id "
                f"{plugin_id!r}"
            )
        main = pkg.get("main") or main
        if not isinstance(main, str):
            raise PluginLoadError(f"{pkg_path}: key 'main' must be a file name")
    path = (directory / main).resolve()
    if not str(path).startswith(str(directory.resolve()) + os.sep):
        raise PluginLoadError(f"{pkg_path}: 'main' {main!r} points outside the plugin directory")
    if not path.is_file():
        raise PluginLoadError(f"{path}: entry file named by package.json 'main' does not exist")
    return path
