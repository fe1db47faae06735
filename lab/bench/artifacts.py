"""Distinct artifacts for repeated full deploys.

A full deploy only happens when the host lacks the artifact's SHA-256 (otherwise fleet uploads
nothing and, with the release active, changes nothing). So every full-deploy repetition gets its
own variant: the base artifact plus one `fleet_bench_nonce.txt` entry (listed in the manifest, so
the installer's per-file check still covers every file). Same versions, new SHA, new release dir.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

from fleet.continuity.statelayout import StateLayout
from fleet.deploy.api import ArtifactRef, load_artifact

NONCE_NAME = "fleet_bench_nonce.txt"
MANIFEST = StateLayout.MANIFEST


def variant(base: ArtifactRef, nonce: str, out_dir: Path,
            edits: dict[str, Callable[[bytes], bytes]] | None = None) -> ArtifactRef:
    """`base` with a nonce file added (and `edits`: entry name -> new content from the old, the
    manifest following); deterministic for a given (base, nonce, edits)."""
    edits = edits or {}
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = base.path.read_bytes()
    prefix = raw[: raw.find(b"PK\x03\x04")] if raw.startswith(b"#!") else b""
    nonce_bytes = f"benchmark variant {nonce}\n".encode()
    buf = io.BytesIO()
    buf.write(prefix)
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(buf, "w") as dst:
        manifest = json.loads(src.read(MANIFEST))
        manifest["files"][NONCE_NAME] = hashlib.sha256(nonce_bytes).hexdigest()
        entries = {info.filename: (info, src.read(info.filename)) for info in src.infolist()}
        for name, edit in edits.items():
            info, old = entries[name]
            entries[name] = (info, edit(old))
            manifest["files"][name] = hashlib.sha256(entries[name][1]).hexdigest()
        template = entries[MANIFEST][0]
        for name in sorted(set(entries) | {NONCE_NAME}):
            if name == MANIFEST:
                data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
                info = entries[name][0]
            elif name == NONCE_NAME:
                data = nonce_bytes
                info = zipfile.ZipInfo(name, date_time=template.date_time)
                info.create_system = template.create_system
                info.external_attr = template.external_attr
            else:
                info, data = entries[name]
            dst.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    path = out_dir / f"{base.path.stem}-{nonce}.pyz"
    path.write_bytes(buf.getvalue())
    path.chmod(0o755)
    return load_artifact(path)


def plugin_files(artifact: ArtifactRef, out_dir: Path) -> dict[str, list[Path]]:
    """The plugin files as the hand-made loop copies them: plugin id -> files (flat dir)."""
    out: dict[str, list[Path]] = {}
    with zipfile.ZipFile(artifact.path) as zf:
        names = zf.namelist()
        for manifest_name in [n for n in names if n.startswith("fleet/plugins/")
                              and n.endswith("/openclaw.plugin.json")]:
            pkg_dir = manifest_name.rsplit("/", 1)[0]
            plugin_id = json.loads(zf.read(manifest_name))["id"]
            target = out_dir / plugin_id
            target.mkdir(parents=True, exist_ok=True)
            files = []
            for name in sorted(n for n in names if n.startswith(pkg_dir + "/")
                               and "/" not in n[len(pkg_dir) + 1:]):
                dest = target / name.rsplit("/", 1)[1]
                dest.write_bytes(zf.read(name))
                files.append(dest)
            out[plugin_id] = files
    return out
