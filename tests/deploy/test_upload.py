"""A new release costs each host one round trip to upload and install: the fleet lease's take
says what the host has of the artifact, and the upload is the stdin of the command that stores it
and runs the installer. A cut-off upload never leaves a file under the artifact's name."""

from __future__ import annotations

import pytest
from deploy_helpers import release_of

from fleet.deploy import api, commands, connection, lease
from fleet.deploy.connection import LocalConnection


@pytest.fixture
def sent(monkeypatch):
    """Every command the local connection runs, per host: ("run" | "send", first words)."""
    log: dict[str, list[str]] = {}
    run, send = LocalConnection.run, LocalConnection.send_and_run

    def counting_run(self, command, *args, **kw):
        log.setdefault(self.host.name, []).append("run")
        return run(self, command, *args, **kw)

    def counting_send(self, local, command, *args, **kw):
        log.setdefault(self.host.name, []).append("send")
        return send(self, local, command, *args, **kw)

    monkeypatch.setattr(LocalConnection, "run", counting_run)
    monkeypatch.setattr(LocalConnection, "send_and_run", counting_send)
    return log


def test_the_lease_take_says_what_each_host_has_of_the_artifact(sandbox, artifacts):
    base, bumped = artifacts(), artifacts(bump="5.0.1")
    sandbox.deploy(base, hosts="a,b")
    stored = sandbox.state("b") / "fleet" / "artifacts" / f"{bumped.sha256}.pyz"
    stored.write_bytes(bumped.path.read_bytes())  # b has the new release's file, not active
    hosts = sandbox.inventory.select("sandbox")

    def ask(art):
        held = lease.take(hosts, "tester", 60, artifact=(art.sha256, art.path.stat().st_size))
        lease.release(held)
        assert not held.refused and sorted(h.name for h in held.held) == ["a", "b", "c"]
        return held.artifact

    assert ask(bumped) == {"a": "missing", "b": "stored", "c": "missing"}
    assert ask(base) == {"a": "active", "b": "active", "c": "missing"}
    # the take leaves nothing but its lease (gone at its release): the upload makes the dir
    assert not (sandbox.state("c") / "fleet" / "artifacts").exists()
    no_probe = lease.take(hosts, "tester", 60)
    lease.release(no_probe)
    assert no_probe.artifact == {}  # rollback and restart do not ask


def test_a_new_release_is_uploaded_and_installed_in_one_command(sandbox, artifacts, sent):
    base = artifacts()
    results = sandbox.deploy(base)
    assert all(r.result == "installed" and r.data["uploaded"] for r in results.values())
    # lease take, upload + install (whose installer gives the lease back): the installer is
    # never asked first, and no release follows
    assert sent == dict.fromkeys(["a", "b", "c"], ["run", "send"])
    assert all({"upload", "install"} <= set(r.steps) for r in results.values())
    assert all(r.data.get("lease_given_back") is True for r in results.values())
    sent.clear()
    again = sandbox.deploy(base)
    assert all(r.result == "unchanged" for r in again.values())
    assert sent == dict.fromkeys(["a", "b", "c"], ["run"])  # the take alone: no upload


def test_a_stored_copy_of_the_right_size_but_wrong_bytes_is_uploaded_again(sandbox, artifacts):
    base, bumped = artifacts(), artifacts(bump="5.0.1")
    sandbox.deploy(base, hosts="a")
    stored = sandbox.state("a") / "fleet" / "artifacts" / f"{bumped.sha256}.pyz"
    data = bytearray(bumped.path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))  # right size, wrong bytes: never run, sent again
    res = sandbox.deploy(bumped, hosts="a")["a"]
    assert res.result == "installed" and res.data["uploaded"] is True, res.note
    assert stored.read_bytes() == bumped.path.read_bytes()
    assert sandbox.current("a") == release_of(bumped)


def test_an_upload_cut_short_leaves_no_artifact_and_runs_no_installer(sandbox, artifacts,
                                                                     tmp_path):
    art = artifacts()
    host = sandbox.inventory.hosts["a"]
    short = tmp_path / "short.pyz"
    short.write_bytes(art.path.read_bytes()[:5000])  # what arrived before the connection dropped
    conn = connection.connect(host)
    command = commands.upload_and_install(host, art.sha256, art.path.stat().st_size, "tester")
    res = conn.send_and_run(short, command, 30, 60)
    assert res.exit_code == 1 and res.stdout.split() == [commands.INCOMPLETE]
    artifacts_dir = sandbox.state("a") / "fleet" / "artifacts"
    assert list(artifacts_dir.iterdir()) == []  # neither the final name nor a temp file
    assert sandbox.current("a") is None  # no installer ran


def test_a_deploy_whose_upload_arrives_short_fails_naming_the_upload(sandbox, artifacts,
                                                                    monkeypatch, tmp_path):
    art = artifacts()
    real = LocalConnection.send_and_run

    def torn(self, local, command, *args, **kw):  # the host gets half the file, then EOF
        half = tmp_path / "half.pyz"
        half.write_bytes(local.read_bytes()[: local.stat().st_size // 2])
        return real(self, half, command, *args, **kw)

    monkeypatch.setattr(LocalConnection, "send_and_run", torn)
    res = sandbox.deploy(api.ArtifactRef(art.path, art.sha256, art.version, art.components),
                         hosts="a")["a"]
    assert not res.ok and f"a: upload of {art.path.name} failed" in res.note
    assert list((sandbox.state("a") / "fleet" / "artifacts").iterdir()) == []
    assert sandbox.current("a") is None


def test_an_artifacts_dir_the_host_cannot_make_fails_the_upload_saying_why(sandbox, artifacts):
    art = artifacts()
    state = sandbox.state("a") / "fleet"
    state.mkdir(parents=True)
    (state / "artifacts").write_text("not a dir")  # so mkdir -p fails, even for root
    res = sandbox.deploy(art, hosts="a")["a"]
    assert not res.ok and f"a: upload of {art.path.name} failed" in res.note
    assert "mkdir" in res.note and "artifacts" in res.note, res.note
    assert (state / "artifacts").read_text() == "not a dir" and sandbox.current("a") is None
