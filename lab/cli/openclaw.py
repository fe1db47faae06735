"""Tasks for real OpenClaw on this machine: `invoke openclaw.install`. Thin: call, print."""

from __future__ import annotations

import json as jsonlib
import time

from invoke import Collection, Exit, task

from fleet.cli.deploy import select_hosts
from lab.openclaw import sandbox, toolchain


@task(help={"json": "machine-readable result on stdout"})
def install(c, json_=False):
    """Install the pinned Node + OpenClaw from the npm registry into the project's cache (once)."""
    started = time.monotonic()
    existing = toolchain.find()
    try:
        tool = toolchain.install(log=lambda line: print(f"openclaw: {line}"))
    except toolchain.ToolchainError as exc:
        raise Exit(f"openclaw.install: {exc}", code=1) from None
    result = {**tool.as_dict(), "installed": existing is None,
              "seconds": round(time.monotonic() - started, 1)}
    if json_:
        print(jsonlib.dumps(result, indent=2))
        return
    what = "installed" if existing is None else "already installed"
    print(f"openclaw {tool.openclaw_version} on node {tool.node_version} {what} in {tool.root} "
          f"({result['seconds']}s)")


@task(help={"hosts": "sandbox OpenClaw hosts or groups (default: sandbox-openclaw)",
            "inventory": "inventory file (default: ./inventory.yaml)"})
def down(c, hosts="sandbox-openclaw", inventory=""):
    """Stop the sandbox OpenClaw hosts' gateways and scripted models (their state stays)."""
    _, selected = select_hosts(c, hosts, inventory)
    for line in sandbox.down(selected):
        print(line)


ns = Collection("openclaw")
ns.add_task(install)
ns.add_task(down)
