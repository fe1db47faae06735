"""Components: what is versioned and released together, as declared in `pyproject.toml`.

```toml
[tool.fleet]
main = "memory-continuity"          # its tag is v<version>; it names the artifact
changelog = "CHANGELOG.md"

[tool.fleet.components.mc]
files = ["fleet/plugins/mc/openclaw.plugin.json:version", "fleet/plugins/mc/package.json:version"]
ships = ["fleet/plugins/mc"]                       # its changelog lists commits touching these
manifest = "fleet/plugins/mc/openclaw.plugin.json"   # its `requires` list holds dependency rules
tag = "mc-v{version}"                               # optional; this is the default
```
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from fleet.release.error import ReleaseError
from fleet.release.version_file import VersionFile, VersionFileError, load_toml

CONFIG_FILE = "pyproject.toml"
# An installed package (`pip install .`) has no pyproject.toml: its components are read from the
# plugins' own manifests (installed_project). The main component names the artifact; it must be
# `main` of [tool.fleet] (a test holds the two together).
INSTALLED_MAIN = "memory-continuity"
PLUGINS_DIR = "fleet/plugins"


@dataclass(frozen=True)
class Component:
    """A name, its version-bearing files, the paths it ships, and its tag format."""

    id: str
    files: tuple[VersionFile, ...]
    ships: tuple[str, ...] = ()
    manifest: Optional[str] = None
    tag_format: str = "{id}-v{version}"

    def tag(self, version: str) -> str:
        return self.tag_format.format(id=self.id, version=version)

    def tag_version(self, tag: str) -> Optional[str]:
        """The version a tag of this component names, or None if the tag is not one of ours."""
        prefix, _, suffix = self.tag_format.format(id=self.id, version="\0").partition("\0")
        if tag.startswith(prefix) and tag.endswith(suffix) and len(tag) > len(prefix + suffix):
            return tag[len(prefix):len(tag) - len(suffix)]
        return None

    def changelog_paths(self) -> Optional[list[str]]:
        """What a commit must touch to belong in this component's changelog: the paths it
        ships and its version files; None (every commit) when it declares no `ships`."""
        if not self.ships:
            return None
        return list(dict.fromkeys([*self.ships, *(vf.path for vf in self.files)]))

    def requires(self, root: Path) -> list[str]:
        """The `requires` list of the component's manifest (dependency rules), [] if none."""
        if not self.manifest:
            return []
        where = self.manifest
        try:
            data = json.loads((Path(root) / where).read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise VersionFileError(f"{where}: manifest of {self.id} is missing; restore it or fix "
                                   f"`manifest` of [tool.fleet.components.{self.id}]") from exc
        except ValueError as exc:
            raise VersionFileError(f"{where}: invalid JSON: {exc}; fix the syntax") from exc
        reqs = data.get("requires", []) if isinstance(data, dict) else []
        if not isinstance(reqs, list) or not all(isinstance(r, str) for r in reqs):
            raise VersionFileError(f"{where}: `requires` must be a list of strings such as "
                                   "\"memory-continuity\" or \"memory-continuity>=5\"")
        return reqs


@dataclass(frozen=True)
class Project:
    """The release configuration of one repository."""

    root: Path
    main: str
    components: dict = field(default_factory=dict)  # id -> Component, in declared order
    changelog: str = "CHANGELOG.md"

    def component(self, cid: Optional[str] = None) -> Component:
        """The named component (the main one by default); a clear error if unknown."""
        cid = cid or self.main
        if cid not in self.components:
            known = ", ".join(self.components)
            raise ReleaseError(f"unknown component {cid!r}; known in {CONFIG_FILE} [tool.fleet]: "
                               f"{known}")
        return self.components[cid]


def find_root(start: Path) -> Path:
    """The nearest directory at or above `start` whose pyproject.toml has a [tool.fleet] table."""
    start = Path(start).resolve()
    for cand in (start, *start.parents):
        cfg = cand / CONFIG_FILE
        if cfg.is_file() and "[tool.fleet" in cfg.read_text(encoding="utf-8"):
            return cand
    raise ReleaseError(f"no {CONFIG_FILE} with a [tool.fleet] table at or above {start}; "
                       "run from the project checkout")


def has_config(root: Path) -> bool:
    """True when `root` is a checkout with the release configuration (pyproject [tool.fleet])."""
    cfg = Path(root) / CONFIG_FILE
    try:
        return "[tool.fleet" in cfg.read_text(encoding="utf-8")
    except OSError:
        return False


def installed_project(root: Path) -> Project:
    """The components of an installed fleet package under `root` (e.g. site-packages), read
    from what it ships: each plugin's two manifests, and fleet's own `__version__`.

    The same components and versions a checkout declares, so `fleet build` gives the same
    artifact from an installed package as from the checkout it was installed from."""
    root = Path(root)
    components = {}
    for manifest in sorted((root / PLUGINS_DIR).glob("*/openclaw.plugin.json")):
        rel = manifest.parent.relative_to(root).as_posix()
        try:
            cid = json.loads(manifest.read_text(encoding="utf-8"))["id"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ReleaseError(f"{manifest}: unreadable plugin manifest ({exc})") from exc
        components[cid] = Component(
            id=cid, files=(VersionFile(f"{rel}/openclaw.plugin.json", "version"),
                           VersionFile(f"{rel}/package.json", "version")),
            ships=(rel,), manifest=f"{rel}/openclaw.plugin.json",
            tag_format="v{version}" if cid == INSTALLED_MAIN else "{id}-v{version}")
    if INSTALLED_MAIN not in components:
        raise ReleaseError(f"{root / PLUGINS_DIR}: no {INSTALLED_MAIN} plugin; is fleet "
                           "installed completely? (pip install --force-reinstall fleet)")
    components["fleet"] = Component(id="fleet",
                                    files=(VersionFile("fleet/__init__.py", "__version__"),))
    return Project(root=root, main=INSTALLED_MAIN, components=components)


def load_project(root: Path) -> Project:
    """Read `[tool.fleet]` from `<root>/pyproject.toml`; errors name the key and the fix."""
    root = Path(root)
    path = root / CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ReleaseError(f"{path}: missing; releases are configured in its [tool.fleet]") from exc
    tool = load_toml(text, CONFIG_FILE).get("tool", {}).get("fleet")
    if not isinstance(tool, dict):
        raise ReleaseError(f"{CONFIG_FILE}: no [tool.fleet] table; declare the components there "
                           "(see fleet/release/component.py)")
    raw = tool.get("components")
    if not isinstance(raw, dict) or not raw:
        raise ReleaseError(f"{CONFIG_FILE}: [tool.fleet.components] is missing or empty; "
                           "declare at least one component")
    main = tool.get("main", next(iter(raw)))
    if main not in raw:
        raise ReleaseError(f"{CONFIG_FILE}: tool.fleet.main = {main!r} is not a declared "
                           f"component ({', '.join(raw)})")
    components = {}
    for cid, spec in raw.items():
        components[cid] = _component(cid, spec, is_main=cid == main)
    changelog = tool.get("changelog", "CHANGELOG.md")
    if not isinstance(changelog, str) or not changelog:
        raise ReleaseError(f"{CONFIG_FILE}: tool.fleet.changelog must be a file name")
    return Project(root=root, main=main, components=components, changelog=changelog)


def _component(cid: str, spec: object, is_main: bool) -> Component:
    where = f"{CONFIG_FILE} [tool.fleet.components.{cid}]"
    if not isinstance(spec, dict):
        raise ReleaseError(f"{where}: must be a table")
    files = spec.get("files")
    if not isinstance(files, list) or not files:
        raise ReleaseError(f"{where}: `files` must list at least one \"<file>:<key>\"")
    vfiles = tuple(VersionFile.parse(f, f"{where} files") for f in files)
    ships = spec.get("ships", [])
    if not isinstance(ships, list) or not all(isinstance(s, str) for s in ships):
        raise ReleaseError(f"{where}: `ships` must be a list of paths")
    manifest = spec.get("manifest")
    if manifest is not None and not isinstance(manifest, str):
        raise ReleaseError(f"{where}: `manifest` must be a path to a JSON manifest")
    tag = spec.get("tag", "v{version}" if is_main else "{id}-v{version}")
    if not isinstance(tag, str) or tag.count("{version}") != 1:
        raise ReleaseError(f"{where}: `tag` must contain {{version}} exactly once, e.g. "
                           "\"{id}-v{version}\"")
    unknown = set(spec) - {"files", "ships", "manifest", "tag"}
    if unknown:
        raise ReleaseError(f"{where}: unknown keys {sorted(unknown)}; allowed: files, ships, "
                           "manifest, tag")
    return Component(id=cid, files=vfiles, ships=tuple(ships), manifest=manifest, tag_format=tag)
