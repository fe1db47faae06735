"""Invoke task namespace shared by `tasks.py` (invoke) and the `fleet` console script.

Each module under fleet.cli owns the tasks of one area and exposes `TASKS` (top-level tasks) and
optionally `ns` (a sub-collection). Tasks stay thin: parse flags, call the fleet.* API, print.
"""

from __future__ import annotations

from invoke import Collection

from fleet.cli import bench, deploy, dev, doctor, harness, logs, openclaw, release, sandbox


def build_namespace() -> Collection:
    """Assemble the task tree; kept a function so tests can build a fresh one."""
    ns = Collection()
    for module in (dev, release, deploy, doctor, logs, bench):
        for task in getattr(module, "TASKS", ()):
            ns.add_task(task)
    for name, module in (("harness", harness), ("sandbox", sandbox)):
        sub = getattr(module, "ns", None)
        if sub is not None:
            ns.add_collection(sub, name)
    ns.add_collection(openclaw.ns, "openclaw")
    return ns


ns = build_namespace()
