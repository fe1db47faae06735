"""Racks of light hosts (the thousand-host benchmark's fleet): each host a real SSH server with
its own host key and state dir, deployed to through the `fleet` command line like any host."""

from __future__ import annotations

import json
import socket

import pytest
from onebox import fleet as _fleet

from lab.harness import rack
from lab.harness.run import docker_client

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def racks(tmp_path_factory):
    started = rack.start(docker_client(), tmp_path_factory.mktemp("racks"), 5, per_rack=3,
                         log=lambda *_: None)
    yield started
    started.close()


def test_each_host_is_its_own_ssh_server_on_loopback_with_its_own_key(racks):
    assert len(racks.hosts) == 5 and len(racks.containers) == 2
    assert len({h.host_key for h in racks.hosts}) == 5, "hosts must not share host keys"
    assert len({h.port for h in racks.hosts}) == 5
    for host in racks.hosts:  # bound to loopback only: nothing answers on another address
        with socket.create_connection(("127.0.0.1", host.port), timeout=5) as sock:
            assert sock.recv(64).startswith(b"SSH-2.0-")
    known = racks.known_hosts_path.read_text()
    assert all(f"[127.0.0.1]:{h.port} {h.host_key}\n" in known for h in racks.hosts)


def test_a_deploy_installs_on_every_host_and_a_swapped_key_is_refused(racks):
    cwd = racks.directory
    inv = str(racks.inventory_path)
    code, doc = _fleet(cwd, "deploy", "--inventory", inv, "-H", "all", "--yes")
    assert code == 0, doc
    assert sorted(h["host"] for h in doc["hosts"]) == sorted(h.name for h in racks.hosts)
    assert {h["result"] for h in doc["hosts"]} == {"installed"}
    code, doc = _fleet(cwd, "status", "--inventory", inv, "-H", "all")
    releases = {h["host"]: (h["data"].get("current") or {}).get("release") for h in doc["hosts"]}
    assert len(set(releases.values())) == 1 and None not in releases.values(), doc

    # the second host's line now carries the first host's key: strict checking refuses it alone
    first, second = racks.hosts[0], racks.hosts[1]
    text = racks.known_hosts_path.read_text()
    racks.known_hosts_path.write_text(text.replace(
        f"[127.0.0.1]:{second.port} {second.host_key}",
        f"[127.0.0.1]:{second.port} {first.host_key}"))
    try:
        code, doc = _fleet(cwd, "status", "--inventory", inv, "-H", f"{first.name},{second.name}")
        by_host = {h["host"]: h for h in doc["hosts"]}
        assert code != 0
        assert "host key" in json.dumps(by_host[second.name]).lower()
        assert by_host[first.name]["data"]["current"]["release"] == releases[first.name]
    finally:
        racks.known_hosts_path.write_text(text)
