"""The checkout's task tree (`tasks.py`): the product's tasks plus the lab's.

The product's tasks reach two lab parts through Invoke's configuration (fleet/cli/extension.py):
the sandbox OpenClaw hosts' setup (and their scripted models stopped again where no gateway
came up) and the pinned Node for `verify`'s entry check.
"""

from __future__ import annotations

from invoke import Collection

from fleet.cli import build_namespace as product_namespace
from fleet.cli import extension
from fleet.deploy.inventory import Host
from lab.cli import bench, dev, harness, openclaw, sim
from lab.openclaw import sandbox, toolchain


def setup_hosts(hosts: list[Host], create: bool) -> list[Host]:
    """The product's host-setup hook: sandbox OpenClaw hosts get the toolchain's paths, and
    with `create` their dirs, first config and scripted model (lab/openclaw/sandbox.py)."""
    try:
        hosts = sandbox.resolve(hosts)
        if create:
            sandbox.prepare(hosts)
    except sandbox.SandboxError as exc:
        raise extension.SetupError(str(exc)) from None
    return hosts


def build_namespace() -> Collection:
    """Assemble the checkout's task tree; kept a function so tests can build a fresh one."""
    ns = product_namespace()
    for module in (dev, bench, sim):
        for task in module.TASKS:
            ns.add_task(task)
    ns.add_collection(harness.ns, "harness")
    ns.add_collection(openclaw.ns, "openclaw")
    ns.configure({"fleet": {extension.SETUP_HOSTS: setup_hosts,
                            extension.FINISH_HOSTS: sandbox.finish,
                            extension.PINNED_NODE: toolchain.pinned_node}})
    return ns


ns = build_namespace()
