"""One connection per host for a whole run: the lease take, the deploy and the lease release
share it (each ssh handshake costs the control side and the host CPU and round trips)."""

from __future__ import annotations

import pytest

from fleet.deploy import connection
from fleet.deploy.inventory import Host


@pytest.fixture
def counted(monkeypatch):
    """Every connection fleet.deploy opens, in order (host names)."""
    opened: list[str] = []
    real = connection.connect

    def counting(host: Host):
        opened.append(host.name)
        return real(host)

    monkeypatch.setattr(connection, "connect", counting)
    return opened


def test_a_deploy_connects_once_per_host(sandbox, artifacts, counted):
    results = sandbox.deploy(artifacts())
    assert all(r.ok for r in results.values())
    assert sorted(counted) == ["a", "b", "c"]  # lease take, install, lease release: one each


def test_a_redeploy_and_a_restart_connect_once_per_host(sandbox, artifacts, counted):
    base = artifacts()
    sandbox.deploy(base)
    counted.clear()
    assert all(r.result == "unchanged" for r in sandbox.deploy(base).values())
    assert all(r.ok for r in sandbox.run("restart").values())
    assert sorted(counted) == ["a", "a", "b", "b", "c", "c"]


def test_a_dropped_connection_is_opened_again(sandbox, counted):
    conns = connection.Connections()
    host = sandbox.inventory.hosts["a"]
    first = conns.get(host)
    assert conns.get(host) is first
    conns.drop(host)
    again = conns.get(host)
    assert again is not first and again.run("echo hi", 10).stdout == "hi\n"
    conns.close()
    assert counted == ["a", "a"]
