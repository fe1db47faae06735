"""Helpers for the integration tests: run real tasks as an operator would, build releases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from lab.harness import hosts
from lab.harness.remote import RemoteGateway
from lab.sourcetree import PROJECT_FILES, break_python_entry, snapshot

REPO = Path(__file__).resolve().parents[2]


@dataclass
class TaskRun:
    """One `invoke <task>` run: exit code, the --json document (if any), stderr."""

    code: int
    data: dict | None
    stderr: str

    def hosts(self) -> dict[str, dict]:
        return {h["host"]: h for h in (self.data or {}).get("hosts", [])}


def invoke_task(*args: str, timeout: float = 300) -> TaskRun:
    """Run a real task (`invoke -r <repo> ...`) as an operator would, with --json output
    (tasks that change hosts get --yes: the harness hosts are outside the sandbox)."""
    if args and args[0] in ("deploy", "rollback", "restart"):
        args = (*args, "--yes")
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(REPO), *args, "--json"],
        capture_output=True, text=True, timeout=timeout, cwd=REPO,
        env={**os.environ, "SSH_AUTH_SOCK": ""},
    )
    try:
        data = json.loads(proc.stdout) if proc.stdout.strip() else None
    except ValueError:
        data = None
    return TaskRun(proc.returncode, data, proc.stderr)


def make_tree(dst: Path, version: str | None = None, broken: bool = False) -> Path:
    """A snapshot of the repo's sources, optionally with memory-continuity at `version` or with
    a plugin that fails to import (a bad release). Snapshots keep artifacts stable while others
    edit the working tree."""
    plugin = snapshot(dst, (*PROJECT_FILES, "CHANGELOG.md"), version)
    if broken:
        break_python_entry(plugin, "bad release: plugin import fails")
    return dst


def deploy(inventory: Path, artifact, hosts: str = "all", *extra: str) -> TaskRun:
    """`invoke deploy --inventory <inv> --hosts <hosts> --artifact <pyz> --json`."""
    return invoke_task("deploy", "--inventory", str(inventory), "--hosts", hosts,
                       "--artifact", str(artifact.path), *extra)


def health(harness, name: str) -> dict:
    return RemoteGateway(harness, name).call("health")


def current_release(host: hosts.Host) -> str:
    """The release dir the host's `current` link points at (read via docker exec)."""
    return host.exec_ok(f"basename $(readlink {host.state_dir}/fleet/current)").strip()


def release_name(artifact) -> str:
    return f"{artifact.version}-{artifact.sha256[:12]}"


def assert_on(harness, artifact, names=None) -> None:
    """Every named host answers with exactly this release's plugin versions."""
    for name in names or list(harness.hosts):
        h = health(harness, name)
        assert h["ready"], (name, h)
        assert h["release"] == release_name(artifact), (name, h["release"])
        assert set(h["versions"]) == {"mc", "memory-continuity"}
        assert h["versions"] == {k: artifact.components[k] for k in h["versions"]}, name
