"""Which version strings each ecosystem accepts, and the form a component's version takes.

A version goes into files other tools read: npm, OpenClaw and Node read a plugin's package.json
and openclaw.plugin.json as semver 2.0 (https://semver.org: MAJOR.MINOR.PATCH, a pre-release
after `-`, build metadata after `+`); pip reads pyproject.toml and `__version__` as PEP 440
(https://peps.python.org/pep-0440/). `6` or `5.1.0rc1` is a fine PEP 440 version and one npm
rejects; `5.1.0-rc.1` is semver and not PEP 440's canonical spelling. So each version file
belongs to an ecosystem by its kind (JSON: npm; TOML and Python: Python), every file's version
must be valid in its ecosystem, and a component whose files span both may only use versions
valid in both (X.Y.Z). A component whose files are all npm's is ordered by semver's precedence
(fleet.release.semver), any other by PEP 440's.
"""

from __future__ import annotations

from typing import Iterable, Optional

from packaging.version import InvalidVersion, Version

from fleet.release import semver

NPM = "npm"
PYTHON = "python"
_BY_KIND = {"json": NPM, "toml": PYTHON, "python": PYTHON}

RULES = {NPM: "semver 2.0, as npm reads it (MAJOR.MINOR.PATCH, e.g. 5.1.0 or 5.1.0-rc.1)",
         PYTHON: "PEP 440 in its canonical form (e.g. 5.1.0 or 5.1.0rc1)"}


def of_kind(kind: str) -> str:
    """The ecosystem of a version file kind (fleet.release.version_file.KINDS values)."""
    return _BY_KIND[kind]


def problem(version: str, ecosystem: str) -> Optional[str]:
    """Why `version` is not valid in `ecosystem`, or None when it is."""
    if ecosystem == NPM:
        return None if semver.valid(version) else f"not {RULES[NPM]}"
    try:
        canonical = str(Version(version))
    except InvalidVersion:
        return f"not {RULES[PYTHON]}"
    return None if canonical == version else f"not {RULES[PYTHON]}: write {canonical}"


def spell(version: Version, ecosystems: Iterable[str]) -> str:
    """`version` as the files of these ecosystems must hold it; ValueError when no spelling is
    valid in all of them (a pre-release for a component with both npm and Python files)."""
    wanted = set(ecosystems)
    if NPM not in wanted:
        return str(version)
    if version.pre is None and version.dev is None and version.post is None \
            and len(version.release) <= 3:
        core = ".".join(str(p) for p in (version.release + (0, 0))[:3])
        return core + (f"+{version.local}" if version.local else "")
    if PYTHON in wanted:
        raise ValueError(f"{version} has no spelling both npm (semver) and Python (PEP 440 "
                         "canonical) accept; release a plain MAJOR.MINOR.PATCH")
    if version.pre is None or version.dev is not None or version.post is not None:
        raise ValueError(f"{version} has no semver spelling npm accepts; use MAJOR.MINOR.PATCH "
                         "or a pre-release such as 5.1.0-rc.1")
    core = ".".join(str(p) for p in (version.release + (0, 0))[:3])
    letter, number = version.pre
    return f"{core}-{letter}.{number}"


def component_ecosystem(ecosystems: Iterable[str]) -> str:
    """How a component's versions are ordered: semver when every file is npm's, else PEP 440
    (a component spanning both holds only X.Y.Z, where the two agree)."""
    return NPM if set(ecosystems) == {NPM} else PYTHON


def order_key(version: str, ecosystem: str) -> Optional[tuple]:
    """A sort key for `version` under `ecosystem`'s rules, None when it is not valid there."""
    if ecosystem == NPM:
        try:
            return semver.SemVer.parse(version).key()
        except ValueError:
            return None
    try:
        return (Version(version),)
    except InvalidVersion:
        return None
