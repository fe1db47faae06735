"""Which OpenClaw releases a fleet release supports and was proven on: the one owner of that
answer, read the same way by the installer, the plugins' worker and `/mc doctor` on a host and by
the deploy on the control side.

Two things ship in every release:

- the declared range, in each plugin's `package.json` with OpenClaw's own fields
  (https://docs.openclaw.ai/plugins/manifest/package-json): `openclaw.compat.pluginApi` (a
  floor, `>=2026.4.24`), `openclaw.compat.minGatewayVersion` (the same floor) and
  `openclaw.build.openclawVersion` (the top of the range: the newest release it was built for);
- the proof, `fleet/plugins/openclaw-proven.json` (`StateLayout.RELEASE_PROOF`), written by the
  compat matrix that runs every OpenClaw release of the range for real: `proven` (the releases
  whose every check passed), `excluded` (release -> why: taken out of the range by name), and
  what was proven when (`sources`, `commit`, `date`: kept as data, not interpreted here).

`Support.classify(version)` places one OpenClaw release: `proven`; `unproven` (in the range but
not proven: a pre-release, a release the matrix has not run, or a release without a proof file);
`outside` (older than the floor, excluded by name, or newer than the top). The range has no upper
bound OpenClaw enforces (docs/openclaw.md, "Supported OpenClaw versions"): after an `openclaw
update` the plugins keep loading, and fleet says wherever it looks that the pair is unproven.

OpenClaw's versions are calendar versions with semver syntax (`2026.9.6`, `2026.5.3-1`,
`2026.9.1-beta.1`), ordered as semver orders them: numbers first, a pre-release below its
release. Standard library only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple, Union

from fleet.continuity.statelayout import StateLayout

PROVEN, UNPROVEN, OUTSIDE = "proven", "unproven", "outside"
# how a table says each state in plain words
WORDS = {PROVEN: "proven", UNPROVEN: "declared but unproven", OUTSIDE: "outside the range"}
PROOF_KEYS = ("proven", "excluded", "sources", "commit", "date")
STAMP_KEYS = PROOF_KEYS[2:]  # what was proven when: the compat matrix's, read by releases
MAX_FILE_BYTES = 64 * 1024  # a proof file or a package.json; anything larger is not one
LISTED = 6  # proven releases named one by one in a message; more are shown as a span

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
_FLOOR = re.compile(r"^\s*>=\s*(\S+)\s*$")


class CompatError(ValueError):
    """A release's declared range or its proof cannot be read; the message names the file and
    the key."""


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


class Range(NamedTuple):
    """The OpenClaw versions a release declares: `floor` and up to `top` (None: not declared).
    `source` says which file declared the floor."""

    floor: str
    top: Optional[str]
    source: str

    def describe(self) -> str:
        upto = f" up to {self.top}" if self.top else ""
        return f">={self.floor}{upto}"


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
    top = build.get("openclawVersion") if isinstance(build, dict) else None
    for value in floors + ([str(top)] if top else []):
        try:
            version_key(value)
        except ValueError as exc:
            raise CompatError(f"{source}: {exc}") from None
    if not floors:
        return None
    return Range(max(floors, key=version_key), str(top) if top else None, source)


def release_range(packages: Dict[str, dict]) -> Optional[Range]:
    """The range of a whole release: the highest floor of its plugins (each source: its
    package.json), the lowest top. None when no plugin declares one."""
    ranges = [r for r in (declared(pkg, src) for src, pkg in sorted(packages.items())) if r]
    if not ranges:
        return None
    high = max(ranges, key=lambda r: version_key(r.floor))
    tops = [r.top for r in ranges if r.top]
    return Range(high.floor, min(tops, key=version_key) if tops else None, high.source)


class Proof(NamedTuple):
    """The OpenClaw releases a release was proven on (`fleet/plugins/openclaw-proven.json`);
    `data` is the whole file as read (its other keys belong to the compat matrix)."""

    proven: Tuple[str, ...]
    excluded: Dict[str, str]
    data: Dict[str, Any]

    @property
    def sources(self) -> str:
        """The fingerprint of the plugin sources the whole range was proven for ("" none)."""
        return str(self.data.get("sources") or "")

    @property
    def commit(self) -> str:
        return str(self.data.get("commit") or "")

    @property
    def date(self) -> str:
        return str(self.data.get("date") or "")

    def describe(self) -> str:
        """`proven on 2026.4.24, 2026.9.6`, or a span when there are many."""
        ordered = sorted(self.proven, key=version_key)
        if not ordered:
            return "proven on no OpenClaw release"
        if len(ordered) <= LISTED:
            return "proven on " + ", ".join(ordered)
        return f"proven on {len(ordered)} releases from {ordered[0]} to {ordered[-1]}"

    def names(self, version: str) -> bool:
        return any(version_key(v) == version_key(version) for v in self.proven)

    def exclusion(self, version: str) -> Optional[str]:
        for name, why in self.excluded.items():
            if version_key(name) == version_key(version):
                return why
        return None


def parse_proof(raw: bytes, source: str) -> Proof:
    """A proof file's bytes as a `Proof`; CompatError naming `source` and the key otherwise."""
    fix = "; it is written by the OpenClaw compat matrix: restore it from git or run the matrix"
    if len(raw) > MAX_FILE_BYTES:
        raise CompatError(f"{source}: larger than {MAX_FILE_BYTES} bytes, not a proof file{fix}")
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise CompatError(f"{source}: not JSON ({exc}){fix}") from None
    if not isinstance(data, dict):
        raise CompatError(f"{source}: must be a JSON object with the key 'proven'{fix}")
    proven = data.get("proven")
    if not isinstance(proven, list) or not all(isinstance(v, str) for v in proven):
        raise CompatError(f"{source}: key 'proven' must be a list of OpenClaw versions such as "
                          f"\"2026.9.6\", got {proven!r:.80}{fix}")
    excluded = data.get("excluded", {})
    if not isinstance(excluded, dict) or not all(isinstance(v, str) for v in excluded.values()):
        raise CompatError(f"{source}: key 'excluded' must map an OpenClaw version to the reason "
                          f"it is excluded, got {excluded!r:.80}{fix}")
    for key in STAMP_KEYS:
        if not isinstance(data.get(key, ""), str):
            raise CompatError(f"{source}: key '{key}' must be a string{fix}")
    for key, versions in (("proven", proven), ("excluded", list(excluded))):
        for value in versions:
            try:
                version_key(value)
            except ValueError as exc:
                raise CompatError(f"{source}: key '{key}': {exc}{fix}") from None
    return Proof(tuple(proven), dict(excluded), data)


class Verdict(NamedTuple):
    """Where one OpenClaw release stands against a fleet release: `state` (proven, unproven,
    outside) and a `message` a person can act on. `too_old`: outside because older than the
    floor, which no flag makes deployable."""

    state: str
    version: str
    message: str
    too_old: bool = False

    @property
    def words(self) -> str:
        return WORDS[self.state]

    def accepted(self, allow_unproven: bool) -> bool:
        """Whether a deploy may go on: proven; or, with --allow-unproven-openclaw, anything but
        an OpenClaw older than the floor."""
        return self.state == PROVEN or (allow_unproven and not self.too_old)

    def as_dict(self) -> Dict[str, str]:
        return {"state": self.state, "version": self.version, "message": self.message}


class Support(NamedTuple):
    """A release's declared range and its proof (None: the release carries no proof file)."""

    range: Optional[Range]
    proof: Optional[Proof]

    @classmethod
    def of_release(cls, root: Union[str, Path]) -> Support:
        """From an unpacked release (or a source tree): the dir that holds `fleet/`."""
        base = Path(root)
        plugins = base / StateLayout.RELEASE_PLUGINS

        def read(rel: str) -> Optional[bytes]:
            try:
                with open(str(base / rel), "rb") as fh:
                    return fh.read(MAX_FILE_BYTES + 1)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise CompatError(f"{base / rel}: cannot read: {exc}") from None

        try:
            names = sorted(f"{StateLayout.RELEASE_PLUGINS}/{d.name}/package.json"
                           for d in plugins.iterdir() if (d / "package.json").is_file())
        except OSError as exc:
            raise CompatError(f"{plugins}: cannot list the plugins: {exc}") from None
        return cls._read(str(base), names, read)

    @classmethod
    def of_artifact(cls, path: Union[str, Path]) -> Support:
        """From an artifact (a zip) before it is unpacked."""
        import zipfile  # the installer's and the deploy's: not for a gateway's `/mc doctor`

        try:
            with zipfile.ZipFile(str(path)) as zf:
                sizes = {info.filename: info.file_size for info in zf.infolist()}

                def read(rel: str) -> Optional[bytes]:
                    if rel not in sizes:
                        return None
                    if sizes[rel] > MAX_FILE_BYTES:
                        return b" " * (MAX_FILE_BYTES + 1)  # refused by size, never inflated
                    return zf.read(rel)

                names = sorted(n for n in sizes if _is_package_json(n))
                return cls._read(str(path), names, read)
        except (OSError, zipfile.BadZipFile) as exc:
            raise CompatError(f"{path}: cannot read the artifact: {exc}") from None

    @classmethod
    def _read(cls, where: str, packages: Any,
              read: Callable[[str], Optional[bytes]]) -> Support:
        found: Dict[str, dict] = {}
        for name in packages:
            raw = read(name) or b""
            if len(raw) > MAX_FILE_BYTES:
                raise CompatError(f"{where}: {name} is larger than {MAX_FILE_BYTES} bytes")
            try:
                found[name] = json.loads(raw.decode("utf-8"))
            except ValueError as exc:
                raise CompatError(f"{where}: {name} is not JSON: {exc}") from None
        raw_proof = read(StateLayout.RELEASE_PROOF)
        proof = (None if raw_proof is None else
                 parse_proof(raw_proof, f"{where}: {StateLayout.RELEASE_PROOF}"))
        return cls(release_range(found), proof)

    def describe(self) -> str:
        """What this release declares and was proven on, in a few words."""
        declared_part = (f"declared {self.range.describe()}" if self.range
                         else "declares no OpenClaw range")
        proven_part = self.proof.describe() if self.proof else "no proof file"
        return f"{declared_part}; {proven_part}"

    def classify(self, version: str) -> Verdict:
        """Where OpenClaw `version` stands against this release (see the module doc)."""
        rng, proof = self.range, self.proof
        try:
            key = version_key(version)
        except ValueError:
            return Verdict(OUTSIDE, version, f"cannot tell whether OpenClaw {version!r} is "
                                             "supported: it is not a version like 2026.9.6 "
                                             f"(this release: {self.describe()})")
        if rng is None:
            return Verdict(UNPROVEN, version, f"OpenClaw {version}: this release declares no "
                                              "OpenClaw versions it supports (openclaw.compat "
                                              "in its plugins' package.json)")
        proven = proof.describe() if proof else "no proof file"
        if key < version_key(rng.floor):
            return Verdict(OUTSIDE, version, f"OpenClaw {version} is older than this release "
                                             f"supports ({rng.describe()}, declared in "
                                             f"{rng.source}); upgrade OpenClaw (npm install -g "
                                             "openclaw@latest), or deploy a release built for it",
                           too_old=True)
        why = proof.exclusion(version) if proof else None
        if why is not None:
            return Verdict(OUTSIDE, version, f"OpenClaw {version} is excluded from this "
                                             f"release's range: {why} ({proven})")
        if rng.top and key > version_key(rng.top):
            return Verdict(OUTSIDE, version, f"OpenClaw {version} is newer than every release "
                                             f"this one was proven on ({proven}; declared "
                                             f"{rng.describe()})")
        if proof is None:
            return Verdict(UNPROVEN, version, f"OpenClaw {version} is in the declared range "
                                              f"({rng.describe()}), but this release carries no "
                                              f"{StateLayout.RELEASE_PROOF}: no OpenClaw "
                                              "release counts as proven for it")
        if proof.names(version):
            return Verdict(PROVEN, version, f"OpenClaw {version} is proven for this release "
                                            f"({proven})")
        return Verdict(UNPROVEN, version, f"OpenClaw {version} is in the declared range "
                                          f"({rng.describe()}) but was not proven with this "
                                          f"release ({proven}): a pre-release, or a release "
                                          "the compat matrix has not run")


def _is_package_json(name: str) -> bool:
    """`fleet/plugins/<pkg>/package.json` of an artifact."""
    parts = name.split("/")
    return len(parts) == 4 and "/".join(parts[:2]) == StateLayout.RELEASE_PLUGINS and \
        parts[3] == "package.json"
