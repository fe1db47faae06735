"""One local sandbox host (`box`, fleet's own gateway) driven through the `fleet` command line as
an operator runs it, `--json` answers read: the CLI tests of stop/start, remove and doctor hints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fleetcli import FLEET

INVENTORY = """\
vars: {connection: local, gateway: {manager: fleet}, timeouts: {ready: 30, command: 120}}
hosts:
  box: {state_dir: .fleet/sandbox/box}
groups:
  sandbox: {hosts: [box]}
"""


def fleet(cwd: Path, *args: str) -> tuple[int, dict]:
    """`fleet ARGS --json` run in `cwd` (no terminal: nothing is asked): exit code, document."""
    proc = subprocess.run([sys.executable, "-c", FLEET, *args, "--json"], cwd=cwd,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    return proc.returncode, json.loads(proc.stdout)


def host(doc: dict) -> dict:
    """The one host's entry of a `--json` document."""
    return doc["hosts"][0]
