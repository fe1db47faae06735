"""Entry point of the artifact: `python3 fleet-<v>.pyz --version | install | status | ...`.

Minimal for now (only --version); the deploy work adds the subcommands.
"""

from __future__ import annotations

import json
import sys
import zipfile


def read_manifest() -> dict:
    """The fleet_manifest.json embedded at the artifact's root (empty outside an artifact)."""
    archive = sys.argv[0]
    try:
        with zipfile.ZipFile(archive) as zf:
            return json.loads(zf.read("fleet_manifest.json").decode("utf-8"))
    except (OSError, KeyError, zipfile.BadZipFile, ValueError):
        return {}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--version"]:
        manifest = read_manifest()
        print(json.dumps({"version": manifest.get("version"),
                          "components": manifest.get("components", {})}, sort_keys=True))
        return 0
    print("usage: fleet-<version>.pyz --version", file=sys.stderr)
    return 2
