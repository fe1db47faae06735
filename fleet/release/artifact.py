"""The deployable artifact: a reproducible zipapp of the host side, `dist/fleet-<version>.pyz`.

Same sources -> same bytes -> same SHA-256, so "is this build already on the host?" is one hash
compare. Reproducible because entries are sorted, every timestamp is fixed (1980-01-01, or
SOURCE_DATE_EPOCH), permissions are fixed (0644), compression is deflate level 9, and the embedded
manifest is canonical JSON. (Deflate output is stable for one zlib version; builds on machines with
different zlib versions may differ in bytes but not in content.)

Every `.py` in the zip has a legacy-location `.pyc` beside it (`fleet/x.py` -> `fleet/x.pyc`),
compiled by the build interpreter as a PEP 552 checked-hash pyc: zipimport uses it instead of
compiling, the installer moves it to `__pycache__` for the unpacked release, Python verifies the
source hash at every import (a stale pyc is never used) and another Python version ignores it
(magic number). The `.pyc` entries are listed in the manifest like every file, so a build by
another interpreter (other bytes) is never taken for the current one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import fleet
from fleet.continuity.atomicfile import atomic_write
from fleet.continuity.statelayout import StateLayout
from fleet.release.component import find_root, has_config, installed_project, load_project
from fleet.release.error import ReleaseError
from fleet.release.git import Git, GitError
from fleet.release.hostside import HOST_FILES, HOST_PACKAGES, host_files
from fleet.release.verify import verify

MANIFEST_NAME = StateLayout.MANIFEST
SHEBANG = b"#!/usr/bin/env python3\n"
MAIN_PY = ('"""fleet artifact entry point: the host installer (stdlib only)."""\n'
           "from fleet.installer.cli import main\n\nraise SystemExit(main())\n")
EPOCH_1980 = 315532800  # 1980-01-01T00:00:00Z, the earliest time a zip entry can hold
# Run by the build interpreter with PYTHONHASHSEED=0 (marshal writes frozensets in hash order);
# argv: a dir of sources, then their relative paths; writes `<rel>c` next to each, with the
# relative path as co_filename (no build-machine path in the bytes).
COMPILE_PY = """\
import os, py_compile, sys
base = sys.argv[1]
for rel in sys.argv[2:]:
    src = os.path.join(base, rel)
    py_compile.compile(src, cfile=src + "c", dfile=rel, doraise=True, optimize=0,
                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
"""


@dataclass(frozen=True)
class Artifact:
    """A built artifact: where it is, its SHA-256, the main version and every component's."""

    path: Path
    sha256: str
    version: str
    components: dict = field(default_factory=dict)


def artifact_name(version: str) -> str:
    return f"fleet-{version}.pyz"


def _contents(root: Path, bytecode: bool = True) -> tuple:
    """(manifest, entries): every file of the zip but the manifest, name -> bytes (without the
    `.pyc` files and their manifest lines when `bytecode` is False)."""
    checkout = has_config(root)
    project = load_project(root) if checkout else installed_project(root)
    report = verify(project)
    report.raise_for_problems("refusing to build the artifact")
    entries = {"__main__.py": MAIN_PY.encode("utf-8")}
    sources = {rel: (root / rel).read_bytes() for rel in host_files(root)}
    entries.update(sources)
    version = report.versions[project.main]
    dirty = dirty_tag(root, sources) if checkout else None
    if dirty:
        version = f"{version}+{dirty}"
    if bytecode:
        entries.update(_bytecode({rel: data for rel, data in entries.items()
                                  if rel.endswith(".py")}))
    files = {rel: _sha256(data) for rel, data in entries.items()}
    manifest = {"version": version,
                "components": dict(sorted(report.versions.items())),
                "files": dict(sorted(files.items()))}
    return manifest, entries


def is_dirty(version: str) -> bool:
    """True for the version of a build from uncommitted sources (`5.0.1+dirty.<hash>`)."""
    return "+dirty." in version


def dirty_tag(root: Path, sources: dict) -> Optional[str]:
    """`dirty.<hash8>` when a shipped file differs from (or is missing in) the checkout's HEAD
    commit, else None (also outside a git checkout). The hash is over the shipped contents, so
    the same uncommitted sources always get the same PEP 440 local version."""
    git = Git(root)
    try:
        listing = git.run("ls-tree", "-r", "--full-tree", "HEAD", "--", *HOST_FILES,
                          *HOST_PACKAGES, check=True)
        prefix = git.run("rev-parse", "--show-prefix")
    except GitError:
        return None
    committed = {}
    for line in listing.splitlines():
        meta, _, path = line.partition("\t")
        if path.startswith(prefix):
            committed[path[len(prefix):]] = meta.split()[-1]
    if all(committed.get(rel) == _blob_id(_as_committed(root / rel, data))
           for rel, data in sources.items()):
        return None
    digest = hashlib.sha256("".join(f"{rel}\0{_sha256(data)}\n"
                                    for rel, data in sorted(sources.items())).encode())
    return f"dirty.{digest.hexdigest()[:8]}"


def _as_committed(path: Path, data: bytes) -> bytes:
    """What git stores for a shipped file: its bytes, or for a link (each plugin's bridge.mjs)
    the link's target; the artifact holds the target's bytes, which git checks as their own
    file."""
    return os.readlink(path).encode() if path.is_symlink() else data


def _blob_id(data: bytes) -> str:
    """git's object id of a file's bytes (sha1 of `blob <size>\\0<data>`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324


def _bytecode(sources: dict) -> dict:
    """`x.py` -> bytes for `x.pyc` (checked-hash, build interpreter), compiled in one subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONHASHSEED"] = "0"
    with tempfile.TemporaryDirectory(prefix="fleet-pyc-") as tmp:
        base = Path(tmp, "src")  # not the cwd: `-c` puts the cwd on sys.path
        for rel, data in sources.items():
            path = base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        proc = subprocess.run([sys.executable, "-S", "-c", COMPILE_PY, str(base), *sorted(sources)],
                              env=env, cwd=tmp, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise ReleaseError(f"cannot compile the host sources with {sys.executable}:\n"
                               f"{proc.stderr.strip()}")
        return {rel + "c": (base / (rel + "c")).read_bytes() for rel in sources}


def build_artifact(root: Path, out_dir: Path) -> Artifact:
    """Build `<out_dir>/fleet-<main version>.pyz` and its `.sha256`; same tree -> same bytes."""
    root = Path(root)
    manifest, entries = _contents(root)
    entries[MANIFEST_NAME] = _manifest_bytes(manifest)
    date_time = _zip_time()
    buf = io.BytesIO()
    buf.write(SHEBANG)
    with zipfile.ZipFile(buf, "w") as zf:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=date_time)
            info.create_system = 3  # Unix, so external_attr means mode bits everywhere
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, entries[name], compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    data = buf.getvalue()
    digest = _sha256(data)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / artifact_name(manifest["version"])
    atomic_write(path, data, 0o755)
    atomic_write(path.with_name(path.name + ".sha256"), f"{digest}\n".encode(), 0o644)
    return Artifact(path, digest, manifest["version"], manifest["components"])


def current_artifact(root: Path, out_dir: Path) -> Optional[Artifact]:
    """The existing build in `out_dir` if it is intact and was built from the same sources.

    Its bytecode is checked without compiling (every `invoke deploy` asks): each `.py` has its
    `.pyc`, made by this interpreter (magic number) as a checked-hash pyc of exactly that source.
    """
    manifest, entries = _contents(Path(root), bytecode=False)
    path = Path(out_dir) / artifact_name(manifest["version"])
    try:
        data = path.read_bytes()
        recorded = path.with_name(path.name + ".sha256").read_text(encoding="ascii").split()[0]
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            embedded = json.loads(zf.read(MANIFEST_NAME).decode("utf-8"))
            pycs = {name: zf.read(name)[:16] for name in zf.namelist() if name.endswith(".pyc")}
    except (OSError, IndexError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    digest = _sha256(data)
    files = embedded.get("files") if isinstance(embedded, dict) else None
    if recorded != digest or not isinstance(files, dict):
        return None
    sources = {k: v for k, v in files.items() if not k.endswith(".pyc")}
    if dict(embedded, files=sources) != manifest or not _pycs_match(pycs, files, entries):
        return None
    return Artifact(path, digest, manifest["version"], manifest["components"])


def _pycs_match(headers: dict, files: dict, entries: dict) -> bool:
    """Every source has a listed `.pyc` whose header names this interpreter and that source."""
    sources = [rel for rel in entries if rel.endswith(".py")]
    if set(headers) != {rel + "c" for rel in sources} or not set(headers) <= set(files):
        return False
    for rel in sources:
        head = headers[rel + "c"]
        if (head[:4] != importlib.util.MAGIC_NUMBER or int.from_bytes(head[4:8], "little") != 3
                or head[8:16] != importlib.util.source_hash(entries[rel])):
            return False
    return True


def package_root() -> Path:
    """The directory holding the imported `fleet` package: a checkout, or site-packages."""
    return Path(fleet.__file__).resolve().parent.parent


def cache_dir() -> Path:
    """Where builds from an installed package go: the user's cache, never site-packages."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fleet" / "dist"


def default_source(cwd: Optional[Path] = None) -> tuple:
    """(root, out_dir) of a build when none is named: the checkout at or above `cwd` into its
    `dist/`; else the imported package (its checkout's `dist/`, or, installed with
    `pip install .`, the user's cache)."""
    try:
        root = find_root(Path.cwd() if cwd is None else cwd)
    except ReleaseError:
        root = package_root()
    if has_config(root) and os.access(root, os.W_OK):
        return root, root / "dist"
    return root, cache_dir()


def ensure_artifact(root: Path, out_dir: Path) -> tuple:
    """(artifact, reused): reuse a current build, otherwise build one."""
    existing = current_artifact(root, out_dir)
    if existing is not None:
        return existing, True
    return build_artifact(root, out_dir), False


def _manifest_bytes(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _zip_time() -> tuple:
    """1980-01-01 00:00:00, or SOURCE_DATE_EPOCH (clamped to 1980, even seconds) when set."""
    raw = os.environ.get("SOURCE_DATE_EPOCH")
    if not raw:
        return (1980, 1, 1, 0, 0, 0)
    try:
        epoch = int(raw)
    except ValueError as exc:
        raise ReleaseError(f"SOURCE_DATE_EPOCH={raw!r} is not an integer number of seconds; "
                           "unset it or fix it") from exc
    t = time.gmtime(max(epoch, EPOCH_1980))
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec - t.tm_sec % 2)
