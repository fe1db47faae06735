"""A rollout on Temporal shared by a worker on this machine and a worker on another one.

The other machine is a container (lab.harness.siteworker): its own filesystem, hostname and
processes, its own copy of the checkout, inventory and artifacts, on this machine's loopback
only. Site `default` is served here, site `home` there; the `home` hosts are that machine's own
local hosts, whose state exists only inside it. One `fleet deploy --engine temporal` started here
rolls the release out across both sites."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from deploy_helpers import release_of
from rollout_fleet import Fleet, Worker

from fleet.continuity.statelayout import StateLayout
from fleet.deploy import rollout, temporalengine, temporalserver
from lab.harness import rack, siteworker
from lab.harness.run import docker_client

pytestmark = [pytest.mark.docker, pytest.mark.temporal]
WAIT_S = 120.0
OFFICE = ["h01", "h03", "h05"]  # site `default`: this machine's sandbox hosts
HOME = ["h02", "h04", "h06"]  # site `home`: the other machine's own hosts
NAMES = sorted(OFFICE + HOME)


def inventory() -> str:
    """The inventory of both machines: the same host names; a local host is the machine's own
    (its state dir beside that machine's inventory), so each site's hosts are reachable on
    the machine of its worker."""
    hosts = "\n".join(f"  {n}: {{state_dir: .fleet/hosts/{n}, "
                      f"site: {'home' if n in HOME else 'default'}}}" for n in NAMES)
    return ("vars: {connection: local, gateway: {manager: fleet}, "
            "timeouts: {ready: 30, command: 120}}\n"
            f"hosts:\n{hosts}\n"
            f"groups:\n  office: {{hosts: [{', '.join(OFFICE)}]}}\n"
            f"  home: {{hosts: [{', '.join(HOME)}]}}\n")


@pytest.fixture
def two_sites(tmp_path, artifacts, temporal_server):
    """This machine's fleet with a worker of site `default`, and site `home` on another machine
    with its own worker; both sites on the base release. Removed at the end, also on failure."""
    base, new = artifacts(), artifacts("6.2.0")
    box = Fleet(tmp_path, len(NAMES))
    box.site = "default"
    (tmp_path / "inventory.yaml").write_text(inventory())
    box.env["TEMPORAL_ADDRESS"] = temporal_server.address
    workers: list[Worker] = []
    client = docker_client()
    home = None
    try:
        home = siteworker.start(client, "home", inventory(), [base.path, new.path],
                                temporal_server.address)
        code, out, err = box.run("deploy", "--artifact", str(base.path), "-H", "office")
        assert code == 0, out + err
        code, out, err = home.fleet("deploy", "--artifact", str(base.path), "-H", "home")
        assert code == 0, out + err
        workers.append(Worker(box, "office"))
        yield box, home, base, new
    finally:
        _close(workers, box, home)
        client.close()


def _close(workers: list, box, home) -> None:
    """Stop this machine's workers and server, then the other machine (its log printed: shown
    with a failing test's report)."""
    for worker in workers:
        worker.kill()
    box.stop()
    if home is not None:
        logs = home.logs()
        home.close()
        print(logs)


def _home_current(home: siteworker.Site, name: str) -> str | None:
    code, out, _ = home.run(["readlink", str(StateLayout(siteworker.ROOT / ".fleet" / "hosts"
                                                          / name).current)])
    return Path(out.strip()).name if code == 0 else None


def _home_audit(home: siteworker.Site, name: str) -> list[dict]:
    text = home.read_text(StateLayout(siteworker.ROOT / ".fleet" / "hosts" / name).audit)
    return [json.loads(line) for line in (text or "").splitlines()]


def _installs(audit: list[dict], release: str) -> int:
    return sum(1 for e in audit if e.get("action") == "install" and e.get("to") == release)


def _served_by(box: Fleet, rid: str) -> dict[str, set[str]]:
    """Site queue -> the machines (hostnames in the workers' identities) that ran its hosts'
    transactions, from the rollout's history on the server."""
    events = json.loads(temporalengine.history(
        temporalserver.Server(box.env["TEMPORAL_ADDRESS"]), rid))["events"]
    scheduled = {e["eventId"]: e["activityTaskScheduledEventAttributes"] for e in events
                 if "activityTaskScheduledEventAttributes" in e}
    served: dict[str, set[str]] = {}
    for event in events:
        started = event.get("activityTaskStartedEventAttributes")
        if started is None:
            continue
        task = scheduled[started["scheduledEventId"]]
        if task["activityType"]["name"] == "fleet.deploy":
            machine = started["identity"].split("@", 1)[1].split()[0]
            served.setdefault(task["taskQueue"]["name"], set()).add(machine)
    return served


def test_one_deploy_rolls_out_across_a_site_here_and_a_site_on_another_machine(two_sites):
    box, home, base, new = two_sites
    target = release_of(new)
    assert all(_home_current(home, n) == release_of(base) for n in HOME)
    out_path, err_path = box.root / "deploy.out", box.root / "deploy.err"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        run = subprocess.Popen(
            box.command("deploy", "--artifact", str(new.path), "--waves", "1,3,100%",
                        "--bake", "2s", "--engine", "temporal", "-H", "office,home", "--json"),
            cwd=box.root, env=box.environ(), stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    try:
        end = time.monotonic() + WAIT_S
        while "baking:" not in err_path.read_text():
            assert run.poll() is None, err_path.read_text()
            assert time.monotonic() < end, err_path.read_text()
            time.sleep(0.2)
        rid = err_path.read_text().split("rollout ", 1)[1].split()[0]
        code, shown, err = box.run("status", "-H", "office")
        assert f"rollout {rid} " in shown and "(temporal," in shown, shown + err
        run.wait(timeout=WAIT_S)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
    assert run.returncode == 0, err_path.read_text()
    doc = json.loads(out_path.read_text())
    assert doc["rollout"]["state"] == "completed", doc
    assert doc["rollout"]["stands"] == {target: NAMES}, doc
    # this machine's hosts: on the release, installed once, by this machine's worker
    assert all(box.current(n) == target and box.installs(n, target) == 1 for n in OFFICE)
    # the other machine's hosts: their state is there only, on the release, installed once
    assert not any((box.root / ".fleet" / "hosts" / n).exists() for n in HOME)
    assert all(_home_current(home, n) == target for n in HOME)
    audits = {n: _home_audit(home, n) for n in HOME}
    assert all(_installs(a, target) == 1 for a in audits.values()), audits
    assert all(rid in str(a[-1].get("who")) for a in audits.values()), audits
    code, out, err = home.fleet("status", "-H", "home", "--json")
    assert code == 0, out + err
    releases = {h["host"]: (h["data"].get("current") or {}).get("release")
                for h in json.loads(out)["hosts"]}
    assert releases == {n: target for n in HOME}, out
    # who ran each site's transactions, as the server recorded it
    served = _served_by(box, rid)
    assert served["fleet-site-home"] == {home.hostname}, served
    assert home.hostname not in served["fleet-site-default"], served


def _ssh_home_inventory(racks: rack.Racks, key: str | None, known_hosts: str | None) -> str:
    """An inventory of this machine's sandbox hosts (site `default`) and the rack's SSH hosts
    (site `home`), which only a machine holding `key` reaches (None: this machine, without it)."""
    data = yaml.safe_load(racks.inventory_path.read_text())
    home = data["vars"]  # the rack's: ssh to 127.0.0.1, its key, known_hosts, stand-in gateway
    home.pop("identity_file")
    home.pop("known_hosts")
    if key is not None:
        home.update(identity_file=key, known_hosts=known_hosts)
    data["vars"] = {"connection": "local", "gateway": {"manager": "fleet"},
                    "timeouts": {"ready": 30, "command": 120}}
    for name in OFFICE:
        data["hosts"][name] = {"state_dir": f".fleet/hosts/{name}"}
    data["groups"] = {"office": {"hosts": list(OFFICE)},
                      "home": {"hosts": [h.name for h in racks.hosts],
                               "vars": {**home, "site": "home"}}}
    return yaml.safe_dump(data, sort_keys=False)


@pytest.fixture
def home_behind_ssh(tmp_path, artifacts, temporal_server):
    """Site `home`: three SSH hosts (a rack of the harness) whose key only the home machine
    holds, and its first worker, which dies right after a wave-2 host's installer switched it
    (before it could report); site `default` as in `two_sites`. Removed at the end."""
    base, new = artifacts(), artifacts("6.2.1")
    client = docker_client()
    racks = rack.start(client, tmp_path / "rack", len(HOME), per_rack=len(HOME),
                       log=lambda *_: None)
    box = Fleet(tmp_path, len(OFFICE))
    box.names = list(OFFICE)
    box.site = "default"
    (tmp_path / "inventory.yaml").write_text(_ssh_home_inventory(racks, None, None))
    box.env["TEMPORAL_ADDRESS"] = temporal_server.address
    files = {"/srv/site/id_ed25519": (racks.key.path.read_bytes(), 0o600),
             "/srv/site/known_hosts": (racks.known_hosts_path.read_bytes(), 0o644)}
    workers: list[Worker] = []
    home = None
    try:
        home = siteworker.start(
            client, "home",
            _ssh_home_inventory(racks, "/srv/site/id_ed25519", "/srv/site/known_hosts"),
            [base.path, new.path], temporal_server.address, files=files,
            env={rollout.CRASH_ENV: "wave-2-host"})
        code, out, err = box.run("deploy", "--artifact", str(base.path), "-H", "office")
        assert code == 0, out + err
        code, out, err = home.fleet("deploy", "--artifact", str(base.path), "-H", "home",
                                    "--yes")
        assert code == 0, out + err
        workers.append(Worker(box, "office"))
        yield box, home, racks, new
    finally:
        _close(workers, box, home)
        racks.close()
        client.close()


def _rack_audit(racks: rack.Racks, host: rack.RackHost) -> list[dict]:
    path = StateLayout(Path(host.state_dir)).audit
    result = racks.containers[0].exec_run(["cat", str(path)])
    return [json.loads(line) for line in result.output.decode().splitlines()]


def test_the_other_machine_lost_mid_host_another_one_of_its_site_finishes_the_rollout(
        home_behind_ssh):
    box, home, racks, new = home_behind_ssh
    target = release_of(new)
    first = home.hostname
    names = sorted(OFFICE + [h.name for h in racks.hosts])
    out_path, err_path = box.root / "deploy.out", box.root / "deploy.err"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        run = subprocess.Popen(
            box.command("deploy", "--artifact", str(new.path), "--waves", "1,4,100%",
                        "--engine", "temporal", "-H", "office,home", "--yes", "--json"),
            cwd=box.root, env=box.environ(), stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    try:
        end = time.monotonic() + WAIT_S  # until the home machine's worker dies mid-host
        while home.container.status != "exited":
            assert run.poll() is None, err_path.read_text() + home.logs()
            assert time.monotonic() < end, err_path.read_text() + home.logs()
            time.sleep(0.2)
            home.container.reload()
        second = home.start_worker()  # another machine of the site takes its hosts
        run.wait(timeout=WAIT_S)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
    assert run.returncode == 0, err_path.read_text() + home.logs()
    doc = json.loads(out_path.read_text())
    rid = doc["rollout"]["id"]
    assert doc["rollout"]["state"] == "completed", doc
    assert doc["rollout"]["stands"] == {target: names}, doc
    # the hosts the lost machine had in flight (their installers go on over a dropped SSH
    # session) were read by the next one, not deployed again
    read = {h["host"] for h in doc["hosts"] if "finished by the run before" in h["note"]}
    assert read and read <= {h.name for h in racks.hosts}, doc
    assert all(box.current(n) == target and box.installs(n, target) == 1 for n in OFFICE)
    audits = {h.name: _rack_audit(racks, h) for h in racks.hosts}
    assert all(_installs(a, target) == 1 for a in audits.values()), audits
    # the lost machine reported none of its transactions: the server has every home host's
    # from the second machine (the attempt that ended), none from this one
    served = _served_by(box, rid)
    assert served["fleet-site-home"] == {second} and first != second, served
    assert second not in served["fleet-site-default"], served
