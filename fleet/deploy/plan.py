"""The per-host plan: what a deploy would do on each host, worked out from its status alone.

`--dry-run` prints this and changes nothing: the check round trip only reads (no directory is
created, nothing uploaded, no lock taken). The logic mirrors the installer's own decision, so
the plan is what the installer would do: nothing when the same SHA is active and ready, a restart
when it is active but not ready, otherwise upload if missing, switch, restart and verify.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet.continuity.statelayout import release_name
from fleet.installer.protocol import HostStatus


@dataclass
class HostPlan:
    host: str
    action: str                      # nothing | restart | install | blocked
    current: str | None
    target: str
    upload: bool
    details: list[str] = field(default_factory=list)

    def describe(self) -> str:
        head = {"nothing": "nothing to do", "restart": "restart on the same release",
                "install": f"install {self.target}", "blocked": "blocked"}[self.action]
        return "; ".join([head, *self.details])

    def as_dict(self) -> dict:
        return {"host": self.host, "action": self.action, "current": self.current,
                "target": self.target, "upload": self.upload, "details": self.details,
                "summary": self.describe()}


def plan_host(host: str, status: HostStatus, have_artifact: bool, version: str, sha256: str,
              size: int, force: bool = False) -> HostPlan:
    current = status.current or None
    current_name = current.get("release") if current else None
    target = release_name(version, sha256)
    lock = status.lock
    details = []
    if lock and not lock.stale:
        return HostPlan(host, "blocked", current_name, target, False,
                        [f"deploy lock held by {lock.owner} (pid {lock.pid} on {lock.host})"])
    if lock:
        details.append(f"will take over a stale lock ({lock.stale})")
    upload = not have_artifact
    free = status.disk_free_bytes
    if free is not None and free < 4 * size:  # the upload plus its unpacked release
        details.append(f"LOW DISK: {free} bytes free, a deploy needs about {4 * size}")
    if current and current.get("sha256") == sha256:
        if status.ready and not force:
            return HostPlan(host, "nothing", current_name, target, False,
                            ["same SHA-256 active and ready", *details])
        why = "forced" if force else f"not ready: {status.problem}"
        return HostPlan(host, "restart", current_name, target, upload, [why, *details])
    details.insert(0, f"from {current_name or 'nothing installed'}")
    if upload:
        details.append(f"upload {size} bytes")
    details.append("switch, restart, verify versions; roll back on failure")
    return HostPlan(host, "install", current_name, target, upload, details)
