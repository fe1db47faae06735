"""fleet's OpenClaw packages installed by OpenClaw itself: `openclaw plugins install` of the
release's tarballs on both ends of the declared range (both plugins load, `<id>.ready` answers,
the continuity scenario passes), an OpenClaw below the floor refusing them by its own check, and
the packages published to a real npm registry (Verdaccio on 127.0.0.1) and installed from it by
npm spec. No fleet release on these hosts: what a user who manages OpenClaw with its own CLI
gets.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from fleet.deploy.inventory import load
from fleet.installer.openclawgw import OpenclawManager
from fleet.release import npmpublish
from fleet.release.npmpackage import build_packages
from lab.openclaw import compat, pluginpackage, registry, sandbox, scenario, toolchain
from lab.openclaw.drive import Driver

pytestmark = [pytest.mark.openclaw, pytest.mark.slow, pytest.mark.timeout(3600)]

REPO = Path(__file__).resolve().parents[2]
RANGE = compat.declared(REPO)
CONTINUITY = "memory-continuity"


@pytest.fixture(scope="module")
def packages(tmp_path_factory) -> dict:
    """The checkout's packages, as `invoke build --npm` writes them: {plugin id: NpmPackage}."""
    out = tmp_path_factory.mktemp("npm") / "dist"
    return {p.component: p for p in build_packages(REPO, out)}


def versions(packages: dict) -> dict:
    return {cid: p.version for cid, p in packages.items()}


def sandbox_host(root: Path, version: str):
    """One prepared sandbox OpenClaw host of `version` (its scripted model running, no
    gateway yet), the probe plugin beside fleet's (the scenario reads what it records)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "inventory.yaml").write_text(sandbox.inventory_text(
        ["oc"], "pkg", options={"oc": {"openclaw_version": version}}))
    hosts = sandbox.resolve(load(root / "inventory.yaml").select("pkg"))
    sandbox.prepare(hosts)
    scenario.install_probe(hosts[0], root / "probe.jsonl")
    return hosts[0]


def installed_records(manager: OpenclawManager) -> dict:
    config = json.loads(manager.config_path.read_text(encoding="utf-8"))
    return config.get("plugins", {}).get("installs", {})


@pytest.mark.parametrize("version", [RANGE.floor, RANGE.top], ids=lambda v: f"openclaw-{v}")
def test_openclaw_installs_the_tarballs_and_they_pass_the_continuity_scenario(
        version, packages, tmp_path):
    host = sandbox_host(tmp_path, version)
    manager = sandbox.supervised(host)
    started = time.monotonic()
    try:
        for pkg in packages.values():
            said = pluginpackage.install(manager, str(pkg.path))
            assert f"Installed plugin: {pkg.component}" in said, said
        for cid in packages:  # where OpenClaw puts an archive install
            assert (Path(host.state_dir) / "extensions" / cid / "openclaw.plugin.json").is_file()
        pluginpackage.allow_conversation_access(manager, CONTINUITY)
        pluginpackage.start(manager)
        for cid in packages:  # each worker runs the Python core inside its installed package
            ready = Driver(host).manager().call(f"{cid}.ready", timeout=120)
            assert Path(ready["pluginDir"]).resolve().is_relative_to(
                (Path(host.state_dir) / "extensions" / cid).resolve())
        run = scenario.InstalledScenario(host, versions(packages), tmp_path / "probe.jsonl")
        outcome = run.run()
        assert run.ok, json.dumps(outcome.checks, indent=1)
    finally:
        sandbox.down([host])
        print(f"OpenClaw {version}: install, start and scenario in "
              f"{time.monotonic() - started:.0f}s")


def test_an_openclaw_below_the_floor_refuses_the_package_by_its_own_check(packages, tmp_path):
    tool = toolchain.find(version=toolchain.BELOW_FLOOR_VERSION)
    assert tool is not None, "run `invoke openclaw.install` (installs the release below the floor)"
    state = tmp_path / "state"
    (state / "home").mkdir(parents=True)
    (state / "openclaw.json").write_text('{"gateway": {"mode": "local"}}\n')
    opts = {"mode": "supervised", "node": str(tool.node), "openclaw": str(tool.openclaw),
            "home": str(state / "home"), "env.OPENCLAW_PLUGIN_STAGE_DIR": str(tmp_path / "stage"),
            **{f"env.{k}": v for k, v in sandbox.QUIET_ENV.items()}}
    manager = OpenclawManager(state, opts)
    with pytest.raises(pluginpackage.InstallRefused) as refused:
        pluginpackage.install(manager, str(packages[CONTINUITY].path))
    said = str(refused.value)
    assert f"requires OpenClaw >={RANGE.floor}" in said and toolchain.BELOW_FLOOR_VERSION in said
    assert not (state / "extensions" / CONTINUITY).exists()
    assert CONTINUITY not in installed_records(manager)


def test_packages_published_to_a_real_registry_install_from_it_by_npm_spec(
        packages, tmp_path, monkeypatch):
    top = toolchain.find(version=RANGE.top)
    with registry.Registry(tmp_path / "registry", top.node, sandbox.free_port()) as reg:
        monkeypatch.setenv("NPM_CONFIG_USERCONFIG", str(reg.npmrc()))
        monkeypatch.setenv("npm_config_update_notifier", "false")
        chosen = list(packages.values())
        # the default: a dry run, which sends nothing
        dry = npmpublish.publish(chosen, reg.url, dry_run=True, echo=lambda _line: None)
        assert [p.dry_run for p in dry] == [True] * len(chosen)
        for pkg in chosen:
            with pytest.raises(urllib.error.HTTPError) as missing:
                urllib.request.urlopen(reg.url + pkg.name, timeout=10)
            assert missing.value.code == 404
        npmpublish.publish(chosen, reg.url, dry_run=False, echo=lambda _line: None)
        for pkg in chosen:
            with urllib.request.urlopen(reg.url + pkg.name, timeout=10) as answer:
                doc = json.load(answer)
            assert doc["versions"][pkg.version]["openclaw"]["compat"]["minGatewayVersion"] \
                == RANGE.floor
        host = sandbox_host(tmp_path / "host", RANGE.top)
        manager = sandbox.supervised(host)
        try:
            env = {"npm_config_registry": reg.url, "NO_PROXY": "127.0.0.1,localhost"}
            for pkg in chosen:
                pluginpackage.install(manager, f"npm:{pkg.name}@{pkg.version}", pin=True,
                                      env=env)
            served = reg.log.read_text(encoding="utf-8", errors="replace")
            for pkg in chosen:  # OpenClaw's npm fetched each tarball from this registry
                assert f"GET /{pkg.name}/-/{pkg.path.name}" in served, served[-2000:]
            pluginpackage.allow_conversation_access(manager, CONTINUITY)
            pluginpackage.start(manager)
            assert Driver(host).loaded() == versions(packages)
            for cid in packages:  # ... and each worker runs from the package it installed
                ready = Driver(host).manager().call(f"{cid}.ready", timeout=120)
                assert Path(ready["pluginDir"]).resolve().is_relative_to(
                    Path(host.state_dir).resolve())
        finally:
            sandbox.down([host])
    assert reg.child.exit_code() is not None  # stopped with the test
