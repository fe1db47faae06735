"""Harness hosts: containers that behave like the fleet's SSH hosts, and their readiness.

Each host is one container from the harness image with sshd published on 127.0.0.1 only. The port
is picked at random by us (a free loopback port) rather than by the daemon, so it survives the
container being killed and started again (a daemon-chosen port would change, pitfall 4) and the
inventory and known_hosts stay valid across lifecycle faults.
"""

from __future__ import annotations

import re
import shlex
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from lab.harness import cleanup, ssh

USERS = {"opc": 1000, "administrator": 1001}
READY_TIMEOUT_S = 60.0
LISTEN_RE = re.compile(r"Server listening on \S+ port 22")
HOST_KEY_PATH = "/etc/ssh/ssh_host_ed25519_key.pub"


class HostError(RuntimeError):
    """A host could not be started or did not become ready; carries its log tail."""


@dataclass(frozen=True)
class HostSpec:
    """What to start: inventory name, login user, optionally a small tmpfs state dir (MB), the
    Debian suite its image is built from (lab.harness.image.SUITES), and its init: "tini"
    (sshd under docker's init, the gateway run by fleet itself) or "systemd" (systemd as PID 1,
    the gateway a systemd user service, deployed with the `systemd` manager)."""

    name: str
    user: str
    state_tmpfs_mb: int | None = None
    suite: str = "bookworm"
    init: str = "tini"
    openclaw: bool = False  # Node + OpenClaw + the scripted model (lab.harness.openclawlayer)

    @property
    def flavor(self) -> str:
        name = self.suite if self.init == "tini" else f"{self.suite}+{self.init}"
        return f"{name}+openclaw" if self.openclaw else name

    @property
    def manager(self) -> str:
        """The gateway manager a deploy to this host uses."""
        if self.openclaw:
            return "openclaw"
        return "systemd" if self.init == "systemd" else "fleet"

    @property
    def state_dir(self) -> str:
        return f"/home/{self.user}/.openclaw"


def default_specs(count: int) -> list[HostSpec]:
    """cloud (bookworm, opc), pi (bullseye with Python 3.9, administrator), then edge-1,
    edge-2 ... (bookworm, opc): the shape of a cloud VM plus a Raspberry Pi at home."""
    if count < 1:
        raise ValueError("a harness needs at least one host")
    specs = [HostSpec("cloud", "opc"), HostSpec("pi", "administrator", suite="bullseye")]
    specs += [HostSpec(f"edge-{i}", "opc") for i in range(1, count - 1)]
    return specs[:count]


def fleet_specs(count: int) -> list[HostSpec]:
    """The shape of a real fleet for `harness.up`: cloud (bookworm, opc), pi (bullseye,
    administrator), then `claw`, a host with systemd as PID 1 and OpenClaw installed, whose
    gateway is a systemd user service of opc; then edge-1, edge-2 ... as in default_specs."""
    if count < 1:
        raise ValueError("a harness needs at least one host")
    specs = default_specs(2)
    specs.append(HostSpec("claw", "opc", init="systemd", openclaw=True))
    specs += [HostSpec(f"edge-{i}", "opc") for i in range(1, count - 2)]
    return specs[:count]


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Host:
    """A running harness host: its container, published port and ed25519 host key."""

    spec: HostSpec
    container: object
    port: int
    host_key: str = ""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def user(self) -> str:
        return self.spec.user

    @property
    def state_dir(self) -> str:
        return self.spec.state_dir

    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_key}"

    def target(self, key_path: Path, known_hosts: Path) -> ssh.SshTarget:
        return ssh.SshTarget("127.0.0.1", self.port, self.user, key_path, known_hosts)

    def status(self) -> str:
        self.container.reload()
        return self.container.status

    def logs(self, tail: int = 200) -> str:
        return cleanup.container_logs(self.container, tail=tail)

    def exec(self, command: str, user: str = "root", timeout: float = 60.0) -> ssh.CommandResult:
        """Run a shell command in the container via the engine (a side channel, not SSH)."""
        wrapped = f"timeout {max(1, int(timeout))} sh -c {shlex.quote(command)}"
        result = self.container.exec_run(["sh", "-c", wrapped], user=user, demux=True)
        out, err = result.output if result.output else (b"", b"")
        return ssh.CommandResult(
            result.exit_code if result.exit_code is not None else -1,
            (out or b"").decode(errors="replace"),
            (err or b"").decode(errors="replace"),
        )

    def exec_ok(self, command: str, user: str = "root", timeout: float = 60.0) -> str:
        """exec and return stdout, raising HostError with the output when it fails."""
        result = self.exec(command, user=user, timeout=timeout)
        if not result.ok:
            raise HostError(
                f"{self.name}: {command!r} exited {result.code}: {result.stderr or result.stdout}"
            )
        return result.stdout


def create_host(client, image: str, spec: HostSpec, labels: dict[str, str], public_key: str,
                name_prefix: str, attempts: int = 5) -> Host:
    """Create and start one container; retry with another port if the chosen one got taken."""
    import docker.errors  # noqa: PLC0415

    tmpfs = {"/run": "rw,nosuid,nodev,size=16m"}
    extra: dict = {"init": True}
    if spec.init == "systemd":  # systemd as PID 1 (see docs/harness.md): no docker init
        tmpfs = {"/run": "rw,nosuid,nodev,size=32m", "/run/lock": "rw,nosuid,nodev,size=4m",
                 "/tmp": "rw,nosuid,nodev,size=64m"}
        extra = {"volumes": {"/sys/fs/cgroup": {"bind": "/sys/fs/cgroup", "mode": "ro"}},
                 "stop_signal": "SIGRTMIN+3"}
    if spec.openclaw:  # names resolve nowhere: OpenClaw can reach nothing beyond the container
        extra["dns"] = ["127.0.0.1"]
    if spec.state_tmpfs_mb:
        uid = USERS[spec.user]
        tmpfs[spec.state_dir] = f"rw,size={spec.state_tmpfs_mb}m,uid={uid},gid={uid},mode=0755"
    last: Exception | None = None
    for _ in range(attempts):
        port = free_port()
        container = client.containers.create(
            image,
            name=f"{name_prefix}-{spec.name}",
            hostname=spec.name,
            labels={**labels, cleanup.HOST_NAME: spec.name},
            ports={"22/tcp": ("127.0.0.1", port)},
            environment={"FLEET_AUTHORIZED_KEY": public_key, "container": "docker"},
            tmpfs=tmpfs,
            # A gateway holds ~0.9 GB; with 1.5 GB two concurrent agent turns got it OOM-killed.
            mem_limit="3g" if spec.openclaw else "512m",
            pids_limit=512,
            **{"stop_signal": "SIGTERM", **extra},
        )
        try:
            container.start()
            return Host(spec=spec, container=container, port=port)
        except docker.errors.APIError as exc:
            last = exc
            container.remove(force=True)
            if "allocated" not in str(exc) and "address already in use" not in str(exc):
                raise HostError(f"{spec.name}: container did not start: {exc}") from exc
    raise HostError(f"{spec.name}: no free port after {attempts} attempts: {last}")


CPU_PERIOD_US = 100_000


def limit_cpu(container, cpus: float | None) -> None:
    """Cap a running host at `cpus` cores (CFS quota), or lift the cap with None.

    The hosts of one harness are containers sharing this machine's cores; capped at an even
    share, each behaves like a small machine of its own (it never gets more CPU when it runs
    alone, and others' work cannot take its share), which is how a real fleet's hosts behave.
    """
    if cpus is not None and cpus <= 0:
        raise ValueError(f"cpus {cpus!r}: give a positive number of cores, or None for no cap")
    quota = -1 if cpus is None else max(1000, int(cpus * CPU_PERIOD_US))
    container.update(cpu_period=CPU_PERIOD_US, cpu_quota=quota)


def _banner(port: int, timeout: float = 2.0) -> bytes:
    """Read the SSH identification line; docker-proxy accepts before sshd does (pitfall 1)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        data = b""
        while b"\n" not in data and len(data) < 256:
            chunk = sock.recv(256)
            if not chunk:
                break
            data += chunk
        return data


def banner_ok(port: int, timeout: float = 2.0) -> bool:
    """Whether an SSH server answers with its banner on 127.0.0.1:port within `timeout`."""
    try:
        return _banner(port, timeout).startswith(b"SSH-2.0-")
    except OSError:
        return False


def wait_listening(host: Host, timeout: float = READY_TIMEOUT_S,
                   since: float | None = None) -> None:
    """Wait for sshd's 'Server listening' line (logged after `since`, a time.time() taken before
    the start or restart), read the host key, then the SSH banner.

    `since` matters after a restart: the container log still holds the previous start's line.
    The last readiness gate (a first command over SSH, check_login) needs the host key in the
    run's known_hosts, so the caller writes it in between.
    """
    deadline = time.monotonic() + timeout

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HostError(f"{host.name}: not ready within {timeout:.0f}s\n{host.logs(60)}")
        return left

    while True:
        state = host.status()
        if state in ("exited", "dead"):
            raise HostError(f"{host.name}: container {state}\n{host.logs(60)}")
        if state == "running":
            if host.spec.init == "systemd":  # sshd logs to the journal: wait for its key
                if host.exec(f"test -s {HOST_KEY_PATH} && systemctl is-active -q ssh",
                             timeout=10).ok:
                    break
            else:
                logs = host.container.logs(since=since) if since else host.container.logs()
                if LISTEN_RE.search(logs.decode(errors="replace")):
                    break
        remaining()
        time.sleep(0.2)
    host.host_key = read_host_key(host)
    while not banner_ok(host.port, timeout=min(2.0, remaining())):
        time.sleep(0.2)


def check_login(host: Host, key_path: Path, known_hosts: Path, timeout: float = 15.0) -> None:
    """The last readiness gate: log in as the host's user with strict host keys, run `id -un`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = ssh.run(host.target(key_path, known_hosts), "id -un", timeout=10)
            if result.ok and result.stdout.strip() == host.user:
                return
            problem = f"id -un gave {result.code}: {result.stdout.strip()} {result.stderr.strip()}"
        except ssh.SshError as exc:
            problem = str(exc)
        if time.monotonic() > deadline:
            raise HostError(f"{host.name}: first command failed: {problem}\n{host.logs(60)}")
        time.sleep(0.3)


def read_host_key(host: Host) -> str:
    """`type base64` of the container's ed25519 host key (written by host-init at first start)."""
    text = host.exec_ok(f"cat {HOST_KEY_PATH}", timeout=10).split()
    if len(text) < 2 or text[0] != "ssh-ed25519":
        raise HostError(f"{host.name}: unexpected host key {' '.join(text)!r}")
    return f"{text[0]} {text[1]}"
