"""A deploy to an OpenClaw host weighs the host's OpenClaw against the release's declared range and
proof (fleet/continuity/openclawrange.py), end to end through fleet.deploy.api on a local host
whose OpenClaw is a stand-in: a fake CLI (`--version`, `config validate`) and a fake gateway on
127.0.0.1 (fake_openclaw_gw.py) that reports the release's plugins loaded.

- too old, or not proven without --allow-unproven-openclaw: refused before the upload, so the
  host keeps nothing but its audit line (`refused` and why);
- with the flag: deployed, the host's result says so; a no-op redeploy re-checks;
- `status` and `doctor` show the host's OpenClaw against the active release's proof.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
from deploy_helpers import Sandbox, build, make_tree, release_of
from fake_openclaw_gw import FakeGateway
from rich.console import Console

from fleet.deploy import doctor as fleet_doctor
from fleet.deploy.report import status_summary, status_table

# The proof the releases under test carry (the checkout's own changes with every matrix run).
PROOF = {"proven": ["2026.4.24", "2026.9.6"], "excluded": {}, "sources": "", "commit": "",
         "date": ""}


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """The checkout's release (memory-continuity at `bump`), built once each with `PROOF` as
    its proof."""
    built = {}

    def get(bump: str | None = None):
        if bump not in built:
            work = tmp_path_factory.mktemp("src")
            tree = make_tree(work / "tree", bump)
            (tree / "fleet" / "plugins" / "openclaw-proven.json").write_text(json.dumps(PROOF))
            built[bump] = build(tree, work / "dist")
        return built[bump]

    return get


FAKE_CLI = """#!{python}
import json, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("OpenClaw {version} (fake)")
elif args[:2] == ["config", "validate"]:
    print(json.dumps({{"valid": True}}))
else:
    sys.exit(9)
"""


class OpenclawHost:
    """One local OpenClaw host: its state dir, fake CLI and fake gateway (at `version`)."""

    def __init__(self, root: Path, gw: FakeGateway, version: str, components: dict):
        self.state = root / "oc"
        self.state.mkdir()
        self.config = {"gateway": {"port": gw.port, "auth": {"mode": "none"}}}
        (self.state / "openclaw.json").write_text(json.dumps(self.config))
        self.cli = root / "openclaw"
        self.gw = gw
        self.set_version(version)
        plugins = [{"id": pid, "version": components[pid], "enabled": True,
                    "runtime": {"state": "active"}} for pid in ("memory-continuity", "mc")]
        gw.answer("plugins.list", {"plugins": plugins, "diagnostics": []})
        gw.answer("plugins.reload", {})
        for pid in ("memory-continuity", "mc"):
            gw.answer(f"{pid}.ready", {"id": pid, "version": components[pid], "pid": 7})
        self.box = Sandbox(root, f"""\
hosts:
  oc:
    connection: local
    state_dir: {self.state}
    gateway: {{manager: openclaw, options: {{openclaw: "{self.cli}", port: "{gw.port}"}}}}
    timeouts: {{ready: 30, command: 120}}
""")

    def set_version(self, version: str) -> None:
        """What OpenClaw this host runs from now on (its CLI and its gateway agree)."""
        self.cli.write_text(FAKE_CLI.format(python=sys.executable, version=version))
        self.cli.chmod(self.cli.stat().st_mode | stat.S_IXUSR)
        self.gw.version = version
        self.gw.answer("status", {"runtimeVersion": version})

    def files(self) -> set:
        return {p.relative_to(self.state).as_posix() for p in self.state.rglob("*")}

    def artifacts(self) -> list:
        return sorted((self.state / "fleet" / "artifacts").glob("*.pyz"))


@pytest.fixture
def gw():
    with FakeGateway() as server:
        yield server


def _host(tmp_path, gw, artifacts, version: str) -> OpenclawHost:
    return OpenclawHost(tmp_path, gw, version, artifacts().components)


@pytest.mark.parametrize("version, flag, fix", [
    ("2026.3.28", False, "upgrade OpenClaw (npm install -g openclaw@latest)"),
    ("2026.3.28", True, "upgrade OpenClaw (npm install -g openclaw@latest)"),
    ("2026.6.6", False, "pass --allow-unproven-openclaw to deploy it anyway"),
    ("2026.10.1", False, "pass --allow-unproven-openclaw to deploy it anyway"),
])
def test_a_host_whose_openclaw_the_release_does_not_accept_is_refused_before_the_upload(
        tmp_path, gw, artifacts, version, flag, fix):
    host = _host(tmp_path, gw, artifacts, version)
    before = host.files()
    res = host.box.deploy(artifacts(), hosts="oc", allow_unproven_openclaw=flag)["oc"]
    assert res.result == "refused" and not res.ok, res.note
    assert res.note.startswith(f"host oc: its OpenClaw CLI (no gateway answers) is OpenClaw "
                               f"{version}: OpenClaw {version} "), res.note
    assert "proven on 2026.4.24, 2026.9.6" in res.note or "older than" in res.note
    assert fix in res.note and res.note.endswith("nothing was changed")
    assert res.data["uploaded"] is False
    # nothing stored, nothing unpacked, the config untouched: only the audit line is new
    assert host.files() - before == {"fleet", "fleet/audit.jsonl"}
    assert json.loads((host.state / "openclaw.json").read_text()) == host.config
    [line] = host.box.audit("oc")
    assert line["result"] == "refused" and line["reason"] == res.note
    assert line["action"] == "install" and line["from"] is None and line["to"] is None
    assert not [c for c in gw.calls if c[0] != "status"]  # nothing asked of the gateway


def test_with_the_flag_an_unproven_openclaw_is_deployed_and_the_result_says_so(
        tmp_path, gw, artifacts):
    host = _host(tmp_path, gw, artifacts, "2026.6.6")
    art = artifacts()
    res = host.box.deploy(art, hosts="oc", allow_unproven_openclaw=True)["oc"]
    assert res.result == "installed" and res.ok, res.note
    assert host.box.current("oc") == release_of(art)
    assert ("the running gateway here is OpenClaw 2026.6.6: OpenClaw 2026.6.6 is in the "
            "declared range (>=2026.4.24 up to 2026.9.6) but was not proven with this release "
            "(proven on 2026.4.24, 2026.9.6)") in res.note
    assert "deployed anyway (--allow-unproven-openclaw)" in res.note

    # A redeploy changes nothing, but says again that this pair was never proven.
    again = host.box.deploy(art, hosts="oc")["oc"]
    assert again.result == "refused" and not again.ok
    assert again.note.startswith(f"{release_of(art)} is active and ready here, but the running "
                                 "gateway here is OpenClaw 2026.6.6"), again.note
    assert "pass --allow-unproven-openclaw" in again.note
    accepted = host.box.deploy(art, hosts="oc", allow_unproven_openclaw=True)["oc"]
    assert accepted.result == "unchanged" and accepted.ok
    assert "deployed anyway (--allow-unproven-openclaw)" in accepted.note
    assert host.box.current("oc") == release_of(art)


def test_a_host_with_a_release_answers_with_its_running_gateways_version(
        tmp_path, gw, artifacts):
    """The lease take asks the active release's installer: the running gateway's version."""
    host = _host(tmp_path, gw, artifacts, "2026.9.6")
    assert host.box.deploy(artifacts(), hosts="oc")["oc"].result == "installed"
    gw.version = "2026.10.1"  # `openclaw update` on the host: the gateway runs the new one
    gw.answer("status", {"runtimeVersion": "2026.10.1"})
    bumped = artifacts(bump="5.0.1")
    stored = host.artifacts()
    res = host.box.deploy(bumped, hosts="oc")["oc"]
    assert res.result == "refused", res.note
    assert res.note.startswith("host oc: its running gateway is OpenClaw 2026.10.1: OpenClaw "
                               "2026.10.1 is newer than every release this one was proven on")
    assert host.artifacts() == stored  # the new release was never sent
    assert host.box.current("oc") == release_of(artifacts())
    assert host.box.audit("oc")[-1]["from"] == release_of(artifacts())


def test_status_and_doctor_show_the_openclaw_against_the_active_releases_proof(
        tmp_path, gw, artifacts):
    host = _host(tmp_path, gw, artifacts, "2026.9.6")
    assert host.box.deploy(artifacts(), hosts="oc")["oc"].result == "installed"

    def status():
        [res] = host.box.run("status", hosts="oc").values()
        console = Console(width=250, record=True)
        console.print(status_table([res], width=250))
        return res, console.export_text()

    res, table = status()
    assert res.status.openclaw_support == {
        "state": "proven", "version": "2026.9.6",
        "message": "OpenClaw 2026.9.6 is proven for this release (proven on 2026.4.24, "
                   "2026.9.6)"}
    assert res.as_dict()["data"]["openclaw_support"]["state"] == "proven"  # --json
    assert "2026.9.6: proven" in table
    [checked] = fleet_doctor.doctor(host.box.inventory.select("oc"), host.box.sink)
    assert {"check": "openclaw", "severity": "ok"}.items() <= _check(checked, "openclaw").items()

    host.set_version("2026.7.35")  # updated behind fleet's back: not proven for this release
    res, table = status()
    assert res.status.openclaw_support["state"] == "unproven"
    assert "2026.7.35: declared but unproven" in table
    assert "1 on an OpenClaw their release was not proven on" in status_summary([res], 0.1)
    [checked] = fleet_doctor.doctor(host.box.inventory.select("oc"), host.box.sink)
    found = _check(checked, "openclaw")
    assert found["severity"] == "warning" and checked.data["exit"] == 1
    assert found["message"].startswith("OpenClaw 2026.7.35 is in the declared range")
    deploy = f"fleet deploy -H oc --inventory {host.box.inventory.path}"  # works when pasted
    assert found["message"].endswith(f"fix: run `{deploy}`: it re-checks and converges, or "
                                     "pass --allow-unproven-openclaw")
    assert checked.data["openclaw_support"]["state"] == "unproven"  # doctor --json

    host.set_version("2026.10.1")
    res, table = status()
    assert "2026.10.1: outside the range" in table


def _check(result, name: str) -> dict:
    return next(c for c in result.data["checks"] if c["check"] == name)
