"""The next version: a part bump (major, minor, patch, pre) or an explicit, strictly greater one,
spelled for the files that will hold it (fleet.release.ecosystem: a pre-release is 5.2.2-rc.1 in
a package.json, 5.2.2rc1 in a pyproject.toml).

Rules (semver-like on PEP 440 versions, dev/post/local segments dropped):
- major: 5.2.1 -> 6.0.0; a pre-release of a major (6.0.0rc1) -> 6.0.0
- minor: 5.2.1 -> 5.3.0; 5.3.0rc1 -> 5.3.0
- patch: 5.2.1 -> 5.2.2; 5.2.2rc1 -> 5.2.2
- pre:   5.2.1 -> 5.2.2rc1; 5.2.2rc1 -> 5.2.2rc2 (alpha/beta keep their letter)
"""

from __future__ import annotations

from typing import Optional, Sequence

from packaging.version import Version

from fleet.release import ecosystem, semver
from fleet.release.error import ReleaseError
from fleet.release.version_file import VersionFile

PARTS = ("major", "minor", "patch", "pre")


def _release(major: int, minor: int, micro: int) -> str:
    return f"{major}.{minor}.{micro}"


def bump(current: Version, part: str) -> Version:
    """The version after bumping `part` of `current`."""
    if part not in PARTS:
        raise ReleaseError(f"unknown --part {part!r}; use one of {', '.join(PARTS)}")
    major, minor, micro = current.major, current.minor, current.micro
    is_pre = current.pre is not None
    if part == "major":
        if is_pre and minor == 0 and micro == 0:
            return Version(_release(major, 0, 0))
        return Version(_release(major + 1, 0, 0))
    if part == "minor":
        if is_pre and micro == 0:
            return Version(_release(major, minor, 0))
        return Version(_release(major, minor + 1, 0))
    if part == "patch":
        if is_pre:
            return Version(_release(major, minor, micro))
        return Version(_release(major, minor, micro + 1))
    if is_pre:
        letter, number = current.pre
        return Version(f"{_release(major, minor, micro)}{letter}{number + 1}")
    return Version(f"{_release(major, minor, micro + 1)}rc1")


def next_version(current: str, part: Optional[str] = None, explicit: Optional[str] = None,
                 files: Sequence[VersionFile] = ()) -> str:
    """The new version, spelled as every one of `files` must hold it (their ecosystems: npm's
    semver, PEP 440); refuses an invalid, not-greater or unspellable one, naming the file."""
    if part and explicit:
        raise ReleaseError("give either --part or --version, not both")
    ecosystems = {vf.ecosystem for vf in files}
    if ecosystems and ecosystem.component_ecosystem(ecosystems) == ecosystem.NPM:
        return _next_semver(current, part, explicit, files)
    cur = Version(current)
    if explicit is not None:
        try:
            new = Version(explicit)
        except ValueError as exc:
            raise ReleaseError(f"--version {explicit!r} is not a valid PEP 440 or semver "
                               "version; fix: write e.g. 5.1.0") from exc
        # npm files hold it as written (semver has one spelling); Python's, PEP 440's canonical
        spelled = explicit if ecosystem.NPM in ecosystems else str(new)
        for vf in files:
            wrong = ecosystem.problem(spelled, vf.ecosystem)
            if wrong:
                raise ReleaseError(f"refusing --version {explicit}: {vf.path} `{vf.key}` would "
                                   f"hold it, and it is {wrong}; fix: write e.g. 5.1.0")
    else:
        new = bump(cur, part or "patch")
        try:
            spelled = ecosystem.spell(new, ecosystems)
        except ValueError as exc:
            raise ReleaseError(f"refusing --part {part or 'patch'}: {exc}") from None
    if new <= cur:
        raise ReleaseError(f"refusing to release: new version {spelled} is not greater than "
                           f"the current {current}; "
                           "fix: pick a higher --version or bump with --part")
    return spelled


def _next_semver(current: str, part: Optional[str], explicit: Optional[str],
                 files: Sequence[VersionFile]) -> str:
    """`next_version` for a component whose files are all npm's: semver 2.0 throughout."""
    try:
        semver.SemVer.parse(current)
    except ValueError as exc:
        raise ReleaseError(f"the current version {current!r} is not semver 2.0; fix the files "
                           "(`invoke verify` names them)") from exc
    if explicit is not None:
        for vf in files:
            wrong = ecosystem.problem(explicit, vf.ecosystem)
            if wrong:
                raise ReleaseError(f"refusing --version {explicit}: {vf.path} `{vf.key}` would "
                                   f"hold it, and it is {wrong}; fix: write e.g. 5.1.0")
        new = explicit
    else:
        if (part or "patch") not in PARTS:
            raise ReleaseError(f"unknown --part {part!r}; use one of {', '.join(PARTS)}")
        new = semver.bump(current, part or "patch")
    if not semver.greater(new, current):
        raise ReleaseError(f"refusing to release: new version {new} is not greater than the "
                           f"current {current} by semver 2.0 precedence, npm's: "
                           f"{semver.why_not_greater(new, current)}; "
                           "fix: pick a higher --version or bump with --part")
    return new
