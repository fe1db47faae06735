"""The maintenance lock: hosts closed to every deploy, rollback and restart until it is released.

As Kamal's `kamal lock acquire -m "..."`: an operator about to work on hosts by hand (an OS
upgrade, a migration) takes it with a message, and every run is refused on those hosts, naming
who, why and since when, until `fleet lock.release`. It is the fleet lease's file on each host
(fleet/deploy/lease.py: one owner of that file and its rules), taken by hand: no process keeps
it alive, it lasts until it is released or, when given, until it expires. Acquiring refuses
while a run holds a host (wait for it) or another maintenance lock is there (say whose).
"""

from __future__ import annotations

import socket
import time
import uuid
from typing import Callable, Optional

from fleet.deploy import lease
from fleet.deploy.connection import ConnectionError_
from fleet.deploy.inventory import Host
from fleet.deploy.runner import HostResult, RunOptions, run

ProgressSink = Callable[[str, str, str], None]


def _on_host(host: Host, progress, action: str, record: Optional[dict],
             judge: Callable[[dict], HostResult]) -> HostResult:
    t0 = time.monotonic()
    progress(action, "")
    try:
        res = lease.run_on(host, lease.lease_command(host, action, uuid.uuid4().hex, record),
                           lease.take_timeout(host))
    except Exception as exc:
        kind = exc.kind if isinstance(exc, ConnectionError_) else "failed"
        return HostResult(host.name, kind, False, note=str(exc),
                          duration_s=time.monotonic() - t0)
    answer = lease.answer_of(res)
    if answer is None:
        return HostResult(host.name, "failed", False, duration_s=time.monotonic() - t0,
                          note=f"no answer from the lock command ({lease.no_verdict(res)})")
    result = judge(answer)
    result.duration_s = time.monotonic() - t0
    return result


def acquire(hosts: list[Host], sink: ProgressSink, message: str, owner: str,
            expires_s: Optional[float] = None,
            options: Optional[RunOptions] = None) -> list[HostResult]:
    """Lock `hosts` for maintenance with `message`; refused where a run or another lock holds a
    host (that host only: the others are locked, and `release` undoes it)."""
    now = time.time()
    record = {"owner": owner, "pid": None, "from": socket.gethostname(), "manual": True,
              "message": message, "lease": 0, "expires": now + expires_s if expires_s else None,
              "deadline": now + 3600}

    def judge(host: Host, answer: dict) -> HostResult:
        if answer.get("ok"):
            return HostResult(host.name, "locked", True, note=message, data={"lock": record})
        holder = answer.get("holder") if isinstance(answer.get("holder"), dict) else {}
        what = ("locked for maintenance by" if holder.get("manual")
                else "a run holds it: the fleet lease of")
        return HostResult(host.name, "refused", False, data={"holder": holder},
                          note=f"{what} {lease.describe_holder(holder)}")

    return _each(hosts, sink, options, "take", record, judge)


def release(hosts: list[Host], sink: ProgressSink,
            options: Optional[RunOptions] = None) -> list[HostResult]:
    """Remove the maintenance lock from `hosts` (whoever took it); a run's lease stays."""
    def judge(host: Host, answer: dict) -> HostResult:
        if answer.get("ok"):
            was = answer.get("was")
            note = (f"released the lock of {lease.describe_holder(was)}" if was
                    else "was not locked")
            return HostResult(host.name, "unlocked", True, note=note, data={"was": was})
        holder = answer.get("holder") if isinstance(answer.get("holder"), dict) else {}
        return HostResult(host.name, "refused", False, data={"holder": holder},
                          note="not a maintenance lock: a run holds this host (the fleet "
                               f"lease of {lease.describe_holder(holder)}); it ends with the run")

    return _each(hosts, sink, options, "unlock", None, judge)


def status(hosts: list[Host], sink: ProgressSink,
           options: Optional[RunOptions] = None) -> list[HostResult]:
    """Whether each host is free, locked for maintenance (by whom, why, since when), or held
    by a run."""
    def judge(host: Host, answer: dict) -> HostResult:
        holder = answer.get("holder")
        if not isinstance(holder, dict):
            return HostResult(host.name, "free", True, note="not locked", data={"holder": None})
        if holder.get("manual"):
            return HostResult(host.name, "locked", True, data={"holder": holder},
                              note=f"locked for maintenance by {lease.describe_holder(holder)}")
        return HostResult(host.name, "running", True, data={"holder": holder},
                          note=f"a run holds it: {lease.describe_holder(holder)}")

    return _each(hosts, sink, options, "status", None, judge)


def _each(hosts: list[Host], sink: ProgressSink, options: Optional[RunOptions], action: str,
          record: Optional[dict], judge) -> list[HostResult]:
    opts = options or RunOptions()
    opts.deadline = lambda host: lease.take_timeout(host) + 5
    return run(hosts, lambda h, p: _on_host(h, p, action, record, lambda a: judge(h, a)),
               sink, opts)
