"""Tasks for the Docker harness: `invoke harness.up|down|status|images`. Thin: parse flags, call,
print.

`harness.up` leaves its run in `.fleet/harness/` (inventory.yaml, known_hosts, the run's key and
harness.json), so `invoke deploy --inventory .fleet/harness/inventory.yaml -H all --yes` deploys
to it with strict host keys (`--yes`: its hosts are outside the sandbox). Its containers are
labelled `keep`, so test sessions never sweep them; `harness.down` removes them.
"""

from __future__ import annotations

import json as jsonlib
import time
from pathlib import Path

from invoke import Collection, Exit

from fleet.cli.flags import number, task
from fleet.cli.taskrun import Run

DEFAULT_DIR = Path(".fleet") / "harness"


def _client():
    from lab.harness.run import docker_client  # noqa: PLC0415

    try:
        return docker_client()
    except Exception as exc:
        raise Exit(f"harness: no usable Docker engine: {exc}", code=1) from exc


@task(help={"count": "how many hosts (default 3: cloud, pi, claw; then edge-1, ...)",
            "dir": f"where to write the run's files (default {DEFAULT_DIR})",
            "openclaw": "include claw, the systemd host with OpenClaw (default yes; needs "
                        "`invoke openclaw.install`)"})
def up(c, count="3", dir=None, openclaw=True):
    """Build the host images if needed, start N SSH hosts, write inventory + known_hosts + key.

    cloud is Debian bookworm (user opc), pi Debian bullseye with Python 3.9 (administrator),
    claw has systemd as PID 1 and OpenClaw installed (opc; its gateway a systemd user service).
    """
    from lab.harness.cleanup import remove_run  # noqa: PLC0415
    from lab.harness.hosts import HostError, default_specs, fleet_specs  # noqa: PLC0415
    from lab.harness.image import ImageError  # noqa: PLC0415
    from lab.harness.run import Harness, start_harness  # noqa: PLC0415

    directory = Path(dir) if dir else DEFAULT_DIR
    hosts = number(count, "--count", maximum=64, why="one container each; the harness's largest "
                                                    "fleet")
    specs = fleet_specs(hosts) if openclaw else default_specs(hosts)
    client = _client()
    try:
        old = Harness.attach(client, directory)
    except HostError:
        old = None
    if old is not None:
        removed = remove_run(client, old.run_id)
        print(f"harness: replaced the previous run {old.run_id} ({len(removed)} container(s))")
    try:
        run, timing = start_harness(client, directory.resolve(), keep=True, specs=specs)
    except (ImageError, HostError) as exc:
        raise Exit(f"harness.up: {exc}", code=1) from exc
    for host in run.hosts.values():
        print(f"  {host.name:<8} {host.user}@127.0.0.1:{host.port}  {host.state_dir}")
    print(f"harness: {len(run.hosts)} host(s) ready in {timing['hosts_ready_s']}s "
          f"(image {timing['image_s']}s)")
    print(run.inventory_path)


@task(help={"dir": f"the run's directory (default {DEFAULT_DIR})",
            "all": "remove every harness container on this engine, of any run"})
def down(c, dir=None, all=False):
    """Remove the harness run's containers and files (or every harness container with --all)."""
    from lab.harness import cleanup  # noqa: PLC0415
    from lab.harness.hosts import HostError  # noqa: PLC0415
    from lab.harness.run import Harness  # noqa: PLC0415

    directory = Path(dir) if dir else DEFAULT_DIR
    client = _client()
    removed: list[str] = []
    try:
        removed += Harness.attach(client, directory).close()
    except HostError:
        if not all:
            print(f"harness: no run recorded in {directory}")
    if all:
        for run_id in cleanup.list_runs(client):
            removed += cleanup.remove_run(client, run_id)
    print(f"harness: removed {len(removed)} container(s)")


@task(help={"dir": f"the run's directory (default {DEFAULT_DIR})",
            "json": "one JSON document (the tasks' shape; the containers in `containers`)"})
def status(c, dir=None, json=False):
    """Show every harness run on this engine: hosts, state, port, SSH answering or not."""
    from lab.harness import cleanup, hosts  # noqa: PLC0415

    directory = Path(dir) if dir else DEFAULT_DIR
    client = _client()
    recorded = None
    state_file = directory / "harness.json"
    if state_file.exists():
        recorded = jsonlib.loads(state_file.read_text()).get("run_id")
    rows = []
    for run_id, containers in sorted(cleanup.list_runs(client).items()):
        for container in containers:
            binding = (container.attrs.get("HostConfig", {}).get("PortBindings") or {}).get(
                "22/tcp") or [{}]
            port = int(binding[0].get("HostPort") or 0)
            rows.append({
                "run": run_id,
                "here": run_id == recorded,
                "host": container.labels.get(cleanup.HOST_NAME, container.name),
                "state": container.status,
                "port": port,
                "ssh": bool(port) and container.status == "running" and hosts.banner_ok(port, 2),
                "owner_pid": container.labels.get(cleanup.OWNER_PID),
                "kept": container.labels.get(cleanup.KEEP) == "1",
            })
    if json:
        Run("harness.status", True).document(True, {"dir": str(directory), "run": recorded,
                                                    "containers": rows})
        return
    if not rows:
        print("harness: no harness containers")
        return
    for row in rows:
        mark = "*" if row["here"] else " "
        print(f"{mark} {row['run']} {row['host']:<8} {row['state']:<8} 127.0.0.1:{row['port']:<6}"
              f" ssh={'up' if row['ssh'] else 'down'}")
    if recorded:
        print(f"* = the run in {directory} (inventory: {directory / 'inventory.yaml'})")


@task(help={"openclaw": "also the OpenClaw layer (default yes; needs `invoke openclaw.install`)"})
def images(c, openclaw=True):
    """Build the host images the harness and its tests use, where missing; print size and time.

    A cold build (debootstrap from Debian's mirror, then `docker import`) takes minutes per
    image; CI runs this first, so that time is a step of its own and not a slow first test.
    """
    from lab.harness.hosts import default_specs, fleet_specs  # noqa: PLC0415
    from lab.harness.image import ImageError  # noqa: PLC0415
    from lab.harness.run import Harness  # noqa: PLC0415

    client = _client()
    run = Harness(client, DEFAULT_DIR)  # for its image cache only: no host is started
    specs = fleet_specs(3) if openclaw else default_specs(2)
    started = time.monotonic()
    for spec in specs:
        t0 = time.monotonic()
        try:
            run.ensure_images([spec])
        except ImageError as exc:
            raise Exit(f"harness.images: {exc}", code=1) from exc
        tag = run.images[spec.flavor]
        size = client.images.get(tag).attrs.get("Size", 0) / 1e6
        print(f"  {spec.flavor:<22} {tag}  {size:.0f} MB  {time.monotonic() - t0:.1f}s")
    print(f"harness: {len(run.images)} image(s) ready in {time.monotonic() - started:.1f}s")


ns = Collection("harness")
ns.add_task(up)
ns.add_task(images)
ns.add_task(down)
ns.add_task(status)
