"""The gateway client on a harness host, driven over SSH as the host's user.

Each call runs, on the host, the deployed release's own client:
`PYTHONPATH=<state>/fleet/current python3 -m fleet.gateway --state-dir <state> call <op>
--json-args '<json>' --json`, and decodes the one JSON response it prints. Nothing runs through a
shortcut (no docker exec), so a call proves the same path an operator uses.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from fleet.continuity.statelayout import StateLayout
from lab.harness.run import Harness


class GatewayCallError(RuntimeError):
    """The gateway answered `ok: false` or the client failed; carries the raw output."""

    def __init__(self, message: str, response: dict | None = None) -> None:
        super().__init__(message)
        self.response = response


def client_command(state_dir: str, op: str, args: dict[str, Any], python: str = "python3") -> str:
    """The shell command line that runs the deployed gateway client for one request."""
    current = f"{state_dir}/{StateLayout.CURRENT}"
    return (
        f"PYTHONPATH={shlex.quote(current)} {python} -m fleet.gateway "
        f"--state-dir {shlex.quote(state_dir)} call {shlex.quote(op)} "
        f"--json-args {shlex.quote(json.dumps(args))} --json"
    )


def parse_response(text: str) -> dict:
    """The last JSON object line the client printed (it prints exactly one)."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                break
            if isinstance(data, dict) and "ok" in data:
                return data
            break
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise GatewayCallError(f"client printed no JSON response: {text[-500:]!r}") from exc
    if not isinstance(data, dict) or "ok" not in data:
        raise GatewayCallError(f"client printed an unexpected answer: {text[-500:]!r}")
    return data


class RemoteGateway:
    """`call(op, **args)` against one host's gateway, as that host's login user."""

    def __init__(self, harness: Harness, name: str, timeout: float = 60.0) -> None:
        self.harness = harness
        self.name = name
        self.host = harness.hosts[name]
        self.timeout = timeout

    def raw(self, op: str, **args: Any) -> dict:
        """The full response (`ok`, `result` | `error`), whatever `ok` is."""
        command = client_command(self.host.state_dir, op, args)
        result = self.harness.ssh(self.name, command, timeout=self.timeout)
        try:
            return parse_response(result.stdout)
        except GatewayCallError as exc:
            raise GatewayCallError(
                f"{self.name}: {op} exited {result.code}: {exc}; stderr: {result.stderr[-800:]}"
            ) from exc

    def call(self, op: str, **args: Any) -> Any:
        """The `result` of a successful call; GatewayCallError naming host and op otherwise."""
        response = self.raw(op, **args)
        if not response.get("ok"):
            raise GatewayCallError(f"{self.name}: {op} failed: {response.get('error')}", response)
        return response.get("result")

    def read(self, path: str) -> str | None:
        """A file on the host read over SSH (None when missing); `~` is the user's home."""
        quoted = path if path.startswith("~/") else shlex.quote(path)
        result = self.harness.ssh(self.name, f"cat {quoted}", timeout=self.timeout)
        return result.stdout if result.ok else None

