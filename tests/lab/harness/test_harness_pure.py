"""Pure parts of the harness (no Docker): names, cache keys, staleness, generated files, keys."""

from __future__ import annotations

import io
import json
import os

import paramiko
import pytest
import yaml

from fleet.continuity.atomicfile import atomic_write
from lab.harness import cleanup, hosts, image, inventory, keys


def test_default_hosts_are_a_cloud_vm_a_pi_and_edge_hosts():
    specs = hosts.default_specs(4)
    assert [(s.name, s.user) for s in specs] == [
        ("cloud", "opc"), ("pi", "administrator"), ("edge-1", "opc"), ("edge-2", "opc")]
    assert [s.suite for s in specs] == ["bookworm", "bullseye", "bookworm", "bookworm"]
    assert [s.flavor for s in specs[:2]] == ["bookworm", "bullseye"]
    systemd = hosts.HostSpec("svc", "opc", init="systemd")
    assert (systemd.flavor, systemd.manager) == ("bookworm+systemd", "systemd")
    fleet = hosts.fleet_specs(4)
    assert [(s.name, s.user, s.flavor) for s in fleet] == [
        ("cloud", "opc", "bookworm"), ("pi", "administrator", "bullseye"),
        ("claw", "opc", "bookworm+systemd+openclaw"), ("edge-1", "opc", "bookworm")]
    assert [s.name for s in hosts.fleet_specs(2)] == ["cloud", "pi"]
    assert image.SUITES["bullseye"] == "3.9", "the Pi's Debian is the host side's oldest Python"
    assert [s.name for s in hosts.default_specs(1)] == ["cloud"]
    assert specs[1].state_dir == "/home/administrator/.openclaw"
    with pytest.raises(ValueError):
        hosts.default_specs(0)


def test_rootfs_key_changes_with_every_input_and_only_then():
    base = image.RootfsSpec(arch="amd64", debootstrap_version="1.0")
    assert base.key() == image.RootfsSpec(arch="amd64", debootstrap_version="1.0").key()
    reordered = image.RootfsSpec(arch="amd64", debootstrap_version="1.0",
                                 packages=tuple(reversed(base.packages)))
    assert reordered.key() == base.key()
    variants = [
        image.RootfsSpec(arch="arm64", debootstrap_version="1.0"),
        image.RootfsSpec(arch="amd64", debootstrap_version="1.1"),
        image.RootfsSpec(arch="amd64", debootstrap_version="1.0", suite="trixie"),
        image.RootfsSpec(arch="amd64", debootstrap_version="1.0", mirror="http://m/debian"),
        image.RootfsSpec(arch="amd64", debootstrap_version="1.0",
                         packages=(*base.packages, "iptables")),
    ]
    assert len({v.key() for v in variants} | {base.key()}) == len(variants) + 1


def test_layer_key_depends_on_the_base():
    assert image.layer_key("a:1") != image.layer_key("a:2")
    assert image.layer_key("a:1") == image.layer_key("a:1")
    assert image.layer_key("a:1", "systemd") != image.layer_key("a:1", "tini")


def test_mirror_is_the_first_that_serves_the_suite(tmp_path, monkeypatch):
    monkeypatch.delenv("FLEET_HARNESS_MIRROR", raising=False)
    deb822 = tmp_path / "debian.sources"
    deb822.write_text("Types: deb\nURIs: http://mirror.example/debian-security\n"
                      "Suites: bookworm-security\n\n"
                      "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n")
    assert image.mirror_from_sources([deb822]) == "http://mirror.example/debian"
    ubuntu = tmp_path / "ubuntu.sources"
    ubuntu.write_text("Types: deb\nURIs: http://archive.ubuntu.com/ubuntu\nSuites: noble\n")
    legacy = tmp_path / "sources.list"
    legacy.write_text("# c\ndeb [arch=amd64] http://old.example/debian bookworm main\n")
    assert image.mirror_from_sources([ubuntu, tmp_path / "gone", legacy]) == \
        "http://old.example/debian"
    assert image.mirror_from_sources([ubuntu]) == image.DEFAULT_MIRROR
    monkeypatch.setenv("FLEET_HARNESS_MIRROR", "http://local.example/debian/")
    assert image.mirror_from_sources([deb822]) == "http://local.example/debian"


def test_cache_dir_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FLEET_HARNESS_CACHE", str(tmp_path / "c"))
    assert image.default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("FLEET_HARNESS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert image.default_cache_dir() == tmp_path / "x" / "fleet" / "harness"


def test_cached_rootfs_is_reused_without_debootstrap(tmp_path):
    spec = image.RootfsSpec(arch="amd64", debootstrap_version="1.0")
    cached = tmp_path / f"rootfs-{spec.key()}.tar"
    cached.write_bytes(b"tar")
    assert image.build_rootfs(spec, tmp_path, log=lambda *_: None) == cached


@pytest.mark.parametrize(
    ("labels", "stale"),
    [
        ({"lab.harness.owner-pid": "111", "lab.harness.created": "1000"}, True),
        ({"lab.harness.owner-pid": "222", "lab.harness.created": "1000"}, False),
        ({"lab.harness.owner-pid": "222", "lab.harness.created": "-99999"}, True),
        ({"lab.harness.owner-pid": "111", "lab.harness.created": "1000",
          "lab.harness.keep": "1"}, False),
        ({"lab.harness.owner-pid": "x", "lab.harness.created": "1000"}, True),
    ],
)
def test_staleness(labels, stale):
    assert cleanup.is_stale(labels, now=1100, alive=lambda pid: pid == 222) is stale


def test_own_pid_is_alive_and_a_free_pid_is_not():
    assert cleanup.pid_alive(os.getpid())
    assert not cleanup.pid_alive(0)


def test_run_labels_name_run_owner_and_time():
    labels = cleanup.run_labels("abc", 42, keep=True)
    assert labels[cleanup.RUN_ID] == "abc" and labels[cleanup.OWNER_PID] == "42"
    assert labels[cleanup.KEEP] == "1" and int(labels[cleanup.CREATED]) > 0
    assert cleanup.KEEP not in cleanup.run_labels("abc", 42)


def test_inventory_and_known_hosts_files(tmp_path):
    rows = [{"name": "cloud", "port": 2201, "user": "opc", "state_dir": "/home/opc/.openclaw"},
            {"name": "pi", "port": 2202, "user": "administrator",
             "state_dir": "/home/administrator/.openclaw"}]
    data = inventory.inventory_data(rows, tmp_path / "key", tmp_path / "kh")
    text = inventory.render_inventory(data)
    loaded = yaml.safe_load(text)
    assert loaded["hosts"]["pi"] == {"host": "127.0.0.1", "port": 2202, "user": "administrator",
                                     "state_dir": "/home/administrator/.openclaw"}
    assert loaded["groups"]["harness"]["hosts"] == ["cloud", "pi"]
    assert loaded["vars"]["host_key_policy"] == "strict"
    kh = inventory.known_hosts_text([(2202, "ssh-ed25519 BBB"), (2201, "ssh-ed25519 AAA")])
    assert kh == "[127.0.0.1]:2201 ssh-ed25519 AAA\n[127.0.0.1]:2202 ssh-ed25519 BBB\n"
    path = tmp_path / "sub" / "inv.yaml"
    atomic_write(path, text, 0o644)
    assert path.read_text() == text and not list(path.parent.glob(".*fleet-tmp*"))


def test_generated_key_is_private_loadable_and_unique(tmp_path):
    first = keys.generate_key(tmp_path / "a")
    second = keys.generate_key(tmp_path / "b")
    assert first.public != second.public
    assert oct(first.path.stat().st_mode & 0o777) == "0o600"
    loaded = paramiko.Ed25519Key.from_private_key(io.StringIO(first.path.read_text()))
    assert first.public.split()[1] == loaded.get_base64()
    assert keys.load_key(first.path) == first


def test_generated_inventory_loads_with_the_deploy_schema(tmp_path):
    deploy_inventory = pytest.importorskip("fleet.deploy.inventory")
    rows = [{"name": "cloud", "port": 2201, "user": "opc", "state_dir": "/home/opc/.openclaw"},
            {"name": "svc", "port": 2202, "user": "opc", "state_dir": "/home/opc/.openclaw",
             "manager": "systemd"}]
    data = inventory.inventory_data(rows, tmp_path / "key", tmp_path / "known_hosts")
    path = tmp_path / "inventory.yaml"
    path.write_text(inventory.render_inventory(data))
    loaded = deploy_inventory.load(path)
    host, svc = loaded.select("all")
    assert (host.host, host.port, host.user) == ("127.0.0.1", 2201, "opc")
    assert (host.manager, svc.manager) == ("fleet", "systemd")
    assert host.host_key_policy == "strict"
    assert host.known_hosts == str(tmp_path / "known_hosts")
    assert loaded.select("harness") == [host, svc]


def test_gateway_client_command_runs_the_deployed_release_with_quoted_args():
    import shlex

    from lab.harness import remote

    cmd = remote.client_command("/home/opc/.openclaw", "session.turn",
                                {"prompt": "it's $HOME; rm -rf /"})
    words = shlex.split(cmd)
    assert words[0] == "PYTHONPATH=/home/opc/.openclaw/fleet/current"
    assert words[1:6] == ["python3", "-m", "fleet.gateway", "--state-dir", "/home/opc/.openclaw"]
    assert words[6:8] == ["call", "session.turn"]
    assert words[8] == "--json-args"
    assert json.loads(words[9]) == {"prompt": "it's $HOME; rm -rf /"}


def test_gateway_response_is_the_json_line_the_client_printed():
    from lab.harness import remote

    assert remote.parse_response('noise\n{"ok": true, "result": 1}\n') == {"ok": True,
                                                                          "result": 1}
    assert remote.parse_response('{\n  "ok": false,\n  "error": "x"\n}') == {"ok": False,
                                                                             "error": "x"}
    with pytest.raises(remote.GatewayCallError):
        remote.parse_response("Traceback (most recent call last): ...")
