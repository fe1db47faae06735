"""Two sandbox OpenClaw hosts in a temp dir, deployed through fleet.deploy.api like the tasks do.

Each host is a real OpenClaw gateway (a toolchain of `invoke openclaw.install`) with its own state
dir, HOME, port, config and scripted model, driven as its user would (lab.openclaw.drive). Tests
read what the gateway reports, what the scripted model received (its request log) and the files
the plugins wrote.
"""

from __future__ import annotations

from pathlib import Path

from fleet.deploy import api
from fleet.deploy.inventory import load
from lab.openclaw import sandbox, toolchain
from lab.openclaw.drive import Driver
from lab.sourcetree import break_js_entry, snapshot

REPO = Path(__file__).resolve().parents[2]
HOSTS = ("oc-a", "oc-b")


def make_tree(dst: Path, bump: str | None = None, throw_at_load: bool = False) -> Path:
    """The repo's sources; memory-continuity at version `bump`, or with an entry that throws
    when OpenClaw loads it."""
    plugin = snapshot(dst, version=bump)
    if throw_at_load:
        break_js_entry(plugin, "broken release: the entry throws at load")
    return dst


def build(root: Path, out: Path) -> api.ArtifactRef:
    return api.build_artifact(root, out)


class OpenclawFleet:
    """The two hosts (both on OpenClaw `version`), their inventory, and a driver for each."""

    def __init__(self, root: Path, version: str = toolchain.OPENCLAW_VERSION):
        self.root = root
        self.version = version
        (root / "inventory.yaml").write_text(sandbox.inventory_text(
            HOSTS, "both", ready_s=900, command_s=2400,
            options={name: {"openclaw_version": version} for name in HOSTS}))
        self.inventory = load(root / "inventory.yaml")
        self.hosts = {h.name: h for h in sandbox.resolve(self.inventory.select("both"))}
        sandbox.prepare(list(self.hosts.values()))
        self.drivers = {name: Driver(host) for name, host in self.hosts.items()}
        self.events: list = []

    def deploy(self, artifact, **kw) -> dict:
        # The releases CI tests include ones the proof may not list yet (the compat matrix
        # proves them): deploying to them is what these tests are about.
        kw.setdefault("allow_unproven_openclaw", True)
        results = api.deploy(list(self.hosts.values()), artifact,
                             lambda *e: self.events.append(e), **kw)
        return {r.host: r for r in results}

    def remove(self) -> dict:
        results = api.remove(list(self.hosts.values()), lambda *e: self.events.append(e))
        return {r.host: r for r in results}

    def status(self) -> dict:
        results = api.status(list(self.hosts.values()), lambda *e: None)
        return {r.host: r for r in results}

    def state(self, name: str) -> Path:
        return self.drivers[name].state

    def gateway_pid(self, name: str) -> int | None:
        return self.drivers[name].manager().process.pid()

    def __getitem__(self, name: str) -> Driver:
        return self.drivers[name]

    def down(self) -> None:
        sandbox.down(list(self.hosts.values()))
