"""~/.ssh/config as a lower-priority default than the inventory (fleet.deploy.sshconfig)."""

from __future__ import annotations

import pytest

from fleet.deploy.inventory import parse
from fleet.deploy.sshconfig import SshConfig, SshConfigError, load, resolve

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
    assert isinstance(load(None), SshConfig) and load(None).files == []


CHAIN = """\
Host app
  HostName 203.0.113.5
  User app
  ProxyJump ops@edge:2222,inner
Host edge
  HostName 192.0.2.1
  User edgeuser
  ProxyJump outer
Host inner
  HostName 203.0.113.1
  ProxyJump never-used
Host outer
  HostName 198.51.100.1
"""


def chain(target):
    out = []
    while target is not None:
        out.append(target.describe().split(" via ")[0])
        target = target.jump
    return out


def test_a_multi_hop_proxyjump_goes_through_every_hop_in_order(tmp_path):
    (tmp_path / "cfg").write_text(CHAIN)
    target = resolve(host(tmp_path, "hosts: {app: {}}", "app"), load(tmp_path / "cfg"))
    # app through inner, inner through edge, edge through its own ProxyJump (outer); inner's
    # own ProxyJump is not used (ssh -J gives every hop after the first its jump)
    assert chain(target) == ["app@203.0.113.5:22", "203.0.113.1:22", "ops@192.0.2.1:2222",
                             "198.51.100.1:22"]
    assert target.hops() == 3
    assert target.describe() == ("app@203.0.113.5:22 via 203.0.113.1:22 via ops@192.0.2.1:2222 "
                                 "via 198.51.100.1:22")


def test_an_inventory_jump_chain_and_none(tmp_path):
    (tmp_path / "cfg").write_text(CHAIN)
    cfg = load(tmp_path / "cfg")
    text = ("hosts:\n  a: {host: app, jump: 'x@127.0.0.9:2200,inner'}\n"
            "  b: {host: app, jump: none, state_dir: /b}\n")
    assert chain(resolve(host(tmp_path, text, "a"), cfg)) == [
        "app@203.0.113.5:22", "203.0.113.1:22", "x@127.0.0.9:2200"]
    assert resolve(host(tmp_path, text, "b"), cfg).jump is None


@pytest.mark.parametrize("text, where, what", [
    ("Host a\n  ProxyCommand nc %h %p\n", 2, "ProxyCommand is not supported"),
    ("Match exec \"test -f /x\"\n  Port 2\n", 1, "Match exec` is not supported"),
    ("Host *\n  Port 22\nMatch localnetwork 192.0.2.0/24\n  Port 2\n", 3,
     "Match localnetwork` is not supported"),
    ("Match hostname a\n", 1, "not a criterion"),
    ("Host a\n  Port 99999\n", 2, "not a TCP port"),
])
def test_what_fleet_cannot_follow_is_an_error_naming_file_and_line(tmp_path, text, where, what):
    (tmp_path / "cfg").write_text(text)
    with pytest.raises(ValueError) as info:
        resolve(host(tmp_path, "hosts: {a: {}}", "a"), load(tmp_path / "cfg"))
    message = str(info.value)
    assert f"{tmp_path / 'cfg'}:{where}" in message and what in message


def test_a_relative_include_is_under_home_ssh_and_a_loop_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh" / "conf.d").mkdir(parents=True)
    (tmp_path / ".ssh" / "conf.d" / "pi.conf").write_text("Host pi\n  User administrator\n")
    (tmp_path / ".ssh" / "config").write_text("Include conf.d/*.conf\n")
    cfg = load(tmp_path / ".ssh" / "config")
    assert resolve(host(tmp_path, "hosts: {pi: {}}", "pi"), cfg).user == "administrator"
    (tmp_path / ".ssh" / "config").write_text("Include ~/.ssh/config\n")
    with pytest.raises(ValueError, match="Include nested deeper than 16"):
        resolve(host(tmp_path, "hosts: {pi: {}}", "pi"), load(tmp_path / ".ssh" / "config"))


def test_identity_and_known_hosts_paths_expand_tokens(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "id_pi_admin").write_text("key")
    (tmp_path / "cfg").write_text("Host pi\n  HostName Pi.Example\n  User admin\n"
                                  "  IdentityFile ~/id_%n_%r\n  IdentityFile ~/missing\n"
                                  "  UserKnownHostsFile ${HOME}/kh_%h_%p\n")
    target = resolve(host(tmp_path, "hosts: {pi: {}}", "pi"), load(tmp_path / "cfg"))
    assert target.hostname == "pi.example"
    assert target.identity_files == (str(tmp_path / "id_pi_admin"),)  # only keys that exist
    assert target.known_hosts == str(tmp_path / "kh_pi.example_22")


def test_without_fleet_ssh_config_the_system_file_is_read_too(tmp_path, monkeypatch):
    from fleet.deploy import sshconfig
    monkeypatch.setenv("HOME", str(tmp_path))
    system = tmp_path / "ssh_config"
    system.write_text("Host *\n  Port 2222\n")
    monkeypatch.setattr(sshconfig, "SYSTEM_PATH", str(system))
    monkeypatch.delenv("FLEET_SSH_CONFIG", raising=False)
    assert resolve(host(tmp_path, "hosts: {x: {}}", "x")).port == 2222
    monkeypatch.setenv("FLEET_SSH_CONFIG", "")  # as ssh -F: that file alone (here: none)
    assert resolve(host(tmp_path, "hosts: {x: {}}", "x")).port == 22


def test_a_file_ssh_could_not_read_is_refused_when_loaded(tmp_path):
    (tmp_path / "cfg").write_text("Host a\n  HostName \"unclosed\n")
    with pytest.raises(ValueError, match=f"{tmp_path / 'cfg'}:2: a quote is not closed"):
        load(tmp_path / "cfg")


def test_a_jump_host_that_jumps_through_itself_is_an_error_not_a_hang(tmp_path):
    (tmp_path / "cfg").write_text("Host loop\n  ProxyJump loop\n")
    with pytest.raises(ValueError, match="host loop: .*more than 8 jump hosts"):
        resolve(host(tmp_path, "hosts: {loop: {}}", "loop"), load(tmp_path / "cfg"))


def cfg(tmp_path, text: str) -> SshConfig:
    path = tmp_path / "ssh_config_forms"
    path.write_text(text)
    return load(path)


def named(tmp_path, name: str):
    return host(tmp_path, f"hosts: {{{name}: {{}}}}", name)


def test_openssh_forms_of_values_ssh_accepts(tmp_path, monkeypatch):
    """A quoted path with a space is one path; `Port ssh` is port 22; a jump host as an
    ssh:// URI or with an IPv6 address in brackets (as `ssh -G` prints a hop)."""
    monkeypatch.setenv("KH_DIR", str(tmp_path))
    config = cfg(tmp_path, f"""\
Host quoted
  UserKnownHostsFile "{tmp_path}/with space/kh" /other/kh
Host envkh
  UserKnownHostsFile ${{KH_DIR}}/kh
Host svc
  Port ssh
Host uri
  ProxyJump ssh://ops@bastion.example:2222
Host v6
  ProxyJump ops@[::1]:2200
""")
    assert resolve(named(tmp_path, "quoted"), config).known_hosts == f"{tmp_path}/with space/kh"
    assert resolve(named(tmp_path, "envkh"), config).known_hosts == f"{tmp_path}/kh"
    assert resolve(named(tmp_path, "svc"), config).port == 22
    jump = resolve(named(tmp_path, "uri"), config).jump
    assert (jump.user, jump.hostname, jump.port) == ("ops", "bastion.example", 2222)
    jump = resolve(named(tmp_path, "v6"), config).jump
    assert (jump.user, jump.hostname, jump.port) == ("ops", "::1", 2200)


@pytest.mark.parametrize("text, says", [
    ("Host h\n  UserKnownHostsFile ${FLEET_TEST_UNSET_VAR}/kh\n",
     "environment variable ${FLEET_TEST_UNSET_VAR} is not set"),
    ("Host h\n  UserKnownHostsFile /tmp/kh ${FLEET_TEST_UNSET_VAR}\n",  # not the first file
     "environment variable ${FLEET_TEST_UNSET_VAR} is not set"),
    ("Host h\n  Port nosuchservice\n", "is not a TCP port (1-65535) nor a service name"),
    ("Host h\n  ProxyJump ssh://ops@[::1]:2222\n", "no IPv6 address in an ssh:// jump host"),
    ("Host h\n  ProxyJump ssh://ops@bastion/path\n", "has no path"),
    ("Host h\n  ProxyJump ops@[::1\n", "is not a jump host"),
    ("Host h\n  ProxyJump a,,b\n", "'' is not a jump host"),
    ("Host\n", "Host needs a value"),
    ("Host other\n  IdentityFile\n", "IdentityFile needs a value"),  # in any block, as ssh
    ("Host h\n  User a b\n", "User takes one value, not 2"),
    ("Host h\n  StrictHostKeyChecking maybe\n", "StrictHostKeyChecking 'maybe': use one of"),
    ("Host h\n  Include\n", "Include needs a value"),
])
def test_values_ssh_refuses_are_errors_naming_file_and_line(tmp_path, monkeypatch, text, says):
    """What `ssh -G` refuses (each case checked against it when written) is an error naming
    the file and line, never a silent other reading."""
    monkeypatch.delenv("FLEET_TEST_UNSET_VAR", raising=False)
    with pytest.raises(SshConfigError) as info:
        resolve(named(tmp_path, "h"), cfg(tmp_path, text))
    assert says in str(info.value) and "ssh_config_forms:" in str(info.value), str(info.value)
