"""The host side: which files of a checkout the artifact ships to every host.

One owner of that list, because three things must agree on it: the artifact (what it packs),
the boundary test (what must stay standard library only, Python 3.9) and the OpenClaw proof
(which sources a compatibility run proved, `compatproof.py`).
"""

from __future__ import annotations

import os
from pathlib import Path

from fleet.release.error import ReleaseError

HOST_FILES = ("fleet/__init__.py",)
HOST_PACKAGES = ("fleet/continuity", "fleet/plugins", "fleet/gateway", "fleet/installer")
DATA_SUFFIXES = (".py", ".json", ".md", ".conf", ".sh", ".service", ".plist", ".txt", ".js", ".mjs")
SKIP_DIRS = ("__pycache__", "tests", "test")


def host_files(root: Path) -> list:
    """Relative POSIX paths of the host-side files that go into the artifact, sorted; a missing
    host file or package is an error (an artifact without it would not run)."""
    root = Path(root)
    for rel in HOST_FILES:
        if not (root / rel).is_file():
            raise ReleaseError(f"{rel}: missing; the artifact needs it")
    for pkg in HOST_PACKAGES:
        if not (root / pkg).is_dir():
            raise ReleaseError(f"{pkg}/: missing; the artifact ships the host packages "
                               f"{', '.join(HOST_PACKAGES)}")
    return sorted([*HOST_FILES, *package_files(root, HOST_PACKAGES)])


def packed_files(root: Path) -> list:
    """The host-side files of `root` an artifact built from it packs, sorted, without refusing
    a missing one (`host_files` does, when the artifact is built)."""
    root = Path(root)
    return sorted([*(rel for rel in HOST_FILES if (root / rel).is_file()),
                   *package_files(root, HOST_PACKAGES)])


def package_files(root: Path, packages: tuple) -> list:
    """Relative POSIX paths of the files under `packages` (paths relative to `root`) that the
    artifact ships, sorted; a package that is not there has none."""
    root = Path(root)
    found = []
    for pkg in packages:
        for dirpath, dirnames, filenames in os.walk(root / pkg):
            dirnames[:] = sorted(d for d in dirnames
                                 if d not in SKIP_DIRS and not d.startswith("."))
            found += [(Path(dirpath) / name).relative_to(root).as_posix()
                      for name in filenames if _wanted(name)]
    return sorted(found)


def _wanted(name: str) -> bool:
    if name.startswith(".") or not name.endswith(DATA_SUFFIXES):
        return False
    return not (name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py")
