"""Sandbox OpenClaw hosts: options filled from the toolchain, a first config on loopback, and a
clear error when the toolchain is missing (no real gateway needed)."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fleet.continuity import detached
from fleet.deploy.inventory import parse
from lab.openclaw import sandbox, toolchain

REPO = Path(__file__).resolve().parents[2]

INVENTORY = """
hosts:
  oc: {connection: local, state_dir: oc, gateway: {manager: openclaw,
       options: {sandbox: "true", port: "19001", model_port: "19002"}}}
  plain: {connection: local, state_dir: plain}
"""


@pytest.fixture
def hosts(tmp_path):
    return parse(INVENTORY, tmp_path / "inventory.yaml").select("oc,plain")


def test_missing_toolchain_says_what_to_run(hosts, monkeypatch):
    monkeypatch.setattr(toolchain, "find", lambda home=None, version=None: None)
    with pytest.raises(sandbox.SandboxError, match="invoke openclaw.install"):
        sandbox.resolve(hosts)
    assert sandbox.resolve(hosts[1:]) == hosts[1:]  # no sandbox host: no toolchain needed


def test_an_install_whose_plugin_dependencies_were_not_staged_is_not_used(hosts, tmp_path,
                                                                         monkeypatch):
    fake = toolchain.Toolchain(root=tmp_path / "oc", node=tmp_path / "node",
                               openclaw=tmp_path / "oc.mjs", node_version="26.10.0",
                               openclaw_version="2026.9.6")
    monkeypatch.setattr(toolchain, "find", lambda home=None, version=None: fake)
    with pytest.raises(sandbox.SandboxError,
                       match=r"run `invoke openclaw.install --version 2026.9.6` first"):
        sandbox.resolve(hosts)
    fake.stage_dir.mkdir(parents=True)
    (fake.stage_dir / toolchain.STAGED_MARKER).write_text("staged")
    oc = sandbox.resolve(hosts)[0]
    assert oc.manager_options["env.OPENCLAW_PLUGIN_STAGE_DIR"] == str(fake.stage_dir)


def test_options_and_first_config(hosts, tmp_path, monkeypatch):
    fake = toolchain.Toolchain(root=tmp_path, node=tmp_path / "node", openclaw=tmp_path / "oc.mjs",
                               node_version="26.10.0", openclaw_version="2026.9.6")
    monkeypatch.setattr(toolchain, "find", lambda home=None, version=None: fake)
    monkeypatch.setattr(toolchain, "staged", lambda tool: True)
    oc, plain = sandbox.resolve(hosts)
    assert plain == hosts[1]
    opts = oc.manager_options
    assert opts["mode"] == "supervised" and opts["node"] == str(fake.node)
    assert opts["openclaw"] == str(fake.openclaw) and opts["home"].endswith("/oc/home")
    assert opts["env.OPENCLAW_DISABLE_BONJOUR"] == "1"
    config = sandbox.base_config(oc)
    auth = config["gateway"].pop("auth")
    assert config["gateway"] == {"mode": "local", "bind": "loopback", "port": 19001}
    assert auth["mode"] == "token" and len(auth["token"]) >= 32
    assert sandbox.base_config(oc)["gateway"]["auth"] != auth  # a token of its own per host
    assert opts["env.HTTPS_PROXY"] == "http://127.0.0.1:9"  # no request leaves this machine
    provider = config["models"]["providers"]["fleet"]
    assert provider["baseUrl"] == "http://127.0.0.1:19002/v1"
    assert config["agents"]["defaults"]["heartbeat"] == {"every": "0m"}
    assert config["update"] == {"checkOnStart": False}


def _sandbox_host(tmp_path, model_port: int, **extra: str):
    options = {"sandbox": "true", "port": "19001", "model_port": str(model_port), **extra}
    text = ("hosts:\n  oc: {connection: local, state_dir: oc, gateway: {manager: openclaw, "
            f"options: {json.dumps(options)}}}}}\n")
    return parse(text, tmp_path / "inventory.yaml").select("oc")[0]


class _Impostor(http.server.BaseHTTPRequestHandler):
    """Something else on the model's port that also answers /health with ok."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_port_another_process_answers_on_is_not_taken_for_the_model(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Impostor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host = _sandbox_host(tmp_path, server.server_address[1])
        with pytest.raises(sandbox.SandboxError,
                           match=rf"127.0.0.1:{server.server_address[1]} \(its model_port\) is "
                                 "taken by another process; stop it or give this host another"):
            sandbox.prepare([host])
        assert detached.recorded_pid(sandbox.model_files(host)["pid"]) is None
    finally:
        server.shutdown()
        server.server_close()


def test_the_hosts_own_model_is_reused_and_stopped(tmp_path):
    host = _sandbox_host(tmp_path, sandbox.free_port())
    try:
        sandbox.prepare([host])
        pid = detached.recorded_pid(sandbox.model_files(host)["pid"])
        assert pid is not None and sandbox.answering_model(int(host.manager_options["model_port"]))
        sandbox.prepare([host])
        assert detached.recorded_pid(sandbox.model_files(host)["pid"]) == pid  # reused
    finally:
        assert sandbox.stop_model(host) == "terminated"
    assert not detached.alive(pid)


FAKE_OLD_OPENCLAW = """
import sys
if sys.argv[1:] == ["--version"]:
    print("OpenClaw 2026.3.28 (old)")
else:
    sys.exit(9)
"""


@pytest.mark.openclaw
def test_a_refused_deploy_leaves_no_model_running(tmp_path, artifacts):
    """A deploy the host refuses (here: its OpenClaw is older than the release supports)
    starts no gateway, so the scripted model the task started for it is stopped again."""
    old = tmp_path / "openclaw.py"
    old.write_text(FAKE_OLD_OPENCLAW)
    port = sandbox.free_port()
    host = _sandbox_host(tmp_path, port, node=sys.executable, openclaw=str(old))
    (tmp_path / "inventory.yaml").write_text(
        "hosts:\n  oc: {connection: local, state_dir: .fleet/oc, gateway: {manager: openclaw, "
        f"options: {json.dumps(dict(host.manager_options))}}}}}\n")
    art = artifacts()
    proc = subprocess.run([sys.executable, "-m", "invoke", "-r", str(REPO), "deploy",
                           "--inventory", str(tmp_path / "inventory.yaml"), "-H", "oc",
                           "--artifact", str(art.path), "--json"],
                          capture_output=True, text=True, timeout=600)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["hosts"][0]["result"] == "refused", proc.stdout
    assert "OpenClaw 2026.3.28 is older than this release supports" in doc["hosts"][0]["note"]
    model = tmp_path / ".fleet" / "oc" / "model" / "model.pid"
    assert model.exists()  # the task had started it
    assert detached.recorded_pid(model) is None
    assert sandbox.answering_model(port) is None
