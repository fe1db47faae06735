"""A sandbox fleet for rollout tests, driven by the `fleet` script as an operator would, and
what the Temporal engine's tests add: one dev server per test session, worker processes, and
the `engine` fixture that runs a rollout test on either engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deploy_helpers import stop_gateways
from fleetcli import FLEET

from fleet.continuity.statelayout import StateLayout

WORKER_READY_S = 60.0


def inventory(count: int, site: str) -> str:
    names = [f"h{i:02d}" for i in range(1, count + 1)]
    hosts = "\n".join(f"  {n}: {{state_dir: .fleet/hosts/{n}}}" for n in names)
    return (f"vars: {{connection: local, gateway: {{manager: fleet}}, site: {site}, "
            "timeouts: {ready: 30, command: 120}}\n"
            f"hosts:\n{hosts}\ngroups:\n  sandbox: {{hosts: [{', '.join(names)}]}}\n")


class Fleet:
    """A sandbox fleet in a temp dir; `env` goes to every command (the Temporal server)."""

    def __init__(self, root: Path, count: int):
        self.root = root
        self.names = [f"h{i:02d}" for i in range(1, count + 1)]
        # a site of its own: a worker of another test's fleet never takes its hosts
        self.site = "t" + os.urandom(4).hex()
        self.env: dict[str, str] = {}
        (root / "inventory.yaml").write_text(inventory(count, self.site))

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-c", FLEET, *args]

    def environ(self, env: dict | None = None) -> dict:
        return dict(os.environ, **self.env, **(env or {}))

    def run(self, *args: str, env: dict | None = None, timeout: float = 600):
        proc = subprocess.run(self.command(*args), cwd=self.root, capture_output=True,
                              text=True, timeout=timeout, env=self.environ(env))
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc.returncode, proc.stdout, proc.stderr

    def json(self, *args: str, env: dict | None = None) -> tuple[int, dict]:
        code, out, err = self.run(*args, "--json", env=env)
        try:
            return code, json.loads(out)
        except ValueError:
            raise AssertionError(f"not one JSON document (exit {code}):\n{out}\n{err}") from None

    def current(self, name: str) -> str | None:
        link = StateLayout(self.root / ".fleet" / "hosts" / name).current
        return os.path.basename(os.readlink(link)) if os.path.islink(link) else None

    def audit(self, name: str) -> list[dict]:
        path = StateLayout(self.root / ".fleet" / "hosts" / name).audit
        return [json.loads(line) for line in path.read_text().splitlines()] \
            if path.exists() else []

    def installs(self, name: str, release: str) -> int:
        """Installs that reached `release` on the host, by its own audit log."""
        return sum(1 for e in self.audit(name) if e.get("action") == "install"
                   and e.get("to") == release)

    def tried(self, name: str) -> int:
        """Install transactions a rollout ran on the host (its audit lines name the rollout)."""
        return sum(1 for e in self.audit(name) if e.get("action") == "install"
                   and " rollout " in str(e.get("who")))

    def stop(self) -> None:
        stop_gateways([self.root / ".fleet" / "hosts" / n for n in self.names])


class Worker:
    """A `fleet worker` process of a fleet's site, started by the test and stopped by it."""

    def __init__(self, box: Fleet, name: str, env: dict | None = None):
        self.log = box.root / f"worker-{name}.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(box.command("worker", "--queue", box.site),
                                         cwd=box.root, env=box.environ(env), text=True,
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        end = time.monotonic() + WORKER_READY_S
        while "worker ready" not in self.text():
            assert self.proc.poll() is None, f"worker {name} died: {self.text()}"
            assert time.monotonic() < end, f"worker {name} not ready: {self.text()}"
            time.sleep(0.2)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory):
    """One Temporal dev server for the session: 127.0.0.1, free ports, a temp db."""
    from fleet.deploy import temporalserver  # noqa: PLC0415

    server = temporalserver.start(tmp_path_factory.mktemp("temporal"))
    yield server
    temporalserver.stop(server)


@pytest.fixture(params=["inprocess", pytest.param("temporal", marks=pytest.mark.temporal)])
def engine(request):
    """`engine(box)`: the flags that run a rollout test on this engine; with Temporal, a worker
    of the fleet's site runs first (stopped at the end)."""
    workers: list[Worker] = []
    server = request.getfixturevalue("temporal_server") if request.param == "temporal" else None

    def use(box: Fleet) -> tuple[str, ...]:
        if server is None:
            return ()
        box.env["TEMPORAL_ADDRESS"] = server.address
        workers.append(Worker(box, "w1"))
        return ("--engine", "temporal")

    yield use
    for worker in workers:
        worker.kill()
