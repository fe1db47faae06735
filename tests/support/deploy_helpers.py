"""Helpers shared by the deploy, installer and CLI tests (tests/support is on sys.path through
pyproject's `pythonpath`; a module with its own name: every test folder has a conftest.py, so
`from conftest import ...` would pick whichever was imported last)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from fleet.continuity import detached
from fleet.continuity.statelayout import StateLayout
from fleet.gateway import process
from fleet.gateway.layout import Layout
from fleet.release.artifact import build_artifact
from lab.sourcetree import break_python_entry, break_python_entry_on, break_selftest, snapshot

REPO = Path(__file__).resolve().parents[2]


FAKEGW = Path(__file__).with_name("fakegw.py")


@dataclass
class Built:
    path: Path
    sha256: str
    version: str
    components: dict


def make_tree(dst: Path, bump: str | None = None, broken: bool = False,
              rebuild: str | None = None, fail_on: tuple[str, ...] = (),
              bad_selftest: bool = False) -> Path:
    """Copy the repo's sources; optionally set memory-continuity's version, break its import
    (everywhere, or with `fail_on` only on hosts whose state dir has one of those names), make
    it fail its self-test while it still loads (`bad_selftest`), or change a file without
    changing any version (`rebuild`: same versions, different SHA-256)."""
    plugin = snapshot(dst, version=bump)
    if rebuild:
        with open(plugin / "__init__.py", "a") as fh:
            fh.write(f"# rebuild {rebuild}\n")
    if broken:
        break_python_entry(plugin, "broken release: import fails")
    if fail_on:
        break_python_entry_on(plugin, fail_on, f"broken release: import fails on "
                                               f"{', '.join(sorted(fail_on))}")
    if bad_selftest:
        break_selftest(plugin)
    return dst


def build(root: Path, out_dir: Path) -> Built:
    art = build_artifact(root, out_dir)
    return Built(Path(art.path), art.sha256, str(art.version), dict(art.components))


def stop_gateways(state_dirs) -> None:
    """Stop every gateway still running under these state dirs (fixture finalizer).

    Through the gateway's own stop (fleet.gateway.process): done when the kernel released the
    pidfile's lock, at the process's exit. Waiting for the pid to vanish instead would wait for
    the zombie to be reaped, which the init of a container or VM may do seconds later (a stand-in
    that holds no lock is stopped by its pid: fleet.continuity.detached counts a zombie gone).
    """
    for state in state_dirs:
        layout = Layout(state)
        if process.stop(layout, grace_s=10.0) is None:
            # nothing holds the pidfile's lock: a stand-in gateway (fakegw.py) writes its pid only
            pid = detached.recorded_pid(layout.pidfile)
            if pid is not None:
                detached.stop(pid, 10.0)


def run_installer(artifact: Path, *args: str, python: str = sys.executable,
                  timeout: float = 120) -> tuple[int, dict]:
    proc = subprocess.run([python, str(artifact), *args], capture_output=True, text=True,
                          timeout=timeout)
    try:
        return proc.returncode, json.loads(proc.stdout)
    except ValueError:
        return proc.returncode, {"stdout": proc.stdout, "stderr": proc.stderr}


SANDBOX_INVENTORY = """\
vars:
  connection: local
  gateway: {manager: fleet}
  timeouts: {ready: 30, command: 120}
hosts:
  a: {state_dir: hosts/a}
  b: {state_dir: hosts/b}
  c: {state_dir: hosts/c}
groups:
  sandbox: {hosts: [a, b, c]}
"""


class Sandbox:
    """Three local hosts in a temp dir, deployed through fleet.deploy.api like the tasks do."""

    def __init__(self, root: Path, text: str = SANDBOX_INVENTORY):
        from fleet.deploy.inventory import load

        self.root = root
        self.inventory_path = root / "inventory.yaml"
        self.inventory_path.write_text(text)
        self.inventory = load(self.inventory_path)
        self.events: list[tuple[str, str, str]] = []

    def state(self, name: str) -> Path:
        return Path(self.inventory.hosts[name].state_dir)

    def sink(self, host: str, step: str, note: str) -> None:
        self.events.append((host, step, note))

    def deploy(self, artifact, hosts: str = "sandbox", **kw) -> dict:
        from fleet.deploy import api

        results = api.deploy(self.inventory.select(hosts), artifact, self.sink, **kw)
        return {r.host: r for r in results}

    def run(self, action: str, hosts: str = "sandbox", **kw) -> dict:
        from fleet.deploy import api

        results = getattr(api, action)(self.inventory.select(hosts), self.sink, **kw)
        return {r.host: r for r in results}

    def current(self, name: str) -> str | None:
        link = StateLayout(self.state(name)).current
        return os.path.basename(os.readlink(link)) if os.path.islink(link) else None

    def health(self, name: str) -> dict | None:
        return process.probe(Layout(self.state(name)))

    def audit(self, name: str) -> list[dict]:
        path = StateLayout(self.state(name)).audit
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() \
            else []

    def fault(self, name: str, step: str, action: str) -> Path:
        path = StateLayout(self.state(name)).faults_dir / step
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(action)
        return path


def fake_openclaw_cli(path: Path, version: str) -> Path:
    """An `openclaw` executable at `path` that answers `--version` with `version` and fails
    (exit 9) anything else: an OpenClaw host whose CLI is all the installer asks."""
    path.write_text(f"#!{sys.executable}\nimport sys\n"
                    f"print('OpenClaw {version} (test)') if sys.argv[1:] == ['--version'] "
                    "else sys.exit(9)\n")
    path.chmod(0o755)
    return path


def release_of(built: Built) -> str:
    return f"{built.version}-{built.sha256[:12]}"
