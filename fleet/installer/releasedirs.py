"""Release dirs on a host: unpack an artifact once, switch `current` atomically, keep the
newest N (cutting a release is fleet.release, on the control machine).

Layout (docs/architecture.md): `<state>/fleet/releases/<version>-<sha12>/` holds an unpacked
artifact plus `fleet_release.json` (sha256, version, components, plugin dirs, install time);
`<state>/fleet/current` and `previous` are relative symlinks to release dirs; each
`<state>/extensions/<id>` links through `current`, so one `os.replace` of `current` switches every
plugin at once: a host is always wholly on one release, never a mix.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from fleet.continuity import regularfile
from fleet.continuity.atomicfile import atomic_symlink, fsync_dir
from fleet.continuity.statelayout import StateLayout
from fleet.gateway.manifest import is_plugin_id, is_version_name
from fleet.installer.protocol import sha_mismatch

META = StateLayout.RELEASE_META
MANIFEST = StateLayout.MANIFEST
# Unpacking limits (a zip bomb is refused before a byte is written). A release is ~2 MB and
# ~300 files; these leave two orders of magnitude of room.
MAX_MEMBERS = 10_000
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024
_PLUGIN_MANIFEST = "openclaw.plugin.json"


class UnusableRelease(RuntimeError):
    """An artifact or release that cannot be used (bad hash, bad archive, missing release)."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with os.fdopen(regularfile.open_regular(path), "rb") as fh:  # a FIFO is refused, not waited on
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_artifact(path: Path, expected: str) -> None:
    """Refuse an artifact whose SHA-256 differs from the one the control side built."""
    if not path.is_file():
        raise UnusableRelease(f"artifact {path} does not exist")
    actual = sha256_file(path)
    if actual != expected.lower():
        note = "corrupt or partial upload; deploy again to re-upload"
        stored = Path(StateLayout.ARTIFACT.format(sha256=expected.lower())).parts
        if path.parts[-len(stored):] == stored:
            try:  # never leave a bad file under the good name: the next deploy re-uploads
                path.unlink()
                note = "corrupt or partial upload, removed; the next deploy uploads it again"
            except OSError:
                pass
        raise UnusableRelease(sha_mismatch(path, actual, expected, note))


def read_artifact_manifest(path: Path) -> dict:
    try:
        with zipfile.ZipFile(str(path)) as zf:
            manifest = json.loads(zf.read(MANIFEST).decode("utf-8"))
    except (OSError, KeyError, zipfile.BadZipFile, ValueError) as exc:
        raise UnusableRelease(f"artifact {path} has no readable {MANIFEST}: {exc}") from exc
    if not isinstance(manifest, dict) or not manifest.get("version"):
        raise UnusableRelease(f"artifact {path}: {MANIFEST} lacks a 'version'")
    if not is_version_name(manifest["version"]):
        raise UnusableRelease(
            f"artifact {path}: {MANIFEST} version {manifest['version']!r} is not a safe release "
            "name (letters, digits, '.', '_', '+', '-'; no '..' or '/'); refusing the artifact")
    return manifest


def _unsafe(name: str) -> bool:
    parts = Path(name).parts
    return name.startswith(("/", "\\")) or ".." in parts or "\\" in name or "\0" in name


def check_members(zf: zipfile.ZipFile, artifact: Path, manifest: dict) -> None:
    """Refuse the artifact before anything is written: unsafe member or manifest paths, plugin
    ids that are not the gateway's id rule (they name `extensions/<id>`), or sizes of a bomb."""
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise UnusableRelease(f"artifact {artifact} has {len(infos)} members "
                              f"(limit {MAX_MEMBERS}); refusing it")
    total = 0
    for info in infos:
        if _unsafe(info.filename):
            raise UnusableRelease(f"artifact {artifact} has unsafe member {info.filename!r}")
        if info.file_size > MAX_MEMBER_BYTES:
            raise UnusableRelease(
                f"artifact {artifact}: member {info.filename!r} unpacks to {info.file_size} bytes "
                f"(limit {MAX_MEMBER_BYTES}); refusing it")
        total += info.file_size
        if total > MAX_TOTAL_BYTES:
            raise UnusableRelease(f"artifact {artifact} unpacks to more than "
                                  f"{MAX_TOTAL_BYTES} bytes; refusing it")
        parts = Path(info.filename).parts
        if len(parts) == 4 and parts[:2] == ("fleet", "plugins") and parts[3] == _PLUGIN_MANIFEST:
            try:
                plugin_id = json.loads(zf.read(info).decode("utf-8")).get("id")
            except (ValueError, AttributeError, RecursionError) as exc:
                raise UnusableRelease(f"artifact {artifact}: {info.filename} is unreadable: "
                                      f"{exc}") from exc
            if not is_plugin_id(plugin_id):
                raise UnusableRelease(
                    f"artifact {artifact}: {info.filename} has plugin id {plugin_id!r}, which is "
                    "not a valid plugin id (a-z, 0-9, '.', '_', '-'); refusing the artifact")
    for rel in (manifest.get("files") or {}):
        if not isinstance(rel, str) or _unsafe(rel):
            raise UnusableRelease(f"artifact {artifact}: {MANIFEST} lists unsafe path {rel!r}")


def _plugin_dirs(root: Path) -> Dict[str, str]:
    """Plugin id -> package dir name, from each `fleet/plugins/<pkg>/openclaw.plugin.json`."""
    found = {}
    base = root / StateLayout.RELEASE_PLUGINS
    if base.is_dir():
        for manifest in sorted(base.glob("*/openclaw.plugin.json")):
            try:
                plugin_id = json.loads(regularfile.read_text(manifest))["id"]
            except (OSError, ValueError, KeyError, TypeError, RecursionError):
                continue
            if not is_plugin_id(plugin_id):  # checked before unpacking; never a path here
                continue
            found[str(plugin_id)] = manifest.parent.name
    return found


def unpack(state_dir: Path, artifact: Path, sha256: str, manifest: dict,
           reuse: bool = True) -> Path:
    """Unpack into a temp dir, check every file against the manifest, then rename into place.

    Every file is checked by the SHA-256 of the bytes written for it, hashed as they are
    written (each member is read once). A file the active release already has with the same
    manifest hash is hard-linked from it instead of written again (creating a file is most of
    an unpack's CPU; a link is a twentieth of it), after the linked inode's bytes were hashed
    and matched: the new release is still whole before it appears, and a damaged file of the
    old one is never carried over. Release
    files are never written in place (only replaced or removed), so sharing an inode is safe.
    Not with `reuse=False` (a manager whose gateway watches its files' inodes)."""
    if not is_version_name(manifest.get("version")):
        raise UnusableRelease(f"artifact {artifact}: unsafe version {manifest.get('version')!r}")
    target = StateLayout(state_dir).release_dir(str(manifest["version"]), sha256)
    if (target / META).is_file():
        return target
    with zipfile.ZipFile(str(artifact)) as zf:  # opened once: its directory is read once
        check_members(zf, artifact, manifest)  # before anything is written
        target.parent.mkdir(parents=True, exist_ok=True)
        for stale in target.parent.glob(".tmp-*"):  # a killed installer's (we hold the lock)
            shutil.rmtree(str(stale), ignore_errors=True)
        tmp = target.parent / f".tmp-{target.name}-{os.getpid()}"
        try:
            written = _extract(zf, tmp, _reusable(state_dir, manifest) if reuse else (None, {}))
            for rel, digest in (manifest.get("files") or {}).items():
                if written.get(rel) != digest:
                    raise UnusableRelease(
                        f"artifact {artifact}: {rel} does not match its manifest hash")
            meta = {"sha256": sha256, "version": manifest["version"],
                    "components": manifest.get("components", {}), "plugins": _plugin_dirs(tmp),
                    "installed_at": time.time()}
            (tmp / META).write_text(json.dumps(meta, sort_keys=True), encoding="utf-8")
            if target.exists():  # a meta-less leftover: replace it
                shutil.rmtree(str(target))
            os.rename(str(tmp), str(target))
        finally:
            if tmp.exists():
                shutil.rmtree(str(tmp), ignore_errors=True)
    return target


def _reusable(state_dir: Path, manifest: dict) -> Tuple[Optional[Path], Dict[str, str]]:
    """The active release dir and the members its artifact had with the same manifest hash,
    with that hash (see `unpack`)."""
    current = current_release(state_dir)
    if current is None:
        return None, {}
    try:
        old = json.loads(regularfile.read_text(current / MANIFEST)).get("files") or {}
    except (OSError, ValueError, AttributeError):
        return None, {}
    return current, {rel: digest for rel, digest in (manifest.get("files") or {}).items()
                     if isinstance(rel, str) and old.get(rel) == digest}


def _link(source: str, target: str, size: int, digest: str) -> bool:
    """Hard-link `source` to `target` if it is a regular file of `size` bytes and SHA-256
    `digest` (reading it costs far less than writing it); False when it is not, or cannot."""
    try:
        st = os.lstat(source)
        if not (st.st_mode & 0o170000 == 0o100000 and st.st_size == size
                and sha256_file(Path(source)) == digest):
            return False
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.link(source, target)
        return True
    except OSError:  # gone, another file system, links not allowed: extract it
        return False


def _write(target: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "xb") as fh:
        fh.write(data)


def _extract(zf: zipfile.ZipFile, tmp: Path,
             reuse: Tuple[Optional[Path], Dict[str, str]] = (None, {})) -> Dict[str, str]:
    """Write every member into `tmp` (or link it: `reuse`, the active release dir and the
    members it has the same of, with their manifest hash); returns the SHA-256 of the bytes
    each file member got (for a linked one, of the inode checked before it was linked).

    Member names were checked by `check_members` (relative, no `..`); each target is checked
    again to lie inside `tmp`. A legacy-location `x/y.pyc` beside its `x/y.py` is bytecode the
    build compiled: written to `x/__pycache__/y.<cache tag>.pyc` when its magic is this
    interpreter's (its checked source hash keeps a stale one from ever being used), skipped
    otherwise (this Python compiles the source as before). Never left loose beside the source.
    """
    names = set(zf.namelist())
    old, same = reuse
    if old is None:
        same = {}
    root = os.path.realpath(str(tmp))
    os.makedirs(root, exist_ok=True)
    written: Dict[str, str] = {}
    kept: List[str] = []  # sources linked from the active release
    for info in zf.infolist():
        name = info.filename
        if info.is_dir():
            os.makedirs(_inside(root, name), exist_ok=True)
            continue
        dest = name
        if name.endswith(".pyc") and name[:-1] in names:
            try:
                dest = importlib.util.cache_from_source(name[:-1], optimization="")
            except NotImplementedError:  # an implementation without bytecode caching
                dest = None
        digest = same.get(name)
        if dest is not None and digest is not None and _link(
                os.path.join(str(old), dest), _inside(root, dest), info.file_size, digest):
            written[name] = digest  # the same bytes, for this Python too, as before
            if name.endswith(".py"):
                kept.append(name)
            continue
        data = zf.read(info)  # zipfile checks the member's CRC-32
        written[name] = hashlib.sha256(data).hexdigest()
        if dest is None or (dest != name and data[:4] != importlib.util.MAGIC_NUMBER):
            continue  # bytecode of another Python: this one compiles the source
        _write(_inside(root, dest), data)
    if old is not None:
        _keep_compiled(str(old), root, kept)
    return written


def _keep_compiled(old: str, root: str, sources: List[str]) -> None:
    """Link the bytecode this Python compiled in the active release for each source linked
    from it, where the artifact brought none for this Python (an artifact built by another
    Python version: a 3.9 host compiles a 3.11 build's modules itself, at its first start of
    each release). The source is the same inode, so the cached file's recorded source mtime
    and size still match; Python checks them at import as for any cache, and compiles again
    on a mismatch."""
    for source in sources:
        try:
            cached = importlib.util.cache_from_source(source, optimization="")
        except NotImplementedError:
            return
        target = _inside(root, cached)
        if os.path.lexists(target):
            continue  # the artifact's own bytecode for this Python
        try:
            st = os.lstat(os.path.join(old, cached))
            if st.st_mode & 0o170000 == 0o100000:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.link(os.path.join(old, cached), target)
        except OSError:  # none there yet, or no links here: compiled at the first import
            pass


def _inside(root: str, name: str) -> str:
    """`root/name`, refused (UnusableRelease) unless it lies inside `root`."""
    path = os.path.normpath(os.path.join(root, name))
    if not path.startswith(root + os.sep):
        raise UnusableRelease(f"member {name!r} would land outside the release dir; refusing it")
    return path


def read_meta(release: Optional[Path]) -> Optional[dict]:
    if release is None:
        return None
    try:
        meta = json.loads(regularfile.read_text(release / META))
    except (OSError, ValueError):
        return None
    meta["release"] = release.name
    return meta


def current_release(state_dir: Path) -> Optional[Path]:
    """The release dir `current` points at, or None."""
    return _link_target(StateLayout(state_dir).current)


def previous_release(state_dir: Path) -> Optional[Path]:
    """The release dir `previous` points at, or None."""
    return _link_target(StateLayout(state_dir).previous)


def _link_target(link: Path) -> Optional[Path]:
    if not os.path.islink(str(link)):
        return None
    target = (link.parent / os.readlink(str(link))).resolve()
    return target if target.is_dir() else None


def switch(state_dir: Path, release: Path, previous: Optional[Path],
           link_plugins: bool = True) -> List[str]:
    """Point `previous` then `current` at releases, then make sure every plugin link exists
    (unless the host's gateway finds its plugins otherwise: `link_plugins=False`).

    Returns notes (e.g. a manual plugin directory moved aside).
    """
    layout = StateLayout(state_dir)
    notes = []
    base = layout.fleet_dir
    for path in (layout.previous, layout.current):  # a real directory here was made by hand
        if os.path.lexists(str(path)) and not os.path.islink(str(path)):
            aside = base / "{}.manual-{}".format(path.name, time.strftime("%Y%m%d-%H%M%S"))
            os.rename(str(path), str(aside))
            notes.append(f"moved manual {path} aside to {aside}")
    if previous is not None and previous != release:
        atomic_symlink(layout.previous, os.path.relpath(str(previous), str(base)), sync=False)
    atomic_symlink(layout.current, os.path.relpath(str(release), str(base)), sync=False)
    fsync_dir(base)
    return notes + (link_extensions(state_dir, release) if link_plugins else [])


def link_extensions(state_dir: Path, release: Path) -> List[str]:
    """`<state>/extensions/<id>` -> `../fleet/current/fleet/plugins/<pkg>` for each plugin."""
    notes = []
    meta = read_meta(release) or {}
    layout = StateLayout(state_dir)
    ext = layout.extensions
    ext.mkdir(parents=True, exist_ok=True)
    for plugin_id, pkg in sorted((meta.get("plugins") or {}).items()):
        link = ext / plugin_id
        want = StateLayout.extension_target(pkg)
        if os.path.islink(str(link)) and os.readlink(str(link)) == want:
            continue
        if os.path.lexists(str(link)) and not os.path.islink(str(link)):
            aside = layout.manual_extensions / "{}-{}".format(
                plugin_id, time.strftime("%Y%m%d-%H%M%S"))
            aside.parent.mkdir(parents=True, exist_ok=True)
            os.rename(str(link), str(aside))
            notes.append(f"moved manual install {link} aside to {aside}")
        atomic_symlink(link, want, sync=False)
    fsync_dir(ext)
    return notes


def unlink_extensions(state_dir: Path, plugin_ids: List[str]) -> List[str]:
    """Remove the `<state>/extensions/<id>` links fleet made (a host that moved to a gateway
    loading plugins from elsewhere, where a second copy would be a duplicate; `fleet remove`).
    Anything not pointing through `fleet/current` is the user's and stays. The ids unlinked."""
    prefix = os.path.join("..", StateLayout.CURRENT, "")
    gone = []
    for plugin_id in plugin_ids:
        link = StateLayout(state_dir).extensions / plugin_id
        if os.path.islink(str(link)) and os.readlink(str(link)).startswith(prefix):
            os.unlink(str(link))
            gone.append(plugin_id)
    return gone


def unlink_current(state_dir: Path) -> None:
    """Used when a first-ever install fails: the host goes back to having no release."""
    link = StateLayout(state_dir).current
    if os.path.islink(str(link)):
        os.unlink(str(link))


def list_releases(state_dir: Path) -> List[Path]:
    """Complete release dirs, newest install first."""
    base = StateLayout(state_dir).releases_dir
    if not base.is_dir():
        return []
    found = [p for p in base.iterdir() if not p.name.startswith(".") and (p / META).is_file()]
    return sorted(found, key=lambda p: (read_meta(p) or {}).get("installed_at", 0), reverse=True)


MIN_SHA_PREFIX = 4  # hex digits of a SHA-256 that name a release (git's shortest abbreviation)


def find_release(state_dir: Path, wanted: str) -> Path:
    """The one release `wanted` names: its dir name, its version, or a prefix of its SHA-256 (at
    least MIN_SHA_PREFIX hex digits). None or several is an UnusableRelease that lists them."""
    releases = list_releases(state_dir)
    for rel in releases:
        if rel.name == wanted:
            return rel
    key = wanted.strip().lower()
    hex_prefix = len(key) >= MIN_SHA_PREFIX and all(c in "0123456789abcdef" for c in key)
    matches = []
    for rel in releases:
        meta = read_meta(rel) or {}
        if wanted == meta.get("version") or (
                hex_prefix and str(meta.get("sha256", "")).startswith(key)):
            matches.append(rel)
    where = StateLayout(state_dir).releases_dir
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UnusableRelease("{!r} names {} releases under {}: {}; name one by its release dir "
                              "or a longer SHA-256 prefix".format(
                                  wanted, len(matches), where,
                                  "; ".join(describe_release(state_dir, r) for r in matches)))
    raise UnusableRelease("no release {!r} under {} (a release dir, a version, or a SHA-256 "
                          "prefix of {}+ hex digits); known: {}".format(
                              wanted, where, MIN_SHA_PREFIX,
                              "; ".join(describe_release(state_dir, r) for r in releases)
                              or "none"))


def describe_release(state_dir: Path, release: Path) -> str:
    """`<dir> (version V, sha256 S, installed T[, current])`, for a list in an error."""
    meta = read_meta(release) or {}
    try:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(release.stat().st_mtime))
    except OSError:
        when = "?"
    current = ", current" if current_release(state_dir) == release else ""
    return "{} (version {}, sha256 {}, installed {}{})".format(
        release.name, meta.get("version", "?"), str(meta.get("sha256", "?"))[:12], when, current)


def prune(state_dir: Path, keep: int) -> List[str]:
    """Delete all but the newest `keep` releases, never `current` or `previous`."""
    protected = {current_release(state_dir), previous_release(state_dir)}
    removed = []
    removed_shas = set()
    for index, rel in enumerate(list_releases(state_dir)):
        if index < keep or rel in protected:
            continue
        removed_shas.add((read_meta(rel) or {}).get("sha256"))
        shutil.rmtree(str(rel), ignore_errors=True)
        removed.append(rel.name)
    layout = StateLayout(state_dir)
    artifacts = layout.artifacts_dir
    for part in artifacts.glob("*.part") if artifacts.is_dir() else []:
        try:  # uploads interrupted more than an hour ago
            if time.time() - part.stat().st_mtime > 3600:
                part.unlink()
        except OSError:
            pass
    for sha in removed_shas:
        try:
            layout.artifact(sha).unlink()
        except OSError:
            pass
    return removed
