"""~/.ssh/config as a lower-priority default than the inventory (fleet.deploy.sshconfig)."""

from __future__ import annotations

import paramiko
import pytest

from fleet.deploy.inventory import parse
from fleet.deploy.sshconfig import load, resolve

CONFIG = """\
Host pi
  HostName 192.0.2.3
  Port 2202
  User administrator
  IdentityFile {key}
  UserKnownHostsFile {known} /other/known_hosts
  StrictHostKeyChecking accept-new
  ProxyJump ops@bastion:2222

Host bastion
  HostName 127.0.0.9
  User jumper
  Port 22

Host loose
  StrictHostKeyChecking no
"""


@pytest.fixture
def config(tmp_path):
    key = tmp_path / "id_pi"
    key.write_text("not really a key")
    path = tmp_path / "ssh_config"
    path.write_text(CONFIG.format(key=key, known=tmp_path / "kh"))
    return load(path), tmp_path


def host(tmp_path, text: str, name: str):
    return parse(text, tmp_path / "inventory.yaml").hosts[name]


def test_alias_is_resolved_like_ssh_would(config):
    cfg, tmp = config
    target = resolve(host(tmp, "hosts: {pi: {}}", "pi"), cfg)
    assert (target.hostname, target.port, target.user) == ("192.0.2.3", 2202, "administrator")
    assert target.identity_files == (str(tmp / "id_pi"),)
    assert target.known_hosts == str(tmp / "kh") and target.policy == "accept-new"
    jump = target.jump
    # the jump's own Host block applies, the ProxyJump spec's user and port win over it
    assert (jump.hostname, jump.port, jump.user) == ("127.0.0.9", 2222, "ops")
    assert jump.identity_files == ()  # the jump's block names no key


def test_the_inventory_wins_over_ssh_config(config, tmp_path):
    cfg, tmp = config
    text = ("hosts:\n  mypi: {host: pi, port: 22, user: opc, known_hosts: inv_kh, "
            "host_key_policy: strict, jump: 'other@gw:2200', identity_file: k}\n")
    target = resolve(host(tmp, text, "mypi"), cfg)
    assert target.hostname == "192.0.2.3"  # `host` is the name looked up: HostName maps it
    assert (target.port, target.user, target.policy) == (22, "opc", "strict")
    assert target.known_hosts == str(tmp / "inv_kh")
    assert target.identity_files == (str(tmp / "k"),)
    assert (target.jump.hostname, target.jump.port, target.jump.user) == ("gw", 2200, "other")
    assert target.jump.identity_files == (str(tmp / "k"),)


def test_vars_count_as_the_inventory_setting_them(config):
    cfg, tmp = config
    target = resolve(host(tmp, "vars: {user: deploy}\nhosts: {pi: {}}", "pi"), cfg)
    assert target.user == "deploy" and target.port == 2202


def test_no_entry_means_ssh_defaults_and_never_a_silent_accept(config):
    cfg, tmp = config
    plain = resolve(host(tmp, "hosts: {web: {host: web.invalid}}", "web"), cfg)
    assert (plain.hostname, plain.port, plain.user, plain.jump) == ("web.invalid", 22, None,
                                                                    None)
    assert plain.policy == "strict"
    loose = resolve(host(tmp, "hosts: {loose: {}}", "loose"), cfg)
    assert loose.policy == "strict"  # StrictHostKeyChecking no: fleet still refuses unknown keys


def test_config_file_comes_from_env_or_home(tmp_path, monkeypatch):
    from fleet.deploy.sshconfig import config_path
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host x\n  Port 1\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config_path({}) == tmp_path / ".ssh" / "config"
    assert config_path({"FLEET_SSH_CONFIG": ""}) is None
    assert isinstance(load(None), paramiko.SSHConfig)
