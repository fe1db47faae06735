"""Racks: many light SSH hosts per container, for fleets of hundreds to a thousand hosts.

One harness host is one container with its own sshd, Python and gateway: about 30 MB each, so a
thousand of them do not fit beside the control side on one machine. A rack is one container of
the harness image running `per_rack` hosts side by side. Each host there is what the control side
meets on a real host:

- **its own sshd** (one daemon per host, started from a config of its own) listening on its own
  loopback port, with **its own ed25519 host key**, checked strictly against the run's
  known_hosts: every host costs a full key exchange, host-key check, authentication, channels and
  an upload, as a real one does;
- **its own state dir**, where the real host-side installer runs: lock, fleet lease, upload,
  SHA-256 check, unpack, atomic switch, audit, and readiness through the `command` gateway manager.

What is light is only the gateway behind the installer: its restart is one short Python process
(`fleet-light-gateway`) that writes the health answer the release's versions and name (what our
gateway's control socket answers), and its readiness probe reads it back. Nothing stays running per
host between deploys, so a thousand state dirs hold megabytes, not gigabytes.

The racks use the host's network namespace and bind each sshd to 127.0.0.1 only, so no Docker port
proxy sits between the control side and a host (a proxy per port would cost CPU a real fleet does
not) and nothing listens beyond loopback.
"""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from fleet.continuity.atomicfile import atomic_write
from fleet.continuity.statelayout import StateLayout
from lab.harness import cleanup, hosts, image, inventory, keys

USER = "opc"
HOME = "/home/opc"
READY_TIMEOUT_S = 300.0
# The racks' hosts share the cores they are given: at the peak of a deploy to a thousand of them a
# host gets a few hundredths of a core, so each step takes that much longer than on a host with a
# CPU of its own. The timeouts are sized to that test bed, not to a real host.
TIMEOUTS = {"connect": 60, "command": 900, "transfer": 300, "ready": 600}

# The stand-in gateway: one short process per restart that writes the health answer of the
# release it was started on (versions of the release's plugins, the release's name), atomically.
LIGHT_GATEWAY = r'''
import json, os
release = os.environ["FLEET_RELEASE"]
state = os.environ["FLEET_STATE_DIR"]
with open(os.path.join(release, @META@)) as f:
    meta = json.load(f)
plugins = meta.get("plugins") or {}
versions = {k: str(v) for k, v in (meta.get("components") or {}).items() if k in plugins}
health = {"pid": os.getpid(), "ready": True, "release": os.path.basename(release),
          "versions": versions, "plugins": {p: {"loaded": True} for p in plugins}}
path = os.path.join(state, "light-health.json")
with open(path + ".tmp", "w") as f:
    json.dump(health, f)
os.replace(path + ".tmp", path)
'''.replace("@META@", repr(StateLayout.RELEASE_META))

# PID 2 under the container's init: write the stand-in, then per host a host key, an sshd config
# and an sshd (daemonised; the init reaps it), then print every host's key and wait.
RACK_INIT = r'''
set -eu
mkdir -p -m 0755 /run/sshd /srv/rack
printf '%s\n' "$FLEET_LIGHT_GATEWAY" > /usr/local/bin/fleet-light-gateway
install -d -m 0700 -o opc -g opc /home/opc/.ssh /home/opc/hosts
printf '%s\n' "$FLEET_AUTHORIZED_KEY" > /home/opc/.ssh/authorized_keys
chown opc:opc /home/opc/.ssh/authorized_keys; chmod 0600 /home/opc/.ssh/authorized_keys
for port in $FLEET_RACK_PORTS; do
  d=/srv/rack/$port
  mkdir -p "$d"
  ssh-keygen -q -t ed25519 -N '' -f "$d/host_key"
  cat > "$d/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $d/host_key
PidFile $d/sshd.pid
PermitRootLogin no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
AuthorizedKeysFile .ssh/authorized_keys
Subsystem sftp internal-sftp
LogLevel ERROR
EOF
  /usr/sbin/sshd -f "$d/sshd_config"
done
echo "rack: $(echo $FLEET_RACK_PORTS | wc -w) sshd started"
exec sleep infinity
'''


@dataclass(frozen=True)
class RackHost:
    """One light host: inventory name, loopback port, `type base64` host key, state dir."""

    name: str
    port: int
    host_key: str

    @property
    def state_dir(self) -> str:
        return f"{HOME}/hosts/{self.name}"


@dataclass
class Racks:
    """The racks of one run and the files a deploy needs to reach their hosts."""

    client: object
    directory: Path
    run_id: str
    key: keys.ClientKey
    containers: list = field(default_factory=list)
    hosts: list[RackHost] = field(default_factory=list)

    @property
    def inventory_path(self) -> Path:
        return self.directory / "inventory.yaml"

    @property
    def known_hosts_path(self) -> Path:
        return self.directory / "known_hosts"

    def container_ids(self) -> list[str]:
        return [c.id for c in self.containers]

    def write_files(self) -> None:
        """known_hosts (one line per host's port) and the inventory: every host on the command
        manager whose restart is the stand-in gateway."""
        entries = [(h.port, h.host_key) for h in self.hosts]
        atomic_write(self.known_hosts_path, inventory.known_hosts_text(entries), 0o644)
        rows = [{"name": h.name, "port": h.port, "user": USER, "state_dir": h.state_dir}
                for h in self.hosts]
        data = inventory.inventory_data(rows, self.key.path, self.known_hosts_path)
        data["vars"]["timeouts"] = dict(TIMEOUTS)
        data["vars"]["gateway"] = {"manager": "command", "options": {
            "restart": "python3 -I -S /usr/local/bin/fleet-light-gateway",
            "probe": 'cat "$FLEET_STATE_DIR/light-health.json"'}}
        text = "# Generated by the fleet Docker harness: light hosts in racks.\n"
        atomic_write(self.inventory_path, text + yaml.safe_dump(data, sort_keys=False), 0o644)

    def close(self) -> list[str]:
        """Remove the racks' containers and the run's files."""
        removed = cleanup.remove_run(self.client, self.run_id)
        for path in (self.inventory_path, self.known_hosts_path):
            path.unlink(missing_ok=True)
        return removed


def host_name(rack: int, slot: int) -> str:
    """`r01-h007`: the rack and the host's place in it."""
    return f"r{rack:02d}-h{slot:03d}"


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports free now (each sshd binds its own a moment later)."""
    seen: set[int] = set()
    while len(seen) < count:
        seen.add(hosts.free_port())
    return sorted(seen)


def _start_rack(client, tag: str, labels: dict, key: keys.ClientKey, name: str,
                ports: list[int], cpuset: str | None) -> object:
    extra = {"cpuset_cpus": cpuset} if cpuset else {}
    container = client.containers.create(
        tag, command=["sh", "-c", RACK_INIT], name=name, hostname=name.rsplit("-", 1)[-1],
        labels={**labels, cleanup.HOST_NAME: name}, network_mode="host", init=True,
        environment={"FLEET_AUTHORIZED_KEY": key.public, "FLEET_LIGHT_GATEWAY": LIGHT_GATEWAY,
                     "FLEET_RACK_PORTS": " ".join(map(str, ports))},
        tmpfs={"/run": "rw,nosuid,nodev,size=16m"},
        pids_limit=64 + 12 * len(ports), **extra)
    container.start()
    return container


def _host_keys(container, timeout: float) -> dict[int, str]:
    """{port: 'ssh-ed25519 base64'} once every sshd of the rack listens."""
    deadline = time.monotonic() + timeout
    while True:
        container.reload()
        if container.status in ("exited", "dead"):
            raise hosts.HostError(f"rack {container.name} {container.status}:\n"
                                  f"{cleanup.container_logs(container, tail=40)}")
        if b"sshd started" in container.logs():
            break
        if time.monotonic() > deadline:
            raise hosts.HostError(f"rack {container.name}: sshd not started within "
                                  f"{timeout:.0f}s:\n{cleanup.container_logs(container, 40)}")
        time.sleep(0.5)
    script = "for d in /srv/rack/*; do echo \"${d##*/} $(cat $d/host_key.pub)\"; done"
    out = container.exec_run(["sh", "-c", script]).output.decode()
    found = {}
    for line in out.splitlines():
        port, kind, blob = line.split()[:3]
        found[int(port)] = f"{kind} {blob}"
    return found


def start(client, directory: Path, count: int, per_rack: int = 125, cpuset: str | None = None,
          run_id: str | None = None, log=print) -> Racks:
    """`count` light hosts in racks of `per_rack` (`cpuset`: the cores every rack runs on),
    written to `directory`'s inventory and known_hosts once every host answers with its SSH
    banner."""
    if count < 1 or per_rack < 1:
        raise ValueError("racks need at least one host each")
    cleanup.sweep_stale(client)
    tag = image.ensure_image(client, log=log).tag
    directory.mkdir(parents=True, exist_ok=True)
    run_id = run_id or uuid.uuid4().hex[:10]
    racks = Racks(client, directory, run_id, keys.generate_key(directory))
    labels = cleanup.run_labels(run_id, os.getpid())
    ports = free_ports(count)
    groups = [ports[i:i + per_rack] for i in range(0, count, per_rack)]
    started = time.monotonic()
    try:
        for n, group in enumerate(groups):
            racks.containers.append(_start_rack(client, tag, labels, racks.key,
                                                f"fleet-harness-{run_id}-rack{n:02d}", group,
                                                cpuset))
        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            found = list(pool.map(lambda c: _host_keys(c, READY_TIMEOUT_S), racks.containers))
        for n, (group, keys_of) in enumerate(zip(groups, found)):
            missing = [p for p in group if p not in keys_of]
            if missing:
                raise hosts.HostError(f"rack {n}: no host key for ports {missing[:5]}")
            racks.hosts += [RackHost(host_name(n, i), p, keys_of[p]) for i, p in enumerate(group)]
        deadline = time.monotonic() + READY_TIMEOUT_S
        waiting = list(racks.hosts)
        while waiting:
            waiting = [h for h in waiting if not hosts.banner_ok(h.port, timeout=2.0)]
            if waiting and time.monotonic() > deadline:
                raise hosts.HostError(f"{len(waiting)} rack hosts not answering, e.g. "
                                      f"{waiting[0].name} on port {waiting[0].port}")
            if waiting:
                time.sleep(0.5)
        racks.write_files()
    except BaseException:
        racks.close()
        raise
    log(f"racks: {count} hosts in {len(groups)} rack(s) up in {time.monotonic() - started:.1f}s")
    return racks

