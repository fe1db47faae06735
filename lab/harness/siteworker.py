"""A site's worker on another machine: `fleet worker --queue SITE` in a container of its own.

A Temporal rollout is shared by workers wherever the server is reachable: a worker inside a home
network serves the Pi and the Mac there. The container stands for such a machine. It has its own
filesystem, hostname and process namespace, and of this machine only what a real one is given:

- the control side's Python packages (temporalio, invoke, paramiko, PyYAML ...), this Python's
  site-packages mounted read-only (the harness image is Debian bookworm with Python 3.11, the
  control side's minor version, checked before anything starts: compiled modules need it);
- its own copy of the checkout's `fleet` package, its own inventory (the rollout's host names;
  the site's hosts as that machine reaches them) and the rollouts' artifacts at the paths the
  deploy names them by, each checked by SHA-256 inside the container before the worker starts;
- the host's network namespace (what listens there listens on 127.0.0.1 only), so
  `TEMPORAL_ADDRESS=127.0.0.1:<port>` reaches this machine's dev server as a worker elsewhere
  reaches a Temporal deployment.

The site's hosts are what that machine reaches: its own local hosts (`connection: local`, state
dirs in `.fleet/hosts/` beside its inventory), whose state exists nowhere on this machine's
filesystem, so what is found there was done by that machine's worker; or SSH hosts (a rack's, on
their loopback ports) whose key only that machine is given (`files`). A lost machine's
replacement is `Site.start_worker()`: another container with the same files.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import sysconfig
import tarfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import fleet.deploy
from lab.harness import cleanup, image

ROOT = PurePosixPath("/srv/site")  # the worker's directory: its inventory, its .fleet/
CHECKOUT = PurePosixPath("/opt/fleet/checkout")
PACKAGES = PurePosixPath("/opt/fleet/site-packages")
READY_TIMEOUT_S = 60.0
FLEET_MAIN = "import sys; sys.argv[0] = 'fleet'; from fleet.cli.program import main; main()"

# The container's command (PID 2 under docker's init): the artifacts checked, then the worker.
WORKER_INIT = r'''
set -eu
cd /srv/site
want="$FLEET_PYTHON"
have=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$have" != "$want" ]; then
  echo "site worker: this image's Python is $have, the mounted packages are for $want" >&2
  exit 3
fi
sha256sum --check --strict artifacts.sha256
echo "site worker: $(wc -l < artifacts.sha256) artifact(s) checked by SHA-256"
exec python3 -c "$FLEET_MAIN" worker --queue "$FLEET_SITE" --inventory /srv/site/inventory.yaml
'''


class SiteWorkerError(RuntimeError):
    """A site worker's container did not start or its worker did not become ready; carries the
    container's log."""


@dataclass
class Site:
    """One site on another machine: the containers that served it (the last one is its current
    worker) and what each is given."""

    client: object
    name: str
    run_id: str
    inventory_text: str
    artifacts: list[Path]
    temporal_address: str
    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    containers: list = field(default_factory=list)

    @property
    def container(self):
        """The current worker's container."""
        if not self.containers:
            raise SiteWorkerError(f"site {self.name}: no worker started")
        return self.containers[-1]

    @property
    def hostname(self) -> str:
        """The current worker's machine name (in its Temporal identity, `pid@hostname ...`)."""
        return self.container.attrs["Config"]["Hostname"]

    def start_worker(self, timeout: float = READY_TIMEOUT_S, env: dict | None = None) -> str:
        """A machine of the site: a new container with the site's files, its worker ready
        (polling the site's queue; `env` added to its environment); returns its hostname."""
        n = len(self.containers) + 1
        container = self.client.containers.create(
            image.ensure_image(self.client, log=lambda *_: None).tag,
            command=["sh", "-c", WORKER_INIT],
            name=f"fleet-harness-{self.run_id}-{self.name}-worker{n}",
            hostname=f"{self.name}-machine-{n}",
            labels={**cleanup.run_labels(self.run_id, os.getpid()),
                    cleanup.HOST_NAME: f"{self.name}-worker{n}"},
            network_mode="host", init=True, working_dir=str(ROOT),
            environment={"TEMPORAL_ADDRESS": self.temporal_address, "FLEET_SITE": self.name,
                         "FLEET_MAIN": FLEET_MAIN, "PYTHONPATH": f"{CHECKOUT}:{PACKAGES}",
                         "PYTHONDONTWRITEBYTECODE": "1", "FLEET_PYTHON": _python(),
                         **(env or {})},
            volumes={str(_site_packages()): {"bind": str(PACKAGES), "mode": "ro"}},
            tmpfs={"/run": "rw,nosuid,nodev,size=16m"},
            mem_limit="1g", pids_limit=512)
        self.containers.append(container)
        container.put_archive("/", self._files())
        container.start()
        container.reload()
        _wait_ready(container, timeout)
        return self.hostname

    def _files(self) -> bytes:
        """The tar put into a new machine: the `fleet` package, the inventory, the site's other
        files (an SSH key, known_hosts), the artifacts at their paths and their SHA-256 sums."""
        buf = io.BytesIO()
        sums = []
        with tarfile.open(fileobj=buf, mode="w") as tar:
            package = Path(fleet.deploy.__file__).resolve().parent.parent
            tar.add(package, arcname=str(CHECKOUT / "fleet").lstrip("/"),
                    filter=lambda info: None if "__pycache__" in info.name else info)
            _add(tar, ROOT / "inventory.yaml", self.inventory_text.encode())
            for path, (data, mode) in self.files.items():
                _add(tar, PurePosixPath(path), data, mode)
            for path in self.artifacts:
                path = path.resolve()
                tar.add(path, arcname=str(path).lstrip("/"))
                sums.append(f"{_sha256(path)}  {path}\n")
            _add(tar, ROOT / "artifacts.sha256", "".join(sums).encode())
        return buf.getvalue()

    def fleet(self, *args: str, timeout: float = 300.0) -> tuple[int, str, str]:
        """`fleet ARGS` run by an operator on the current worker's machine (its inventory)."""
        return self.run(["python3", "-c", FLEET_MAIN, *args, "--inventory",
                         str(ROOT / "inventory.yaml")], timeout)

    def run(self, argv: list[str], timeout: float = 60.0) -> tuple[int, str, str]:
        """A command on the current worker's machine: (exit code, stdout, stderr)."""
        result = self.container.exec_run(["timeout", str(max(1, int(timeout))), *argv],
                                         workdir=str(ROOT), demux=True)
        out, err = result.output if result.output else (b"", b"")
        return (result.exit_code if result.exit_code is not None else -1,
                (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace"))

    def read_text(self, path: str | PurePosixPath) -> str | None:
        """A file on the current worker's machine, or None when there is none."""
        code, out, _ = self.run(["cat", str(path)])
        return out if code == 0 else None

    def logs(self) -> str:
        """Every worker container's log, oldest first (for a failing test's report)."""
        return "\n".join(f"--- {c.name} ---\n{cleanup.container_logs(c, tail=300)}"
                         for c in self.containers)

    def close(self) -> list[str]:
        """Remove the site's containers."""
        return cleanup.remove_run(self.client, self.run_id)


def start(client, name: str, inventory_text: str, artifacts: list[Path],
          temporal_address: str, files: dict[str, tuple[bytes, int]] | None = None,
          env: dict | None = None, run_id: str | None = None,
          timeout: float = READY_TIMEOUT_S) -> Site:
    """Site `name` on another machine, its first worker ready (`files`: container path ->
    (bytes, mode), what else that machine holds, such as the SSH key to its hosts; `env`: the
    first worker's extra environment). Removed again when anything fails."""
    if not temporal_address.startswith("127.0.0.1:"):
        raise SiteWorkerError(f"TEMPORAL_ADDRESS {temporal_address!r}: the site's container "
                              "shares this machine's loopback only; give 127.0.0.1:<port>")
    cleanup.sweep_stale(client)
    run_id = run_id or uuid.uuid4().hex[:10]
    site = Site(client, name, run_id, inventory_text, list(artifacts), temporal_address,
                dict(files or {}))
    try:
        site.start_worker(timeout, env)
    except BaseException:
        site.close()
        raise
    return site


def _wait_ready(container, timeout: float) -> None:
    """Until the worker says it polls (its 'worker ready' line), else SiteWorkerError."""
    deadline = time.monotonic() + timeout
    while True:
        container.reload()
        text = cleanup.container_logs(container, tail=200)
        if "worker ready" in text:
            return
        if container.status in ("exited", "dead"):
            raise SiteWorkerError(f"site worker {container.name} {container.status}:\n{text}")
        if time.monotonic() > deadline:
            raise SiteWorkerError(f"site worker {container.name}: not ready within "
                                  f"{timeout:.0f}s:\n{text}")
        time.sleep(0.3)


def _add(tar: tarfile.TarFile, path: PurePosixPath, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(str(path).lstrip("/"))
    info.size = len(data)
    info.mode = mode
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _site_packages() -> Path:
    """This Python's site-packages (a venv's): what the container's worker imports."""
    return Path(sysconfig.get_paths()["purelib"])


def _python() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"
