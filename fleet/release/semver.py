"""Semantic Versioning 2.0 (https://semver.org), as npm reads the versions of a package.json.

PEP 440 accepts many semver strings but orders and validates them its own way: it reads
`5.1.0-dev.1` as a development release (below `5.1.0-alpha.1`, where semver puts it above), takes
`+build.1` as a local version that sorts above the plain one (semver ignores build metadata in
precedence), and rejects `5.3.0-rc.1.2`, which is valid semver. A component whose versions live
in npm files is therefore compared and validated here, and its versions are printed as its files
hold them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Tuple, Union

# semver.org's own regular expression (numeric identifiers without leading zeros)
PATTERN = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")


@dataclass(frozen=True)
class SemVer:
    major: int
    minor: int
    patch: int
    pre: Tuple[str, ...] = ()
    build: Tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> SemVer:
        """ValueError when `text` is not semver 2.0."""
        match = PATTERN.match(text)
        if not match:
            raise ValueError(f"{text!r} is not a semver 2.0 version")
        pre = tuple(match.group(4).split(".")) if match.group(4) else ()
        build = tuple(match.group(5).split(".")) if match.group(5) else ()
        return cls(int(match.group(1)), int(match.group(2)), int(match.group(3)), pre, build)

    def key(self) -> tuple:
        """Precedence (semver 2.0 §11): build metadata ignored, a pre-release below its release,
        numeric identifiers below alphanumeric ones and compared as numbers, a shorter set of
        identifiers below a longer one that starts with it."""
        ids: Tuple[Tuple[int, Union[int, str]], ...] = tuple(
            (0, int(i)) if i.isdigit() else (1, i) for i in self.pre)
        return (self.major, self.minor, self.patch, (0, ids) if self.pre else (1, ()))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


def valid(text: str) -> bool:
    return bool(PATTERN.match(text))


def greater(new: str, current: str) -> bool:
    """True when `new` has higher precedence than `current` (both semver)."""
    return SemVer.parse(new).key() > SemVer.parse(current).key()


def why_not_greater(new: str, current: str) -> str:
    """Which precedence rule puts `new` at or below `current` (both semver), in one clause:
    the rule that decides for these two, not a summary of all of them."""
    a, b = SemVer.parse(new), SemVer.parse(current)
    if a.key() == b.key():
        if a.build or b.build:
            return ("build metadata (after `+`) is ignored in precedence, so the two are "
                    "equal; a new release needs a higher version, not new metadata")
        return "it is the same version"
    if (a.major, a.minor, a.patch) < (b.major, b.minor, b.patch):
        return f"{_core(a)} is below {_core(b)}"
    if a.pre and not b.pre:
        return f"a pre-release sorts below its release ({_core(a)}-{'.'.join(a.pre)} < " \
               f"{_core(b)})"
    for mine, theirs in zip(a.pre, b.pre):
        if mine == theirs:
            continue
        if mine.isdigit() and theirs.isdigit():
            return f"pre-release numbers compare as numbers ({mine} < {theirs})"
        if mine.isdigit():
            return f"a number sorts below a word in a pre-release ({mine} < {theirs})"
        return (f"pre-release words compare in ASCII order, not by meaning "
                f"({mine!r} < {theirs!r})")
    if len(a.pre) < len(b.pre):
        return (f"a pre-release with fewer identifiers sorts below a longer one that starts "
                f"with them ({'.'.join(a.pre)} < {'.'.join(b.pre)})")
    return "semver 2.0 precedence puts it higher"


def _core(ver: SemVer) -> str:
    return f"{ver.major}.{ver.minor}.{ver.patch}"


def bump(current: str, part: str) -> str:
    """`current` after bumping `part`, by the rules of fleet.release.bump, in semver's form."""
    ver = SemVer.parse(current)
    major, minor, patch = ver.major, ver.minor, ver.patch
    if part == "major":
        return f"{major}.0.0" if ver.pre and minor == 0 and patch == 0 else f"{major + 1}.0.0"
    if part == "minor":
        return f"{major}.{minor}.0" if ver.pre and patch == 0 else f"{major}.{minor + 1}.0"
    if part == "patch":
        return f"{major}.{minor}.{patch}" if ver.pre else f"{major}.{minor}.{patch + 1}"
    if not ver.pre:
        return f"{major}.{minor}.{patch + 1}-rc.1"
    pre = list(ver.pre)
    if pre[-1].isdigit():
        pre[-1] = str(int(pre[-1]) + 1)
    else:
        pre.append("1")
    return f"{major}.{minor}.{patch}-{'.'.join(pre)}"
