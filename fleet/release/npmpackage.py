"""The plugins as OpenClaw packages: one npm tarball per plugin, `dist/<name>-<version>.tgz`.

OpenClaw users install plugins with `openclaw plugins install <npm spec | archive>` (npm,
ClawHub, a `.tgz`). Such a package must be whole on its own: there is no fleet release beside
it. So each tarball holds, under `package/` as `npm pack` makes it:

- `package.json`: the plugin's own, its `openclaw` block (compat, build) unchanged, its entry
  (`main`, `openclaw.extensions`) pointing into the tree below;
- `openclaw.plugin.json`: the plugin's manifest, at the root where OpenClaw looks for it;
- `README.md`: what it is and that it needs Python 3 (`python3` on PATH, or the plugin's
  `python` setting);
- `fleet/...`: the same layout as a deployed release, cut down to what this plugin's worker
  imports: `fleet/__init__.py`, `fleet/continuity`, `fleet/gateway`, `fleet/plugins/__init__.py`,
  the release's OpenClaw proof, `fleet/plugins/<plugin>/` whole (its `index.js`, `bridge.mjs`,
  manifest and Python core) and the manifests of the plugins it requires (`requires`). The
  bridge finds the Python core there exactly as in a release (`locate()` in
  `fleet/plugins/bridge.mjs`).

Same sources -> same bytes: entries sorted, every mtime npm's own fixed date, uid/gid 0 with no
owner names, mode 0644, no directory entries, ustar headers, gzip level 9 with mtime 0 and no
file name. (Gzip output is stable for one zlib version, as for the artifact.)
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from fleet.continuity.atomicfile import atomic_write
from fleet.release.component import Project, has_config, installed_project, load_project
from fleet.release.error import ReleaseError
from fleet.release.hostside import package_files
from fleet.release.verify import verify

# What every plugin's worker needs besides its own directory (fleet/gateway/worker.py and the
# continuity library it and the plugins import); never the installer.
CORE_FILES = ("fleet/__init__.py", "fleet/plugins/__init__.py",
              "fleet/plugins/openclaw-proven.json")
CORE_PACKAGES = ("fleet/continuity", "fleet/gateway")
PREFIX = "package/"
# 1985-10-26T08:15:00Z: the date `npm pack` gives every entry, so a diff against its output
# shows only what differs in content.
NPM_MTIME = 499162500
# npm's rules for a new package name (validate-npm-package-name): lower case, URL-safe, at most
# 214 characters, not starting with `.` or `_`; a scope is `@scope/`.
_NPM_NAME = re.compile(r"^(?:@[a-z0-9-~][a-z0-9-._~]*/)?[a-z0-9-~][a-z0-9-._~]*$")
README = """\
# {name}

{description}

An OpenClaw plugin ({id}) made by fleet's `invoke release`: the plugin's OpenClaw entry
(`{entry}`), the bridge that runs its Python core in one long-lived worker, and that Python
core with the continuity package it needs.

- OpenClaw {compat} (`openclaw.compat` of package.json: OpenClaw refuses the install on an
  older release).
- **Python >= 3.9** on the gateway host: `python3` on the gateway's PATH, or set the plugin's
  `python` setting (`plugins.entries.{id}.config.python`) or `FLEET_PYTHON`.

```bash
openclaw plugins install npm:{name}@{version}
```
"""


@dataclass(frozen=True)
class NpmPackage:
    """A built package: its tarball, npm name and version, and the tarball's SHA-256."""

    component: str
    path: Path
    name: str
    version: str
    sha256: str


def tarball_name(name: str, version: str) -> str:
    """The file name `npm pack` gives a package: `<name>-<version>.tgz`, a scope's `@` dropped
    and its `/` made `-`."""
    return f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"


def plugin_components(project: Project) -> list:
    """The components that are OpenClaw plugins (they declare a manifest), in declared order."""
    return [comp for comp in project.components.values() if comp.manifest]


def planned_names(project: Project, versions: dict) -> list:
    """The tarball names a release of `versions` ({component: new version}) writes: every
    plugin's, a component not released at its current version."""
    names = []
    for comp in plugin_components(project):
        rel = f"{Path(comp.manifest).parent.as_posix()}/package.json"
        pkg = _read_json(Path(project.root), rel)
        names.append(tarball_name(str(pkg.get("name")),
                                  str(versions.get(comp.id, pkg.get("version")))))
    return names


def _read_json(root: Path, rel: str) -> dict:
    try:
        data = json.loads((root / rel).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReleaseError(f"{rel}: cannot read it as JSON ({exc}); the npm package is made "
                           "from it") from exc
    if not isinstance(data, dict):
        raise ReleaseError(f"{rel}: not a JSON object; the npm package is made from it")
    return data


def package_json(root: Path, plugin_dir: str) -> dict:
    """The package.json the tarball holds: the plugin's own, its entry moved into the tree."""
    rel = f"{plugin_dir}/package.json"
    pkg = _read_json(root, rel)
    name = pkg.get("name")
    if not isinstance(name, str) or len(name) > 214 or not _NPM_NAME.match(name):
        raise ReleaseError(f"{rel} `name` = {name!r} is not a name npm accepts (lower case "
                           "letters, digits, `-._~`, at most 214 characters, an optional "
                           "@scope/); fix it there")
    block = pkg.get("openclaw")
    entries = block.get("extensions") if isinstance(block, dict) else None
    if not (isinstance(entries, list) and entries and all(isinstance(e, str) for e in entries)):
        raise ReleaseError(f"{rel} has no `openclaw.extensions` list; OpenClaw loads the entry "
                           'it names: write "openclaw": {"extensions": ["./index.js"]}')
    floor = (block.get("compat") or {}).get("minGatewayVersion")
    if not isinstance(floor, str) or not floor:
        raise ReleaseError(f"{rel} has no `openclaw.compat.minGatewayVersion`; the package's "
                           "install floor is made from it")
    moved = [f"./{plugin_dir}/{e.removeprefix('./')}" for e in entries]
    out = dict(pkg)
    out["main"] = moved[0]
    # `install.minHostVersion` is the floor OpenClaw checks before it installs any package, on
    # old releases too (2026.4.24's install code reads `compat` for ClawHub installs only): an
    # OpenClaw below the floor refuses the package by its own check, as fleet refuses it.
    install = dict(block.get("install") or {})
    install["minHostVersion"] = f">={floor}"
    out["openclaw"] = {**block, "extensions": moved, "install": install}
    return out


def required_manifests(project: Project, comp_id: str) -> list:
    """The manifests of the plugins `comp_id` requires (its manifest's `requires`), where a
    release has them: a plugin reads what it needs of them (`/mc settings` validates against
    memory-continuity's configSchema), and its package has no other copy of them."""
    by_name = {canonicalize_name(c.id): c for c in plugin_components(project)}
    found = []
    for raw in project.component(comp_id).requires(project.root):
        try:
            other = by_name.get(canonicalize_name(Requirement(raw).name))
        except InvalidRequirement:
            other = None  # `invoke verify` refuses it before any build
        if other is not None and other.id != comp_id:
            found.append(other.manifest)
    return sorted(found)


def _tree_files(root: Path, project: Project, comp_id: str) -> list:
    """The files of the checkout one plugin's package copies as they are (its package.json and
    manifest are read too, and written under other names)."""
    plugin_dir = Path(project.component(comp_id).manifest).parent.as_posix()
    return [*CORE_FILES, *package_files(root, (*CORE_PACKAGES, plugin_dir)),
            *required_manifests(project, comp_id)]


def source_files(root: Path, project: Project) -> list:
    """Every file of the checkout the plugins' packages are made from, sorted: what a release
    must find committed (`cut.preflight`), or the packages would hold bytes no commit has."""
    found = set()
    for comp in plugin_components(project):
        plugin_dir = Path(comp.manifest).parent.as_posix()
        found.update([*_tree_files(root, project, comp.id), comp.manifest,
                      f"{plugin_dir}/package.json"])
    return sorted(rel for rel in found if (Path(root) / rel).exists())


def _entries(root: Path, project: Project, comp_id: str) -> tuple:
    """(package.json as written, {path inside the package: bytes}) for one plugin."""
    comp = project.component(comp_id)
    plugin_dir = Path(comp.manifest).parent.as_posix()
    pkg = package_json(root, plugin_dir)
    manifest = _read_json(root, comp.manifest)
    for rel in CORE_FILES:
        if not (root / rel).is_file():
            raise ReleaseError(f"{rel}: missing; every OpenClaw package ships it")
    files = {rel: (root / rel).read_bytes() for rel in _tree_files(root, project, comp_id)}
    compat = (pkg.get("openclaw") or {}).get("compat") or {}
    files["README.md"] = README.format(
        name=pkg["name"], id=manifest.get("id", comp.id), version=pkg.get("version"),
        description=pkg.get("description") or manifest.get("description") or "",
        entry=pkg["main"].removeprefix("./"),
        compat=compat.get("pluginApi", "of the range it declares")).encode("utf-8")
    files["openclaw.plugin.json"] = (root / comp.manifest).read_bytes()
    files["package.json"] = (json.dumps(pkg, indent=2) + "\n").encode("utf-8")
    return pkg, files


def tarball_bytes(files: dict) -> bytes:
    """The gzipped tar of `files` ({relative path: bytes}) under `package/`, as npm pack lays
    it out, reproducibly (package.json first, then sorted)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for rel in sorted(files, key=lambda r: (r != "package.json", r)):
            data = files[rel]
            info = tarfile.TarInfo(PREFIX + rel)
            info.size = len(data)
            info.mtime = NPM_MTIME
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=9, mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def build_packages(root: Path, out_dir: Path, components: Optional[list] = None) -> list:
    """Build `<out_dir>/<name>-<version>.tgz` for each plugin component (all by default); same
    tree -> same bytes. Refuses, writing nothing, what `invoke verify` refuses."""
    root = Path(root)
    project = load_project(root) if has_config(root) else installed_project(root)
    verify(project).raise_for_problems("refusing to build the npm packages")
    wanted = components or [comp.id for comp in plugin_components(project)]
    built = []
    for comp_id in wanted:
        pkg, files = _entries(root, project, comp_id)
        built.append((comp_id, pkg, tarball_bytes(files)))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = []
    for comp_id, pkg, data in built:
        path = out_dir / tarball_name(pkg["name"], pkg["version"])
        atomic_write(path, data, 0o644)
        result.append(NpmPackage(comp_id, path, pkg["name"], pkg["version"],
                                 hashlib.sha256(data).hexdigest()))
    return result


def read_versions(path: Path) -> dict:
    """{member: version} of the version-bearing files inside a built tarball
    (`package/package.json`, `package/openclaw.plugin.json`); ReleaseError naming the tarball
    when it cannot be read."""
    found = {}
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for member in ("package.json", "openclaw.plugin.json"):
                handle = tar.extractfile(PREFIX + member)
                data = json.loads(handle.read().decode("utf-8")) if handle else None
                found[PREFIX + member] = data.get("version") if isinstance(data, dict) else None
    except (OSError, KeyError, ValueError, tarfile.TarError) as exc:
        raise ReleaseError(f"{path}: not a readable npm package ({exc}); remove it or rebuild "
                           "it with `invoke build --npm`") from exc
    return found
