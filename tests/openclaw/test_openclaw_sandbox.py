"""Sandbox OpenClaw hosts: options filled from the toolchain, a first config on loopback, and a
clear error when the toolchain is missing (no real gateway needed)."""

from __future__ import annotations

import pytest

from fleet.deploy.inventory import parse
from lab.openclaw import sandbox, toolchain

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
    monkeypatch.setattr(toolchain, "find", lambda home=None: None)
    with pytest.raises(sandbox.SandboxError, match="invoke openclaw.install"):
        sandbox.resolve(hosts)
    assert sandbox.resolve(hosts[1:]) == hosts[1:]  # no sandbox host: no toolchain needed


def test_options_and_first_config(hosts, tmp_path, monkeypatch):
    fake = toolchain.Toolchain(root=tmp_path, node=tmp_path / "node", openclaw=tmp_path / "oc.mjs",
                               node_version="26.10.0", openclaw_version="2026.9.6")
    monkeypatch.setattr(toolchain, "find", lambda home=None: fake)
    oc, plain = sandbox.resolve(hosts)
    assert plain == hosts[1]
    opts = oc.manager_options
    assert opts["mode"] == "supervised" and opts["node"] == str(fake.node)
    assert opts["openclaw"] == str(fake.openclaw) and opts["home"].endswith("/oc/home")
    assert opts["env.OPENCLAW_DISABLE_BONJOUR"] == "1"
    config = sandbox.base_config(oc)
    assert config["gateway"] == {"mode": "local", "bind": "loopback", "port": 19001,
                                 "auth": {"mode": "none"}}
    provider = config["models"]["providers"]["fleet"]
    assert provider["baseUrl"] == "http://127.0.0.1:19002/v1"
    assert config["agents"]["defaults"]["heartbeat"] == {"every": "0m"}
    assert config["update"] == {"checkOnStart": False}
