"""Which OpenClaw versions a release's plugins support, and whether a gateway's version is one.

Each plugin declares it in its `package.json` with OpenClaw's own fields
(https://docs.openclaw.ai/plugins/manifest/package-json): `openclaw.compat.pluginApi` (a floor,
`>=2026.4.24`), `openclaw.compat.minGatewayVersion` (the same floor as a version) and
`openclaw.build.openclawVersion` (the newest OpenClaw the release was verified with). OpenClaw
itself enforces these only when it installs a package; fleet links a release's plugin dirs
instead, so the installer enforces them before it changes anything on a host: a gateway older
than the floor is refused, one newer than the verified version gets a note.

OpenClaw's versions are calendar versions with semver syntax (`2026.9.6`, `2026.5.3-1`,
`2026.9.1-beta.1`), ordered as semver orders them: numbers first, a pre-release below its
release. Standard library only.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
_FLOOR = re.compile(r"^\s*>=\s*(\S+)\s*$")


class CompatError(ValueError):
    """A plugin's declared range cannot be read; the message names the file and field."""


def version_key(version: str) -> Tuple:
    """A sort key that orders versions as semver does; ValueError for anything else."""
    m = _VERSION.match(version.strip())
    if not m:
        raise ValueError(f"{version!r} is not a version like 2026.9.6")
    core = tuple(int(g) for g in m.group(1, 2, 3))
    pre = m.group(4)
    if pre is None:
        return core + (1,)  # a release sorts after each of its pre-releases
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return core + (0, parts)


def newer(a: str, b: str) -> bool:
    """Whether version `a` is newer than `b`."""
    return version_key(a) > version_key(b)


@dataclass(frozen=True)
class Range:
    """The OpenClaw versions a release supports: `floor` and up; `verified` is the newest one
    it was tested with (None: not declared). `source` says which file declared the floor."""

    floor: str
    verified: Optional[str]
    source: str

    def describe(self) -> str:
        upto = f", verified up to {self.verified}" if self.verified else ""
        return f">={self.floor}{upto}"

    def refusal(self, running: str) -> Optional[str]:
        """Why a gateway at `running` cannot take this release, or None when it can."""
        try:
            too_old = version_key(running) < version_key(self.floor)
        except ValueError:
            return (f"cannot tell whether OpenClaw {running!r} is supported (not a version); "
                    f"this release supports OpenClaw {self.describe()}")
        if too_old:
            return (f"OpenClaw {running} is older than this release supports "
                    f"({self.describe()}, declared in {self.source}); upgrade OpenClaw "
                    "(npm install -g openclaw@latest), or deploy a release built for it")
        return None

    def note(self, running: str) -> Optional[str]:
        """A note for a gateway newer than the versions this release was verified with."""
        try:
            if self.verified and newer(running, self.verified):
                return (f"OpenClaw {running} is newer than the newest version this release was "
                        f"verified with ({self.verified})")
        except ValueError:
            pass
        return None


def declared(package: dict, source: str) -> Optional[Range]:
    """The range one plugin's package.json declares, None when it declares none."""
    block = package.get("openclaw") if isinstance(package, dict) else None
    compat = block.get("compat") if isinstance(block, dict) else None
    build = block.get("build") if isinstance(block, dict) else None
    if not isinstance(compat, dict):
        return None
    floors = []
    api = compat.get("pluginApi")
    if api is not None:
        m = _FLOOR.match(str(api))
        if not m:
            raise CompatError(f"{source}: openclaw.compat.pluginApi {api!r}: use a floor such "
                              "as \">=2026.4.24\"")
        floors.append(m.group(1))
    if compat.get("minGatewayVersion") is not None:
        floors.append(str(compat["minGatewayVersion"]))
    verified = build.get("openclawVersion") if isinstance(build, dict) else None
    for value in floors + ([str(verified)] if verified else []):
        try:
            version_key(value)
        except ValueError as exc:
            raise CompatError(f"{source}: {exc}") from None
    if not floors:
        return None
    return Range(max(floors, key=version_key), str(verified) if verified else None, source)


def release_range(packages: Dict[str, dict]) -> Optional[Range]:
    """The range of a whole release: the highest floor of its plugins (each source: its
    package.json), the lowest verified version. None when no plugin declares one."""
    ranges = [r for r in (declared(pkg, src) for src, pkg in sorted(packages.items())) if r]
    if not ranges:
        return None
    top = max(ranges, key=lambda r: version_key(r.floor))
    verified = [r.verified for r in ranges if r.verified]
    return Range(top.floor, min(verified, key=version_key) if verified else None, top.source)


def artifact_packages(artifact: Union[str, Path]) -> Dict[str, dict]:
    """`fleet/plugins/<pkg>/package.json` name -> its JSON, read from the artifact (a zip)."""
    found: Dict[str, dict] = {}
    with zipfile.ZipFile(str(artifact)) as zf:
        for name in zf.namelist():
            parts = name.split("/")
            if len(parts) == 4 and parts[:2] == ["fleet", "plugins"] and \
                    parts[3] == "package.json":
                try:
                    found[name] = json.loads(zf.read(name).decode("utf-8"))
                except ValueError as exc:
                    raise CompatError(f"{artifact}: {name} is not JSON: {exc}") from None
    return found
