"""fleet.deploy: verified, atomic, parallel deploys to a fleet (control side).

The API the tasks use, also for Python callers (harness, benchmarks):

    from fleet.deploy import load, deploy, load_artifact
    hosts = load("inventory.yaml").select("sandbox")
    results = deploy(hosts, load_artifact("dist/fleet-5.0.0.pyz"), lambda h, step, note: None)

Each call returns one HostResult per host (`ok`, `result`, `from_release`, `to_release`, `steps`
with control-side and `host.<step>` timings, `data` = the installer's JSON).
"""

from fleet.deploy.api import (
    ArtifactRef,
    build_artifact,
    deploy,
    load_artifact,
    restart,
    rollback,
    status,
)
from fleet.deploy.inventory import Host, Inventory, InventoryError, default_inventory, load
from fleet.deploy.runner import HostResult, RunOptions

__all__ = ["ArtifactRef", "Host", "HostResult", "Inventory", "InventoryError", "RunOptions",
           "build_artifact", "default_inventory", "deploy", "load", "load_artifact", "restart",
           "rollback", "status"]
