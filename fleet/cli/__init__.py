"""Invoke task namespace of the product, served by the `fleet` console script.

Each module under fleet.cli owns the tasks of one area and exposes `TASKS` (top-level tasks) and
optionally `ns` (a sub-collection). Tasks stay thin: parse flags, call the fleet.* API, print.
The checkout's `tasks.py` serves a larger tree (lab/cli: this one plus the lab's tasks).
"""

from __future__ import annotations

from invoke import Collection

from fleet.cli import adhoc, deploy, doctor, durable, lock, logs, release, sandbox

CHECKOUT_ONLY = ("verify", "release")  # they read and change a project checkout


def build_namespace(checkout: bool = True) -> Collection:
    """Assemble the task tree; kept a function so the checkout and tests can build a fresh one.
    Without `checkout` (the installed script outside a project), the tasks that need one are
    left out."""
    ns = Collection()
    for module in (release, deploy, doctor, logs, adhoc, durable):
        for task in module.TASKS:
            if checkout or task.name not in CHECKOUT_ONLY:
                ns.add_task(task)
    ns.add_collection(sandbox.ns, "sandbox")
    ns.add_collection(lock.ns, "lock")
    ns.add_collection(durable.ns, "rollout")
    return ns


ns = build_namespace()
