"""What a `pip install .` operator gets: the product alone, the same artifact as the checkout
builds, and the README's operator section working as written.

The package is built and installed for real (pip, non-editable, into a fresh virtualenv whose
other dependencies come from this one through a .pth file), from a snapshot of the sources that
is not a git checkout. Every command runs the installed `fleet` script from a directory outside
any checkout, as an operator would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import tomllib
from deploy_helpers import stop_gateways

from fleet.release.artifact import build_artifact
from fleet.release.hostside import DATA_SUFFIXES
from lab.sourcetree import REPO, snapshot

pytestmark = pytest.mark.slow

HOSTS = ("alpha", "beta")
INVENTORY = """\
vars: {connection: local, gateway: {manager: fleet}, timeouts: {ready: 60, command: 180}}
hosts:
  alpha: {state_dir: hosts/alpha}
  beta: {state_dir: hosts/beta}
groups:
  production: {hosts: [alpha, beta]}
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(sources, venv, elsewhere, env): `pip install <sources>` done, `elsewhere` an empty dir."""
    root = tmp_path_factory.mktemp("installed")
    src = root / "src"
    snapshot(src)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    site = Path(subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
         "['purelib'])"], capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    # fabric, invoke, ... from this environment; `fleet` only from the install below (a .pth
    # in a directory added by another .pth is not run: this venv's editable `fleet` stays out)
    (site / "_control_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                           "install", "--no-deps", "--quiet", str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
               XDG_CACHE_HOME=str(root / "cache"), HOME=str(root / "home"))
    yield src, venv, elsewhere, env
    stop_gateways([elsewhere / "hosts" / name for name in HOSTS])


def fleet(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["fleet", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_package_data_carries_every_file_the_artifact_ships():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["*"]
    assert sorted(p.removeprefix("*") for p in patterns) == sorted(
        s for s in DATA_SUFFIXES if s != ".py")


def test_the_installed_package_is_the_product_only(installed):
    _, venv, elsewhere, env = installed
    proc = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import fleet, importlib.util as u; print(fleet.__file__); "
                           "print(u.find_spec('lab'))"], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=60)
    where, lab = proc.stdout.split()
    assert Path(where).is_relative_to(venv) and lab == "None"
    listed = fleet(env, elsewhere, "--list").stdout
    assert "deploy" in listed and "harness.up" not in listed and " test " not in listed


def test_an_installed_package_builds_the_checkouts_artifact_byte_for_byte(installed, tmp_path):
    src, _, elsewhere, env = installed
    proc = fleet(env, elsewhere, "build", "--json")
    assert proc.returncode == 0, proc.stderr
    built = json.loads(proc.stdout)["artifact"]
    from_checkout = build_artifact(src, tmp_path / "dist")
    assert Path(built["path"]).read_bytes() == from_checkout.path.read_bytes()
    assert built["sha256"] == from_checkout.sha256
    names = json.loads(subprocess.run(
        [sys.executable, "-c", f"import zipfile; print(__import__('json').dumps("
         f"zipfile.ZipFile({built['path']!r}).namelist()))"],
        capture_output=True, text=True, check=True, timeout=60).stdout)
    for plugin in ("memory_continuity", "mc"):  # what OpenClaw loads of each plugin
        assert f"fleet/plugins/{plugin}/index.js" in names
        assert f"fleet/plugins/{plugin}/bridge.mjs" in names


def test_the_readmes_operator_section_works_as_written(installed):
    """README: `pip install .`, then `fleet build` and `fleet deploy --inventory my-fleet.yaml -H
    production` from any directory; here with two local hosts, and `fleet status` after."""
    _, _, elsewhere, env = installed
    (elsewhere / "my-fleet.yaml").write_text(INVENTORY)
    assert fleet(env, elsewhere, "build").returncode == 0
    proc = fleet(env, elsewhere, "deploy", "--inventory", "my-fleet.yaml", "-H", "production",
                 "--yes", "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert {h["host"]: h["result"] for h in doc["hosts"]} == {"alpha": "installed",
                                                              "beta": "installed"}
    proc = fleet(env, elsewhere, "status", "--inventory", "my-fleet.yaml", "-H", "production",
                 "--json")
    assert proc.returncode == 0, proc.stderr
    assert all(h["data"]["ready"] for h in json.loads(proc.stdout)["hosts"])
    again = fleet(env, elsewhere, "deploy", "--inventory", "my-fleet.yaml", "-H", "production",
                  "--json")
    assert {h["result"] for h in json.loads(again.stdout)["hosts"]} == {"unchanged"}
