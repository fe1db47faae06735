"""The fleet-wide lease: one changing run (deploy, rollback, restart) at a time on a set of hosts.

Each host's installer lock only covers one host for one install, so two deploys of different
releases started together could each win some hosts and leave a mixed fleet. A run therefore
first takes a lease on every target host (`<state>/fleet/run.lease`, created with O_EXCL; one
round trip per host, in parallel), and only when it holds all of them does it change any host.
If any host's lease is held by another live run, the run releases what it took and is refused as
a whole, naming the holder. A crashed run's leases expire after their lease time, as installer
locks do. The run id is the lease's token: it is never shown in a refusal, so only the run that
took a lease can release or renew it. (Two runs racing for the same hosts may both be refused;
neither changes anything.)
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field

from fleet.deploy.connection import Connections, connect
from fleet.deploy.inventory import Host
from fleet.installer.lock import pid_alive

LEASE_FILE = "fleet/run.lease"
TAKE_MARGIN_S = 10.0  # beyond the host's connect timeout, for one short command


def take_timeout(host: Host) -> float:
    """How long taking or releasing a lease may take on `host`: a paused or unreachable host
    must not hold up the run longer than a connect plus one short command."""
    return float(host.timeouts.get("connect", 10) or 10) + TAKE_MARGIN_S

LEASE_PY = """\
import json, os, sys, time
state, action, run = os.path.expanduser(sys.argv[1]), sys.argv[2], sys.argv[3]
path = os.path.join(state, "fleet", "run.lease")
def read():
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
def public(h):
    age = time.time() - float(h.get("time") or 0)
    return {"owner": h.get("owner", "?"), "pid": h.get("pid", "?"), "from": h.get("from", "?"),
            "age_s": round(age), "lease_s": h.get("lease", 0)}
if action == "release":
    cur = read()
    if cur is not None and cur.get("run") == run:
        os.unlink(path)
    print(json.dumps({"ok": True}))
    sys.exit(0)
record = json.loads(sys.argv[4])
if time.time() > float(record.pop("deadline", 0) or 0):  # ran late (a paused host): take nothing
    print(json.dumps({"ok": False, "late": True}))
    sys.exit(4)
takeover = record.pop("takeover", None)  # a holder the control machine saw dead
record["run"], record["time"] = run, time.time()
os.makedirs(os.path.dirname(path), exist_ok=True)
for _ in range(5):
    cur = read()
    if cur is not None:
        if cur.get("run") == run:
            break
        dead = isinstance(takeover, dict) and cur.get("from") == takeover.get("from") and \
            cur.get("pid") == takeover.get("pid")
        if not dead and time.time() - float(cur.get("time") or 0) < float(cur.get("lease") or 0):
            print(json.dumps({"ok": False, "holder": public(cur)}))
            sys.exit(3)
        aside = path + ".expired-" + run[:8]
        try:
            os.rename(path, aside)
            os.unlink(aside)
        except FileNotFoundError:
            pass
        continue
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
    except FileExistsError:
        continue
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\\n")
        fh.flush()
        os.fsync(fh.fileno())
    print(json.dumps({"ok": True}))
    sys.exit(0)
else:
    print(json.dumps({"ok": False, "holder": {"owner": "?", "note": "lease file keeps changing"}}))
    sys.exit(3)
print(json.dumps({"ok": True}))
"""


def lease_command(host: Host, action: str, run_id: str, record: dict | None = None) -> str:
    args = [host.state_dir, action, run_id] + ([json.dumps(record)] if record else [])
    return (f"cd / && exec {shlex.quote(host.python)} -c {shlex.quote(LEASE_PY)} "
            + " ".join(shlex.quote(a) for a in args))


@dataclass
class Lease:
    """The outcome of taking the fleet lease: held on `hosts`, or refused with `refusals`."""

    run_id: str
    held: list[Host] = field(default_factory=list)
    targets: list[Host] = field(default_factory=list)  # every host asked (released at the end)
    refusals: dict[str, str] = field(default_factory=dict)  # host -> why (holder named)

    @property
    def refused(self) -> bool:
        return bool(self.refusals)


def describe_holder(holder: dict) -> str:
    return ("{} (pid {} on {}, {}s ago, lease {}s)".format(
        holder.get("owner", "?"), holder.get("pid", "?"), holder.get("from", "?"),
        holder.get("age_s", "?"), holder.get("lease_s", "?")))


def _each(hosts: list[Host], fn, timeout: float) -> dict[str, object]:
    """`fn(host)` for every host on daemon threads; a host past `timeout` gets a TimeoutError."""
    out: dict[str, object] = {}
    lock = threading.Lock()

    def work(host: Host) -> None:
        try:
            value: object = fn(host)
        except Exception as exc:  # reported per host
            value = exc
        with lock:
            out[host.name] = value

    threads = [threading.Thread(target=work, args=(h,), daemon=True) for h in hosts]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    with lock:
        return {h.name: out.get(h.name, TimeoutError(f"no answer within {timeout:g}s"))
                for h in hosts}


def _run_on(host: Host, command: str, timeout: float, conns: Connections | None = None):
    """Run `command` on `host`: over the run's shared connection when given (kept open for the
    deploy that follows), else over a connection of its own."""
    if conns is not None:
        try:
            return conns.get(host).run(command, timeout)
        except Exception:
            conns.drop(host)
            raise
    conn = connect(host)
    try:
        return conn.run(command, timeout)
    finally:
        conn.close()


def take(hosts: list[Host], owner: str, lease_s: float,
         conns: Connections | None = None) -> Lease:
    """Take the lease on every host, or none: on any refusal, release what was taken.

    A host that cannot be reached is not a refusal: the run reports it failed as before.
    With `conns`, the connections stay open for the run (and its `release`).
    """
    lease = Lease(uuid.uuid4().hex)
    record = {"owner": owner, "pid": os.getpid(), "from": socket.gethostname(),
              "lease": float(lease_s)}
    longest = max((take_timeout(h) for h in hosts), default=TAKE_MARGIN_S)

    def one(h: Host):
        # a take that only runs after its deadline (host paused meanwhile) takes nothing
        late = dict(record, deadline=time.time() + take_timeout(h))
        return _run_on(h, lease_command(h, "take", lease.run_id, late), take_timeout(h),
                       conns)

    answers = _each(hosts, one, longest + 5)
    # A holder that ran on this machine and is gone (its release never reached a host that was
    # down or killed) is taken over at once, as a dead installer's lock is, not after its lease.
    dead = {name: holder for name, holder in _holders(answers).items() if _dead_here(holder)}
    if dead:
        by_name = {h.name: h for h in hosts}
        answers.update(_each([by_name[n] for n in dead], lambda h: _run_on(
            h, lease_command(h, "take", lease.run_id, dict(
                record, deadline=time.time() + take_timeout(h),
                takeover={"from": dead[h.name].get("from"), "pid": dead[h.name].get("pid")})),
            take_timeout(h), conns), longest + 5))
    lease.targets = list(hosts)
    for host in hosts:
        answer = _answer(answers[host.name])
        if answer is None:
            continue
        if answer.get("ok") is True:
            lease.held.append(host)
        elif isinstance(answer.get("holder"), dict):
            lease.refusals[host.name] = (
                "deploy lock of another run (fleet lease) held on this host by "
                f"{describe_holder(answer['holder'])}; nothing was changed on any host. Wait "
                "for that run to finish (a crashed run's lease expires)")
    if lease.refused:
        release(lease, conns)
        lease.held = []
        lease.targets = []
    return lease


def _answer(res: object) -> dict | None:
    if isinstance(res, Exception):
        return None
    try:
        answer = json.loads((getattr(res, "stdout", "") or "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return answer if isinstance(answer, dict) else None


def _holders(answers: dict[str, object]) -> dict[str, dict]:
    """host name -> the holder a refused take named."""
    out = {}
    for name, res in answers.items():
        answer = _answer(res)
        if answer and isinstance(answer.get("holder"), dict):
            out[name] = answer["holder"]
    return out


def _dead_here(holder: dict) -> bool:
    """The holder was a run on this control machine whose process no longer exists."""
    pid = holder.get("pid")
    return (holder.get("from") == socket.gethostname() and isinstance(pid, int)
            and pid != os.getpid() and not pid_alive(pid))


def release(lease: Lease, conns: Connections | None = None) -> None:
    """Give back the lease on every target host (by run id: a host where the take did not
    answer in time may still have taken it); best effort and bounded."""
    hosts = lease.targets or lease.held
    if hosts:
        longest = max(take_timeout(h) for h in hosts)
        _each(hosts, lambda h: _run_on(h, lease_command(h, "release", lease.run_id),
                                       take_timeout(h), conns), longest + 5)
