"""Publishing the plugins' npm packages (`invoke release --publish`) with npm's own client.

A dry run unless asked for real: `npm publish --dry-run` packs nothing new and sends nothing,
yet checks the tarball and the registry's address as a publish would. The registry is the one
npm is configured for (`npm config get registry`: the user's `.npmrc`, `NPM_CONFIG_REGISTRY`),
or the one named; its credentials are npm's business (`npm login`), never fleet's. A
pre-release goes out under the dist-tag `next` (npm refuses to make one `latest`).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from fleet.release import semver
from fleet.release.error import ReleaseError

PUBLISH_TIMEOUT_S = 300.0
CONFIG_TIMEOUT_S = 60.0
PRERELEASE_TAG = "next"


@dataclass(frozen=True)
class Published:
    """One package handed to npm: what, where, and whether for real."""

    path: Path
    registry: str
    dry_run: bool


def configured_registry(npm: str) -> str:
    """The registry npm publishes to when none is named (`npm config get registry`)."""
    try:
        proc = subprocess.run([npm, "config", "get", "registry"], capture_output=True,
                              text=True, timeout=CONFIG_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReleaseError(f"`npm config get registry` failed ({exc}); name the registry with "
                           "--registry URL") from exc
    url = proc.stdout.strip()
    if proc.returncode != 0 or not url:
        raise ReleaseError(f"`npm config get registry` said nothing usable (exit "
                           f"{proc.returncode}: {proc.stderr.strip()[-300:]}); name the "
                           "registry with --registry URL")
    return url


def publish_argv(path: Path, version: str, registry: str, dry_run: bool) -> list:
    """The `npm publish` arguments for one tarball."""
    args = ["publish", str(path), "--registry", registry]
    if semver.valid(version) and semver.SemVer.parse(version).pre:
        args += ["--tag", PRERELEASE_TAG]
    if dry_run:
        args.append("--dry-run")
    return args


def publish(packages: list, registry: Optional[str] = None, dry_run: bool = True,
            echo: Callable[[str], None] = print, npm: str = "npm") -> list:
    """`npm publish` each built package ({path, version} of npmpackage.NpmPackage); stops at
    the first failure with npm's words and the command that finishes the job."""
    npm_path = shutil.which(npm)
    if npm_path is None:
        raise ReleaseError(f"`{npm}` is not on PATH: publishing uses npm's own client; install "
                           "Node.js's npm (Debian: `apt-get install npm`)")
    if not packages:
        echo("no plugin in this release: no npm package to publish")
        return []
    target = registry or configured_registry(npm_path)
    done = []
    for n, pkg in enumerate(packages):
        args = publish_argv(pkg.path, pkg.version, target, dry_run)
        echo(f"npm {' '.join(args)}")
        try:
            proc = subprocess.run([npm_path, *args], capture_output=True, text=True,
                                  timeout=PUBLISH_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ReleaseError(f"`npm publish {pkg.path.name}` did not finish within "
                               f"{PUBLISH_TIMEOUT_S:.0f}s ({target} unreachable?); published "
                               f"so far: {_names(done)}") from None
        if proc.returncode != 0:
            said = (proc.stderr.strip() or proc.stdout.strip())[-1500:]
            raise ReleaseError(f"`npm publish {pkg.path.name}` to {target} failed (exit "
                               f"{proc.returncode}):\n{said}\npublished so far: {_names(done)}; "
                               f"fix the cause (`npm login --registry {target}`?), then "
                               f"finish with: " + "; ".join(
                                   "npm " + " ".join(publish_argv(p.path, p.version, target,
                                                                  dry_run))
                                   for p in packages[n:]))
        done.append(Published(pkg.path, target, dry_run))
    echo("dry run: nothing was published; publish for real with --publish --yes"
          if dry_run else f"published {_names(done)} to {target}")
    return done


def _names(done: list) -> str:
    return ", ".join(p.path.name for p in done) or "none"
