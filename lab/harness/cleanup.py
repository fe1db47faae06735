"""Removing harness containers: by run id at the end, stale runs of dead owners at the start.

No reaper container can be pulled offline (testcontainers' Ryuk), so every container carries labels
naming its run, its owner pid and its creation time; whoever starts next sweeps what a killed run
left behind. Logs are captured before anything is removed, since removal destroys the evidence.
"""

from __future__ import annotations

import time
from pathlib import Path

from fleet.continuity.detached import alive as pid_alive

LABEL = "lab.harness"
RUN_ID = f"{LABEL}.run-id"
OWNER_PID = f"{LABEL}.owner-pid"
CREATED = f"{LABEL}.created"
KEEP = f"{LABEL}.keep"
HOST_NAME = f"{LABEL}.host"
STALE_AFTER_S = 2 * 3600


def run_labels(run_id: str, owner_pid: int, keep: bool = False) -> dict[str, str]:
    """Labels put on every container of a run."""
    labels = {
        LABEL: "1",
        RUN_ID: run_id,
        OWNER_PID: str(owner_pid),
        CREATED: str(int(time.time())),
    }
    if keep:
        labels[KEEP] = "1"
    return labels


def is_stale(labels: dict[str, str], now: float | None = None, alive=pid_alive,
             ttl_s: float = STALE_AFTER_S) -> bool:
    """A run is stale when its owner died (unless kept by `harness.up`) or it outlived the TTL.

    Kept runs (started by `harness.up`, whose process exits at once) live until `harness.down`.
    """
    now = time.time() if now is None else now
    if labels.get(KEEP) == "1":
        return False
    try:
        created = float(labels.get(CREATED, "0"))
    except ValueError:
        created = 0.0
    if now - created > ttl_s:
        return True
    try:
        pid = int(labels.get(OWNER_PID, "0"))
    except ValueError:
        return True
    return not alive(pid)


def container_logs(container, tail: int = 200) -> str:
    """The container's log tail as text; never raises (used while things are already failing)."""
    try:
        return container.logs(tail=tail, timestamps=False).decode(errors="replace")
    except Exception as exc:  # the container may be gone or the engine busy
        return f"<logs unavailable: {exc}>"


def remove_container(container) -> None:
    """Unpause if needed, then force-remove with volumes; a container already gone is fine."""
    import docker.errors  # noqa: PLC0415

    try:
        container.reload()
        if container.status == "paused":
            container.unpause()
    except docker.errors.APIError:
        pass
    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        pass


def _save_logs(container, directory: Path | None) -> None:
    if directory is None:
        return
    directory.mkdir(parents=True, exist_ok=True)
    name = container.labels.get(HOST_NAME) or container.name
    (directory / f"{name}.log").write_text(container_logs(container, tail=2000))


def remove_run(client, run_id: str, logs_dir: Path | None = None) -> list[str]:
    """Remove every container of `run_id` (logs saved to `logs_dir` first); return their names."""
    removed = []
    for container in client.containers.list(all=True, filters={"label": f"{RUN_ID}={run_id}"}):
        _save_logs(container, logs_dir)
        remove_container(container)
        removed.append(container.name)
    return removed


def sweep_stale(client, now: float | None = None, alive=pid_alive) -> list[str]:
    """Remove containers of runs whose owner died or that outlived the TTL; return their names."""
    removed = []
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        if is_stale(container.labels, now=now, alive=alive):
            remove_container(container)
            removed.append(container.name)
    return removed


def list_runs(client) -> dict[str, list]:
    """Harness containers grouped by run id (for `harness.status`)."""
    runs: dict[str, list] = {}
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        runs.setdefault(container.labels.get(RUN_ID, "?"), []).append(container)
    return runs
