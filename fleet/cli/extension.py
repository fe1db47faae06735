"""What a richer task tree may add to the product's tasks, without the product importing it.

The installed `fleet` deploys to hosts that exist. The project's checkout adds a lab (`lab/`:
benchmarks, the Docker harness, a pinned Node + OpenClaw and local OpenClaw gateways answering
with a scripted model) that is never installed. Two of its parts must reach product tasks: hosts
that have to be set up on this machine before a task reaches them (and handed back after it),
and the pinned Node that `verify` imports the plugins' OpenClaw entries with. The checkout's
namespace passes them through Invoke's own configuration (`Collection.configure({"fleet":
{...}})`); product tasks read them here, so the dependency points one way: lab -> product.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from fleet.deploy.inventory import Host

SETUP_HOSTS = "setup_hosts"  # (hosts, prepare: bool) -> hosts; may raise SetupError
FINISH_HOSTS = "finish_hosts"  # (hosts) -> None: after a task that prepared them
PINNED_NODE = "pinned_node"  # () -> path of a Node binary, or None


class SetupError(RuntimeError):
    """A host could not be set up before a task; the message says what to do."""


def _hook(c: Any, name: str) -> Optional[Callable]:
    fleet = c.config.get("fleet") if c is not None else None
    return fleet.get(name) if fleet else None


def setup_hosts(c: Any, hosts: list[Host], prepare: bool) -> list[Host]:
    """`hosts` as the namespace's setup hook gives them back (unchanged without one).

    With `prepare` the hook may create what the hosts need on this machine (dirs, a first
    config, a helper process); without it, it only fills in what the inventory cannot know.
    """
    hook = _hook(c, SETUP_HOSTS)
    return list(hook(hosts, prepare)) if hook else hosts


def finish_hosts(c: Any, hosts: list[Host]) -> None:
    """Hand back hosts a task prepared, however it ended: what was started on this machine
    for a host that did not end up running (a refused or failed first deploy) goes again."""
    hook = _hook(c, FINISH_HOSTS)
    if hook:
        hook(hosts)


def pinned_node(c: Any) -> Optional[str]:
    """The Node binary the namespace pins, if it pins one."""
    hook = _hook(c, PINNED_NODE)
    return hook() if hook else None
