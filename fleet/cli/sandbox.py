"""`invoke sandbox.down [--purge]`: stop every sandbox gateway, orphans included (thin)."""

from __future__ import annotations

from invoke import Collection, Exit

from fleet.cli.flags import USAGE_ERROR, task

INV_HELP = "inventory file (default: $FLEET_INVENTORY, else ./inventory.yaml)"


@task(help={"inventory": INV_HELP,
            "purge": "also remove the sandbox hosts' state dirs (releases, logs, workspaces)"})
def down(c, inventory="", purge=False):
    """Stop every gateway of the sandbox (by pidfile; orphans whose .fleet/ is gone too)."""
    from fleet.deploy.inventory import InventoryError, default_inventory, load  # noqa: PLC0415
    from fleet.deploy.sandbox import down as take_down  # noqa: PLC0415
    from fleet.deploy.sandbox import sandbox_root  # noqa: PLC0415
    from fleet.terminal.text import visible  # noqa: PLC0415

    try:
        inv = load(inventory) if inventory else default_inventory()
    except InventoryError as exc:  # it may quote the inventory: escaped, as every task's
        raise Exit(visible(f"error: {exc}", multiline=True), USAGE_ERROR) from None
    lines = take_down(inv, purge)
    for line in lines:  # host names, state dirs, errors: the inventory's and the OS's words
        print(visible(line))
    failed = [line for line in lines if "could not" in line]
    print(f"sandbox: {sum('stopped' in line for line in lines)} gateway(s) stopped under "
          f"{visible(sandbox_root(inv))}" + (f", {len(failed)} failure(s)" if failed else ""))
    if failed:
        raise Exit(code=1)


ns = Collection("sandbox")
ns.add_task(down)
