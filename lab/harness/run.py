"""A harness run: its id, key, hosts and generated files, from start to removal.

One object ties together what a test session (or `harness.up`) owns: the run id and owner pid put
on every container, the per-run client key, the hosts, and the directory holding `inventory.yaml`,
`known_hosts`, the key and `harness.json` (so `harness.status` and `harness.down` find the run).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.continuity.atomicfile import atomic_write
from lab.harness import cleanup, hosts, image, inventory, keys, ssh

if TYPE_CHECKING:  # the docker SDK is an optional extra: import it only where it is used
    import docker

STATE_FILE = "harness.json"


def docker_client(timeout: int = 120) -> docker.DockerClient:
    """A docker client with a pool big enough for parallel host starts (pitfall 15)."""
    import docker  # noqa: PLC0415

    client = docker.from_env(timeout=timeout, max_pool_size=32)
    client.ping()
    return client


class Harness:
    """The hosts of one run plus the files a deploy needs to reach them."""

    def __init__(self, client, directory: Path, run_id: str | None = None,
                 owner_pid: int | None = None, keep: bool = False,
                 images: dict[str, str] | None = None,
                 key: keys.ClientKey | None = None) -> None:
        self.client = client
        self.directory = Path(directory)
        self.run_id = run_id or uuid.uuid4().hex[:10]
        self.owner_pid = os.getpid() if owner_pid is None else owner_pid
        self.keep = keep
        self.images: dict[str, str] = dict(images or {})  # HostSpec.flavor -> host image tag
        self.key = key
        self.hosts: dict[str, hosts.Host] = {}
        self.routes: dict[str, int] = {}  # host -> loopback port the inventory dials instead

    # files -------------------------------------------------------------------------------
    @property
    def inventory_path(self) -> Path:
        return self.directory / "inventory.yaml"

    @property
    def known_hosts_path(self) -> Path:
        return self.directory / "known_hosts"

    @property
    def name_prefix(self) -> str:
        return f"fleet-harness-{self.run_id}"

    def write_files(self) -> None:
        """(Re)write known_hosts, inventory and harness.json for the current hosts."""
        ready = [h for h in self.hosts.values() if h.host_key]
        entries = [(h.port, h.host_key) for h in ready]
        entries += [(self.routes[h.name], h.host_key) for h in ready if h.name in self.routes]
        atomic_write(self.known_hosts_path, inventory.known_hosts_text(entries), 0o644)
        rows = [
            {"name": h.name, "port": self.routes.get(h.name, h.port), "user": h.user,
             "state_dir": h.state_dir, "manager": h.spec.manager}
            for h in self.hosts.values()
        ]
        for row, h in zip(rows, self.hosts.values()):
            if h.spec.openclaw:
                from lab.harness import openclawlayer  # noqa: PLC0415

                row["options"] = openclawlayer.gateway_options()
                row["timeouts"] = dict(openclawlayer.TIMEOUTS)
        data = inventory.inventory_data(rows, self.key.path, self.known_hosts_path)
        atomic_write(self.inventory_path, inventory.render_inventory(data), 0o644)
        state = {
            "run_id": self.run_id,
            "owner_pid": self.owner_pid,
            "keep": self.keep,
            "images": self.images,
            "key": str(self.key.path),
            "hosts": [
                {
                    "name": h.name,
                    "user": h.user,
                    "port": h.port,
                    "container": h.container.id,
                    "state_tmpfs_mb": h.spec.state_tmpfs_mb,
                    "suite": h.spec.suite,
                    "init": h.spec.init,
                    "openclaw": h.spec.openclaw,
                    "host_key": h.host_key,
                }
                for h in self.hosts.values()
            ],
        }
        atomic_write(self.directory / STATE_FILE, json.dumps(state, indent=2) + "\n", 0o644)

    def set_routes(self, routes: dict[str, int]) -> None:
        """Make the inventory dial these loopback ports (e.g. lab.harness.network links in
        front of the hosts) instead of the hosts' own; known_hosts lists both. {} undoes it."""
        unknown = sorted(set(routes) - set(self.hosts))
        if unknown:
            raise hosts.HostError(f"no host {', '.join(unknown)} in run {self.run_id}")
        self.routes = dict(routes)
        self.write_files()

    # lifecycle ---------------------------------------------------------------------------
    @property
    def image_tag(self) -> str:
        """The default (bookworm) host image of the run."""
        return self.images.get(image.DEFAULT_SUITE, "")

    def ensure_images(self, specs: list[hosts.HostSpec], log=print) -> list[image.ImageBuild]:
        """Make sure the image of every spec's flavor (suite + init) exists (built if not)."""
        builds = []
        for spec in specs:
            if spec.flavor not in self.images:
                build = image.ensure_image(self.client, suite=spec.suite, init=spec.init,
                                           log=log)
                if spec.openclaw:
                    from lab.harness import openclawlayer  # noqa: PLC0415

                    build.tag = openclawlayer.ensure_layer(self.client, build.tag,
                                                           image.default_cache_dir(), log=log)
                self.images[spec.flavor] = build.tag
                builds.append(build)
        return builds

    def prepare(self, log=print, specs: list[hosts.HostSpec] | None = None
                ) -> list[image.ImageBuild]:
        """Sweep stale runs, make sure the images exist, generate this run's key."""
        swept = cleanup.sweep_stale(self.client)
        if swept:
            log(f"harness: removed {len(swept)} stale container(s): {', '.join(swept)}")
        builds = self.ensure_images(specs or [hosts.HostSpec("default", "opc")], log=log)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.key = keys.generate_key(self.directory)
        return builds

    def start_hosts(self, specs: list[hosts.HostSpec],
                    timeout: float = hosts.READY_TIMEOUT_S) -> list[hosts.Host]:
        """Start hosts in parallel and return once every one passed the readiness gate."""
        labels = cleanup.run_labels(self.run_id, self.owner_pid, keep=self.keep)
        for spec in specs:
            if spec.name in self.hosts:
                raise hosts.HostError(f"host {spec.name} already exists in run {self.run_id}")
        self.ensure_images(specs)

        def create(spec: hosts.HostSpec) -> hosts.Host:
            return hosts.create_host(
                self.client, self.images[spec.flavor], spec, labels, self.key.public,
                self.name_prefix
            )

        workers = max(1, len(specs))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            started = list(pool.map(create, specs))
        for host in started:  # in spec order, so files list hosts as asked
            self.hosts[host.name] = host
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(lambda h: hosts.wait_listening(h, timeout=timeout), started))
        self.write_files()
        with ThreadPoolExecutor(max_workers=max(1, len(started))) as pool:
            list(pool.map(lambda h: hosts.check_login(h, self.key.path, self.known_hosts_path),
                          started))
        claws = [h.name for h in started if h.spec.openclaw]
        if claws:  # OpenClaw's own service, installed once as on a real host
            from lab.harness import openclawlayer  # noqa: PLC0415

            with ThreadPoolExecutor(max_workers=len(claws)) as pool:
                list(pool.map(lambda n: openclawlayer.prepare_host(self, n), claws))
        return started

    def restart_host(self, host: hosts.Host, timeout: float = hosts.READY_TIMEOUT_S) -> None:
        """Start a killed/stopped host again (same port, same host key) and wait until ready."""
        since = time.time()
        host.container.start()
        hosts.wait_listening(host, timeout=timeout, since=since)
        self.write_files()
        hosts.check_login(host, self.key.path, self.known_hosts_path)

    def close(self, logs_dir: Path | None = None) -> list[str]:
        """Remove every container of the run (logs saved first when asked) and the run files."""
        removed = cleanup.remove_run(self.client, self.run_id, logs_dir=logs_dir)
        for name in ("inventory.yaml", "known_hosts", STATE_FILE):
            (self.directory / name).unlink(missing_ok=True)
        self.hosts.clear()
        return removed

    # access ------------------------------------------------------------------------------
    def target(self, name: str) -> ssh.SshTarget:
        return self.hosts[name].target(self.key.path, self.known_hosts_path)

    def ssh(self, name: str, command: str, timeout: float = 60.0,
            stdin: str | None = None) -> ssh.CommandResult:
        """Run a command on a host over SSH as its login user (strict host keys)."""
        return ssh.run(self.target(name), command, timeout=timeout, stdin=stdin)

    @classmethod
    def attach(cls, client, directory: Path) -> Harness:
        """Re-open a run from its `harness.json` (for `harness.status` and `harness.down`)."""
        path = Path(directory) / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise hosts.HostError(f"no harness run recorded in {directory}") from None
        run = cls(client, directory, run_id=state["run_id"], owner_pid=state["owner_pid"],
                  keep=state.get("keep", False), images=state.get("images") or {},
                  key=keys.load_key(Path(state["key"])))
        import docker.errors  # noqa: PLC0415

        for row in state["hosts"]:
            spec = hosts.HostSpec(row["name"], row["user"], row.get("state_tmpfs_mb"),
                                  row.get("suite", image.DEFAULT_SUITE),
                                  row.get("init", "tini"), row.get("openclaw", False))
            try:
                container = client.containers.get(row["container"])
            except docker.errors.NotFound:
                continue
            run.hosts[spec.name] = hosts.Host(spec, container, row["port"], row.get("host_key", ""))
        return run


def start_harness(client, directory: Path, count: int = 3, keep: bool = False,
                  log=print, specs: list[hosts.HostSpec] | None = None) -> tuple[Harness, dict]:
    """Start a whole run of `count` hosts (default_specs), or of `specs`; return it with
    timings (seconds) for reports."""
    t0 = time.monotonic()
    run = Harness(client, directory, keep=keep)
    specs = specs or hosts.default_specs(count)
    builds = run.prepare(log=log, specs=specs)
    t1 = time.monotonic()
    try:
        run.start_hosts(specs)
    except BaseException:
        run.close()
        raise
    t2 = time.monotonic()
    return run, {"image_s": round(t1 - t0, 1),
                 "built_rootfs": any(b.built_rootfs for b in builds),
                 "built_layer": any(b.built_layer for b in builds),
                 "hosts_ready_s": round(t2 - t1, 1)}
