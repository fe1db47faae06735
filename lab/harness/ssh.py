"""SSH to harness hosts from the control side, with strict host keys and a deadline on every step.

Used for the readiness gate (a first command must succeed) and by the integration tests to drive the
gateway client on a host. Host keys come from the run's known_hosts; an unknown or changed key is
refused (paramiko RejectPolicy), exactly as the deploy side must behave.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import paramiko

CONNECT_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 60.0


class SshError(RuntimeError):
    """An SSH connection or command failed; the message names the target and the cause."""


@dataclass(frozen=True)
class SshTarget:
    """Where and as whom to log in."""

    host: str
    port: int
    user: str
    key_path: Path
    known_hosts: Path

    @property
    def label(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


@dataclass(frozen=True)
class CommandResult:
    """Exit status and decoded output of one remote command."""

    code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.code == 0


def connect(target: SshTarget, timeout: float = CONNECT_TIMEOUT_S) -> paramiko.SSHClient:
    """Open an SSH client that trusts only the keys in `target.known_hosts`."""
    client = paramiko.SSHClient()
    client.load_host_keys(str(target.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(
            target.host,
            port=target.port,
            username=target.user,
            key_filename=str(target.key_path),
            look_for_keys=False,
            allow_agent=False,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
            channel_timeout=timeout,
        )
    except Exception as exc:
        client.close()
        raise SshError(f"ssh {target.label}: {type(exc).__name__}: {exc}") from exc
    transport = client.get_transport()
    if transport is not None:
        transport.set_keepalive(5)
    return client


def run(target: SshTarget, command: str, timeout: float = COMMAND_TIMEOUT_S,
        stdin: str | None = None) -> CommandResult:
    """Run one command over a fresh connection; raise SshError when it cannot finish in time."""
    client = connect(target, timeout=min(timeout, CONNECT_TIMEOUT_S))
    try:
        return run_on(client, command, timeout=timeout, stdin=stdin, label=target.label)
    finally:
        client.close()


def run_on(client: paramiko.SSHClient, command: str, timeout: float = COMMAND_TIMEOUT_S,
           stdin: str | None = None, label: str = "host") -> CommandResult:
    """Run one command on an open client, reading output until exit or the deadline."""
    deadline = time.monotonic() + timeout
    try:
        channel = client.get_transport().open_session(timeout=CONNECT_TIMEOUT_S)
        channel.settimeout(0.5)
        channel.exec_command(command)
        if stdin is not None:
            channel.sendall(stdin.encode())
        channel.shutdown_write()
    except Exception as exc:
        raise SshError(f"ssh {label}: cannot start {command!r}: {exc}") from exc
    out, err = bytearray(), bytearray()
    while True:
        # sshd may send the exit status before the last output (it flushes the child's pipes
        # after reaping it), so the command is finished only at exit status AND end of data.
        # Both flags are read BEFORE draining: all data precedes EOF on the channel, so a drain
        # that follows a seen EOF gets everything, while one that precedes it could miss output
        # arriving in between.
        finished = channel.exit_status_ready() and channel.eof_received
        while channel.recv_ready():
            out += channel.recv(65536)
        while channel.recv_stderr_ready():
            err += channel.recv_stderr(65536)
        if finished:
            break
        if time.monotonic() > deadline:
            channel.close()
            raise SshError(
                f"ssh {label}: {command!r} did not finish within {timeout:.0f}s; "
                f"output so far: {out.decode(errors='replace')[-500:]}"
            )
        channel.status_event.wait(0.05)
    code = channel.recv_exit_status()
    channel.close()
    return CommandResult(code, out.decode(errors="replace"), err.decode(errors="replace"))
