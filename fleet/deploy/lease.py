"""The fleet-wide lease: one changing run (deploy, rollback, restart) at a time on a set of hosts.

Each host's installer lock only covers one host for one install, so two deploys of different
releases started together could each win some hosts and leave a mixed fleet. A run therefore
first takes a lease on every target host (`<state>/fleet/run.lease`, created with O_EXCL; one
round trip per host, TAKE_PARALLEL hosts at a time), and only when it holds all of them does it
change any host. If any host's lease is held by another live run, the run releases what it took
and is refused as a whole, naming the holder. A crashed run's leases expire after their lease
time, as installer locks do. The run id is the lease's token: it is never shown in a refusal, so
only the run that took a lease can release or renew it. (Two runs racing for the same hosts may
both be refused; neither changes anything.)

The same file is the maintenance lock (`fleet lock.acquire`, as Kamal's `lock acquire`): a
lease taken by hand, with who and why, that no process keeps alive and that holds until it is
released (`fleet lock.release`) or, if given, until it expires. While it is there every run is
refused on that host, naming it.

A deploy's take answers more questions in the same round trip: whether the host already has
the artifact; if it lacks it (over ssh), the zip records of the artifact its current release came
from, which the upload may patch (fleet.deploy.artifactpatch); and, for an OpenClaw host that
does not run it yet, which OpenClaw it runs (see `take`). A host the deploy then refuses before
sending anything gets its audit line (`refused` and why) from the release, so such a refusal
leaves nothing else on the host.
"""

from __future__ import annotations

import inspect
import json
import shlex
import uuid
from dataclasses import dataclass, field

from fleet.continuity.statelayout import StateLayout
from fleet.deploy import artifactpatch, inventory
from fleet.deploy.commands import ISOLATED
from fleet.deploy.connection import Connections, connect
from fleet.deploy.inventory import Host
from fleet.deploy.runtime import process, queue, threading, time  # the real ones, or a sim's
from fleet.installer import openclawcli
from fleet.installer.protocol import OPENCLAW

ARTIFACT_STATES = ("active", "stored", "missing")  # what a take says of a deploy's artifact
TAKE_MARGIN_S = 10.0  # beyond the host's connect timeout, for one short command
OPENCLAW_PROBE_S = 5.0  # of that, at most, for an OpenClaw host to say which OpenClaw it runs


# Hosts that connect and take (or release) the lease at once. Each take opens the host's SSH
# connection, a key exchange that costs this machine CPU: a thousand at once pushed connects
# past their connect timeout on a busy 2-core machine, failing hosts for nothing of their own.
# 128 keeps a 1,000-host no-op redeploy (the take is its whole run) to 8 rounds of one short
# command. Not --parallel: that bounds the deploy's own heavier work and may be as low as 1.
TAKE_PARALLEL = 128


def take_timeout(host: Host) -> float:
    """How long taking or releasing a lease may take on `host`: a paused or unreachable host
    must not hold up the run longer than a connect plus one short command."""
    return host.timeouts.connect + TAKE_MARGIN_S


TAKE_WAIT_S = 5.0  # the run waits this much beyond a host's take timeout for its answer


def _take_budget(host: Host) -> float:
    """How long the run waits for `host`'s take, from when that take started."""
    return take_timeout(host) + TAKE_WAIT_S


def _rounds(count: int, workers: int) -> int:
    """How many hosts, at most, one of `workers` threads takes in turn for `count` hosts."""
    return max(1, -(-count // max(1, workers)))


def _start_workers(count: int, work, name: str) -> tuple[int, RuntimeError | None]:
    """Start up to `count` daemon threads running `work()`; how many started, and why not more
    (the machine may be out of threads: the ones that did start serve the queue)."""
    for i in range(count):
        try:
            threading.Thread(target=work, daemon=True, name=f"{name}-{i}").start()
        except RuntimeError as exc:  # out of threads ("can't start new thread")
            return i, exc
    return count, None

LEASE_PY = """\
import json, os, sys, time
OPENCLAW_CLI = @OPENCLAW_CLI@  # fleet.installer.openclawcli, run only when it is asked
state, action, run = os.path.expanduser(sys.argv[1]), sys.argv[2], sys.argv[3]
path = os.path.join(state, @LEASE@)
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
    out = {"owner": h.get("owner", "?"), "pid": h.get("pid", "?"), "from": h.get("from", "?"),
           "age_s": round(age), "lease_s": h.get("lease", 0)}
    if h.get("manual"):
        out.update(manual=True, message=h.get("message", ""), since=h.get("time"),
                   expires=h.get("expires"))
    return out
def held(h):  # a maintenance lock until it is released or expires; a run's lease for its time
    if h.get("manual"):
        return h.get("expires") is None or time.time() < float(h["expires"])
    return time.time() - float(h.get("time") or 0) < float(h.get("lease") or 0)
def audit(entry):  # the line fleet.installer.audit.append writes, for a run refused here
    cur = os.path.join(state, @CURRENT@)
    import socket
    entry.update(time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 host=socket.gethostname())
    entry["from"] = os.path.basename(os.path.realpath(cur)) if os.path.islink(cur) else None
    fd = os.open(os.path.join(state, @AUDIT@), os.O_WRONLY | os.O_CREAT | os.O_APPEND |
                 getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.write(fd, (json.dumps(entry, sort_keys=True) + "\\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
if action == "release":
    cur = read()
    if cur is not None and cur.get("run") == run:
        os.unlink(path)
    if len(sys.argv) > 4:  # the run refused this host before it changed anything
        audit(json.loads(sys.argv[4]))
    print(json.dumps({"ok": True}))
    sys.exit(0)
if action == "status":
    cur = read()
    print(json.dumps({"ok": True, "holder": public(cur) if cur and held(cur) else None}))
    sys.exit(0)
if action == "unlock":  # a maintenance lock, whoever took it; never a run's lease
    cur = read()
    if cur and held(cur) and not cur.get("manual"):
        print(json.dumps({"ok": False, "holder": public(cur)}))
        sys.exit(3)
    if cur is not None:
        os.unlink(path)
    print(json.dumps({"ok": True, "was": public(cur) if cur and cur.get("manual") else None}))
    sys.exit(0)
record = json.loads(sys.argv[4])
if time.time() > float(record.pop("deadline", 0) or 0):  # ran late (a paused host): take nothing
    print(json.dumps({"ok": False, "late": True, "now": time.time()}))  # its clock, for a retry
    sys.exit(4)
takeover = record.pop("takeover", None)  # a holder the control machine saw dead
probe = record.pop("artifact", None)  # {"sha256", "size"}: a deploy asks what the host has
oc = record.pop("openclaw", None)  # {"opts", "budget"}: an OpenClaw host's deploy asks which
def load(rel):
    try:
        with open(os.path.join(state, rel), encoding="utf-8") as fh:
            return json.loads(fh.read())
    except (OSError, ValueError):
        return None
def stored():
    if not isinstance(probe, dict):
        return None
    meta = load(@META@)
    if isinstance(meta, dict) and meta.get("sha256") == probe["sha256"]:
        return "active"
    art = os.path.join(state, @ARTIFACT@.format(sha256=probe["sha256"]))
    try:  # a stored copy is run as it is: only one with these very bytes (a damaged one,
        # of the right size, would run damaged code before it could check itself)
        if os.path.getsize(art) == probe["size"]:
            import hashlib
            digest = hashlib.sha256()
            with open(art, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            if digest.hexdigest() == probe["sha256"]:
                return "stored"
    except OSError:
        pass
    return "missing"  # the upload makes the dir (a refused deploy leaves none)
def openclaw(have):  # {version, source} of this host's OpenClaw; None: not asked, cannot tell
    if not isinstance(oc, dict) or have == "active":
        return None
    opts, budget = oc.get("opts") or {}, float(oc.get("budget") or 5)
    cur = os.path.join(state, @CURRENT@)
    if os.path.isfile(os.path.join(cur, @RELEASE_INSTALLER@)):
        sys.path.insert(0, cur)
        try:  # the active release's installer: the running gateway's version, else the CLI's
            from fleet.installer.openclawgw import installed_openclaw
            return installed_openclaw(state, opts, budget)
        except Exception:  # an older release without it, or it failed: the CLI below
            pass
    try:  # no release here yet: the CLI's version (fleet.installer.openclawcli's cli_version)
        cli = {}
        exec(OPENCLAW_CLI, cli)
        found = cli["cli_version"](opts, None, state, budget)
    except Exception:
        found = None
    return {"version": found, "source": "cli"} if found else None
def unchanged():  # the release file when this artifact is active, ready and alive, else None
    if not isinstance(probe, dict) or not probe.get("release"):  # not asked (or --force)
        return None
    meta, ready, pid = load(@META@), load(@READY@), load(@PIDFILE@)
    pid = pid.get("pid") if isinstance(pid, dict) else pid  # fleet's record, or a bare pid
    if not (isinstance(meta, dict) and meta.get("sha256") == probe["sha256"]
            and isinstance(ready, dict) and ready.get("ready") is True
            and ready.get("release") == probe["release"]
            and isinstance(pid, int) and not isinstance(pid, bool) and pid > 0
            and ready.get("pid") == pid and not os.path.lexists(os.path.join(state, @LOCK@))):
        return None  # an installer's lock left there: only the installer reconciles it
    try:
        os.kill(pid, 0)
    except OSError:  # gone (or not ours to signal)
        return None
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            argv = fh.read()  # ours: a gateway, or one its supervisor forked (with its argv)
            if b"fleet.gateway" not in argv and b"fleet.installer\\0supervise" not in argv:
                return None  # a pid reused after a crash is not our gateway
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return None
    except OSError:
        return None
    return meta
@ZIP_RECORDS@
def base():  # a host lacking the artifact: the records of its current release's, to patch
    if not isinstance(probe, dict) or not probe.get("patch"):
        return None
    meta = load(@META@)
    sha = meta.get("sha256") if isinstance(meta, dict) else None
    if not isinstance(sha, str) or not sha.isalnum():
        return None
    records = zip_records(os.path.join(state, @ARTIFACT@.format(sha256=sha)))
    return {"sha256": sha, "records": records} if records else None
def granted():
    have = stored()
    answer = {"ok": True, "artifact": have, "openclaw": openclaw(have)}
    if have == "missing":
        answer["base"] = base()
    print(json.dumps(answer, separators=(",", ":")))
    sys.exit(0)
record["run"], record["time"] = run, time.time()
os.makedirs(os.path.dirname(path), exist_ok=True)
for _ in range(5):
    cur = read()
    if cur is not None:
        if cur.get("run") == run:
            granted()
        dead = isinstance(takeover, dict) and cur.get("from") == takeover.get("from") and \
            cur.get("pid") == takeover.get("pid")
        if not dead and held(cur):
            print(json.dumps({"ok": False, "holder": public(cur)}))
            sys.exit(3)
        aside = path + ".expired-" + run[:8]
        try:
            os.rename(path, aside)
            os.unlink(aside)
        except FileNotFoundError:
            pass
        continue
    same = unchanged()
    if same is not None:  # nothing to do here: no lease taken, so none to give back
        print(json.dumps({"ok": True, "artifact": "unchanged", "release": same}))
        sys.exit(0)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
    except FileExistsError:
        continue
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\\n")
        fh.flush()
        os.fsync(fh.fileno())
    granted()
else:
    print(json.dumps({"ok": False, "holder": {"owner": "?", "note": "lease file keeps changing"}}))
    sys.exit(3)
"""
for _key, _value in (("@LEASE@", repr(StateLayout.LEASE)),
                     ("@META@", repr(f"{StateLayout.CURRENT}/{StateLayout.RELEASE_META}")),
                     ("@ARTIFACT@", repr(StateLayout.ARTIFACT)),
                     ("@AUDIT@", repr(StateLayout.AUDIT)),
                     ("@CURRENT@", repr(StateLayout.CURRENT)),
                     ("@RELEASE_INSTALLER@", repr(StateLayout.RELEASE_INSTALLER)),
                     ("@READY@", repr(StateLayout.READY)),
                     ("@PIDFILE@", repr(StateLayout.PIDFILE)),
                     ("@LOCK@", repr(StateLayout.LOCK)),
                     # last: their text is sent as it is, never searched for placeholders
                     ("@ZIP_RECORDS@", artifactpatch.RECORDS_PY.rstrip("\n")),
                     ("@OPENCLAW_CLI@", repr(inspect.getsource(openclawcli)))):
    LEASE_PY = LEASE_PY.replace(_key, _value)


def lease_command(host: Host, action: str, run_id: str, record: dict | None = None) -> str:
    args = [host.state_dir, action, run_id] + ([json.dumps(record)] if record else [])
    return (f"cd / && exec {shlex.quote(host.python)} {ISOLATED} -c {shlex.quote(LEASE_PY)} "
            + " ".join(shlex.quote(a) for a in args))


class Unreached(Exception):
    """The take never ran on the host: it could not be connected to (so nothing to release
    there, and the run does not connect to it again)."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


@dataclass
class Lease:
    """The outcome of taking the fleet lease: held on `hosts`, or refused with `refusals`;
    hosts whose answer was late are decided by `wait()`."""

    run_id: str
    held: list[Host] = field(default_factory=list)
    targets: list[Host] = field(default_factory=list)  # every host asked (released at the end)
    refusals: dict[str, str] = field(default_factory=dict)  # host -> why (holder named)
    unreached: dict[str, Unreached] = field(default_factory=dict)  # host -> why (never ran)
    # host -> why its take gave no usable answer (it ran, failed or printed no verdict): not
    # held, so the run changes nothing there
    unanswered: dict[str, str] = field(default_factory=dict)
    late: set[str] = field(default_factory=set)  # still answering when the run went on
    answered_s: dict[str, float] = field(default_factory=dict)  # host -> its answer came after
    # host -> what it has of the artifact a deploy asked about (`take(artifact=...)`): "active"
    # (the current release), "stored" (a file of its size and SHA-256), "missing" (its dir
    # made); absent when not asked or not answered
    artifact: dict[str, str] = field(default_factory=dict)
    # host -> {version, source: gateway|cli}: the OpenClaw an OpenClaw host runs, when a deploy
    # asked (`take(artifact=...)`) of a host that does not run that artifact yet and it could tell
    openclaw: dict[str, dict] = field(default_factory=dict)
    # host -> the artifact its current release came from, when it lacks the deploy's (asked of
    # hosts over ssh): what a patch may reuse (fleet.deploy.artifactpatch)
    base: dict[str, artifactpatch.Base] = field(default_factory=dict)
    # host -> an audit line its `release` appends: the run refused that host before changing it
    audit: dict[str, dict] = field(default_factory=dict)
    # host -> its active release's fleet_release.json: a deploy's take found the artifact active
    # there, its gateway ready and alive and no installer at work (the script's `unchanged`), so
    # it took no lease there and the run has nothing to do on that host (`take(unchanged=...)`)
    unchanged: dict[str, dict] = field(default_factory=dict)
    # hosts whose lease the run's installer gave back itself (nothing left to release there)
    given_back: set[str] = field(default_factory=set)
    _answers: dict[str, object] = field(default_factory=dict)
    _cond: threading.Condition = field(default_factory=lambda: threading.Condition())  # at use
    _deadline: float = 0.0  # the last host's take has started and answered by then
    _started: dict[str, float] = field(default_factory=dict)  # host -> when its take began
    # hosts whose take never ran (still queued when the run stopped taking): nothing to release
    _untaken: set[str] = field(default_factory=set)
    _stop: bool = False  # start no more takes (a refusal, or the take failed as a whole)

    def _due(self, host: Host) -> float:
        """When the run stops waiting for `host`'s take: its own budget from when it started;
        a take still queued is waited for until the last one's turn has surely come."""
        began = self._started.get(host.name)
        return self._deadline if began is None else began + _take_budget(host)

    @property
    def refused(self) -> bool:
        return bool(self.refusals)

    def _record(self, host: Host, answer: object) -> None:
        """File one host's answer under held / refusals / unreached / unanswered."""
        if isinstance(answer, Unreached):
            self.unreached[host.name] = answer
            return
        reply = answer_of(answer)
        if reply is None:
            self.unanswered[host.name] = no_verdict(answer)
            return
        if reply.get("ok") is True and reply.get("artifact") == "unchanged" \
                and isinstance(reply.get("release"), dict):
            self.unchanged[host.name] = reply["release"]
        elif reply.get("ok") is True:
            self.held.append(host)
            if reply.get("artifact") in ARTIFACT_STATES:
                self.artifact[host.name] = reply["artifact"]
            base = artifactpatch.base_of(reply.get("base"))
            if base is not None:
                self.base[host.name] = base
            found = reply.get("openclaw")
            if isinstance(found, dict) and isinstance(found.get("version"), str):
                self.openclaw[host.name] = found
        elif not isinstance(reply.get("holder"), dict):  # took nothing: ran after its deadline
            self.unanswered[host.name] = ("the take ran after its deadline (the host paused, or "
                                          "its clock is ahead of this machine's): nothing taken")
        else:
            holder = reply["holder"]
            if holder.get("manual"):
                self.refusals[host.name] = (
                    f"locked for maintenance by {describe_holder(holder)}; nothing was changed "
                    "on any host. When the work is done: "
                    f"{inventory.command('lock.release', [host.name], host.inventory)}")
            else:
                self.refusals[host.name] = (
                    "deploy lock of another run (fleet lease) held on this host by "
                    f"{describe_holder(holder)}; nothing was changed on any host. Wait for that "
                    "run to finish (a crashed run's lease expires)")

    def wait(self, host: Host) -> str | Unreached | None:
        """For a host whose answer was late, block until it comes (bounded by the take's own
        timeout); then None when the run may go on there, a refusal text, or the Unreached
        error. Hosts answered in time return at once."""
        if host.name in self.late:
            with self._cond:
                while host.name not in self._answers and time.monotonic() < self._due(host):
                    self._cond.wait(max(0.01, self._due(host) - time.monotonic()))
                answer = self._answers.get(host.name)
                self.late.discard(host.name)
                never = answer is None and host.name not in self._started
                if never:  # its take never began: it never will, so never change the host
                    self._untaken.add(host.name)
            if never:
                self.unanswered[host.name] = ("its take did not start in time (the hosts "
                                              "before it took too long): nothing taken")
                return None
            if answer is None:
                return None  # no verdict at all: the run's own connect reports the host
            self._record(host, answer)
            refusal = self.refusals.get(host.name)
            if refusal is not None:
                return refusal
        return self.unreached.get(host.name)


def _utc(stamp: object) -> str | None:
    """A lease file's time as `YYYY-MM-DD HH:MM UTC`; None when it is not a time at all, and
    the raw number when no calendar holds it (a lock written with an absurd `--expires` before
    that was bounded must still be shown, and released)."""
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)):
        return None
    try:
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(stamp)))
    except (OverflowError, OSError, ValueError):
        return f"{stamp:.0f} (seconds since 1970)"


def describe_holder(holder: dict) -> str:
    if holder.get("manual"):
        when = _utc(holder.get("since")) or "?"
        expires = _utc(holder.get("expires"))
        until = f", until {expires}" if expires else ""
        return (f"{holder.get('owner', '?')} since {when}{until}: "
                f"{holder.get('message') or '(no message)'}")
    return ("{} (pid {} on {}, {}s ago, lease {}s)".format(
        holder.get("owner", "?"), holder.get("pid", "?"), holder.get("from", "?"),
        holder.get("age_s", "?"), holder.get("lease_s", "?")))


def _each(hosts: list[Host], fn, timeout: float) -> dict[str, object]:
    """`fn(host)` for every host, at most TAKE_PARALLEL at once on daemon threads; a host not
    done `timeout` after its turn came (or never reached, its turn bounded the same way) gets
    a TimeoutError."""
    out: dict[str, object] = {}
    cond = threading.Condition()
    jobs: queue.Queue = queue.Queue()
    for h in hosts:
        jobs.put(h)

    def work() -> None:
        while True:
            try:
                host = jobs.get(block=False)
            except queue.Empty:
                return
            try:
                value: object = fn(host)
            except Exception as exc:  # reported per host
                value = exc
            with cond:
                out[host.name] = value
                cond.notify_all()

    workers, _ = _start_workers(min(TAKE_PARALLEL, len(hosts)), work, "fleet-release")
    if not workers:  # out of threads: each in turn here, bounded by its own command timeout
        work()       # (a lease is never left behind for want of a thread)
    deadline = time.monotonic() + _rounds(len(hosts), workers) * timeout
    with cond:
        while len(out) < len(hosts) and time.monotonic() < deadline:
            cond.wait(max(0.01, deadline - time.monotonic()))
        return {h.name: out.get(h.name, TimeoutError(f"no answer within {timeout:g}s"))
                for h in hosts}


def run_on(host: Host, command: str, timeout: float, conns: Connections | None = None):
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


GRACE_MIN_S = 0.5  # a late answer is one still missing this long after the run began ...
GRACE_FACTOR = 1.0  # ... and after the median answer time of the hosts that answered, from a
# host that has not even completed its SSH connection (one that has is alive: it is waited for)


def _take_one(h: Host, run_id: str, record: dict, connected=lambda: None,
              conns: Connections | None = None) -> object:
    """One host's take (with the takeover of a holder that ran here and is gone); raises
    Unreached when the host cannot be connected to, so the take never ran. `connected()` is
    called once the SSH connection stands. With `conns`, over the run's shared connection (kept
    open for the work that follows; dropped if the take fails on it)."""
    try:
        conn = conns.get(h) if conns is not None else connect(h)
    except Exception as exc:
        raise Unreached(exc) from None
    connected()
    failed = True
    if "artifact" in record and not h.is_local:  # a deploy over ssh: what a patch may reuse
        record = dict(record, artifact=dict(record["artifact"], patch=True))
    if "artifact" in record and h.manager == OPENCLAW:  # a deploy: which OpenClaw runs there
        record = dict(record, openclaw={"opts": h.manager_options, "budget": OPENCLAW_PROBE_S})
    try:
        # a take that only runs after its deadline (host paused meanwhile) takes nothing
        ahead = [0.0]  # how far the host's clock is ahead of ours, once a late answer says

        def deadline() -> float:
            return time.time() + ahead[0] + take_timeout(h)

        res = conn.run(lease_command(h, "take", run_id, dict(record, deadline=deadline())),
                       take_timeout(h))
        # A holder that ran on this machine and is gone (its release never reached a host that
        # was down or killed) is taken over at once, as a dead installer's lock is.
        late = answer_of(res) or {}
        if late.get("late") and isinstance(late.get("now"), (int, float)):
            # It ran after its deadline by the host's clock, yet this run is still here to use
            # or release it: the host's clock is ahead of ours (or it paused). Once more, with
            # the deadline in the host's own time; a second late answer takes nothing.
            ahead[0] = max(0.0, float(late["now"]) - time.time())
            res = conn.run(lease_command(h, "take", run_id, dict(record, deadline=deadline())),
                           take_timeout(h))
        holder = (answer_of(res) or {}).get("holder")
        if isinstance(holder, dict) and _dead_here(holder):
            res = conn.run(lease_command(h, "take", run_id, dict(
                record, deadline=deadline(),
                takeover={"from": holder.get("from"), "pid": holder.get("pid")})),
                take_timeout(h))
        failed = False
        return res
    finally:
        if conns is None:
            conn.close()
        elif failed:
            conns.drop(h)


def _go_on(answered: list[float], total: int, elapsed: float) -> bool:
    """Whether the run may go on without the hosts still unconnected: at least half the hosts
    answered and the others are late by `GRACE_*` (a paused host never sends its SSH banner;
    waiting for its connect timeout held every other host back that long)."""
    if not answered or 2 * len(answered) < total:
        return False
    typical = sorted(answered)[len(answered) // 2]
    return elapsed >= max(GRACE_MIN_S, GRACE_FACTOR * typical)


def take(hosts: list[Host], owner: str, lease_s: float,
         conns: Connections | None = None, artifact: tuple[str, int] | None = None,
         unchanged: str | None = None) -> Lease:
    """Take the lease on every host, or none: on any refusal, release what was taken.

    A host that cannot be reached is not a refusal: the run reports it failed as before. A host
    whose answer is late (see `_go_on`) does not hold the others back: its take goes on, and the
    run's work on that host first waits for it (`Lease.wait`), so no host is ever changed
    without its lease; a refusal that comes late is that host's alone. With `conns`, the
    connections stay open for the run (and its `release`). With `artifact` (SHA-256, size), each
    host also says in the same answer whether it has that artifact (`Lease.artifact`), so a
    deploy sends a host that lacks it the upload at once instead of first asking the installer;
    and an OpenClaw host that does not run it yet says which OpenClaw it runs (`Lease.openclaw`:
    its active release's installer asks the running gateway, else the CLI answers, within
    OPENCLAW_PROBE_S), so a deploy refuses a host its release does not support before the upload.
    With `unchanged` (the artifact's release name; a deploy without --force), a host where that
    release is active, its gateway ready and alive and no installer at work takes no lease and
    says so (`Lease.unchanged`): a no-op redeploy is this one short process per host. A host
    whose lease another run holds is refused as ever.

    At most TAKE_PARALLEL hosts connect and take at once, on as many worker threads fed from a
    queue (a fixed bound, not the run's --parallel: a take is one short command, and a no-op
    redeploy at --parallel 1 is still the take of every host); the others wait their turn. Each
    host's take is timed from when it starts, so waiting in the queue never makes a host late
    or unreachable; the whole wait is bounded by the queue's rounds times the longest host's
    budget (`Lease._deadline`). Once a host refuses, hosts still queued are not asked.
    """
    lease = Lease(uuid.uuid4().hex)
    record = {"owner": owner, "pid": process.pid(), "from": process.hostname(),
              "lease": float(lease_s)}
    if artifact is not None:
        record["artifact"] = {"sha256": artifact[0], "size": int(artifact[1])}
        if unchanged:
            record["artifact"]["release"] = unchanged
    times: list[float] = []  # each answered host's round trip, from its own take's start
    connected: set[str] = set()
    deciding = [True]  # until the take returns
    jobs: queue.Queue = queue.Queue()
    for h in hosts:
        jobs.put(h)

    def one(h: Host) -> None:
        try:
            value: object = _take_one(h, lease.run_id, record, lambda: connected.add(h.name),
                                      conns)
        except Exception as exc:  # reported per host
            value = exc
        with lease._cond:
            lease._answers[h.name] = value
            lease.answered_s[h.name] = time.monotonic() - lease._started[h.name]
            times.append(lease.answered_s[h.name])
            if deciding[0] and _refuses(value):  # the run is refused as a whole: take no
                lease._stop = True                 # more (later, the refusal is this host's)
            lease._cond.notify_all()

    def worker() -> None:
        while True:
            try:
                h = jobs.get(block=False)
            except queue.Empty:
                return
            with lease._cond:
                if lease._stop or h.name in lease._untaken:
                    lease._untaken.add(h.name)
                    lease._cond.notify_all()
                    continue
                lease._started[h.name] = time.monotonic()
            one(h)

    lease.targets = list(hosts)
    try:
        began = time.monotonic()
        workers, why = _start_workers(min(TAKE_PARALLEL, len(hosts)), worker, "fleet-take")
        longest = max((_take_budget(h) for h in hosts), default=TAKE_MARGIN_S + TAKE_WAIT_S)
        lease._deadline = began + _rounds(len(hosts), workers) * longest
        with lease._cond:
            if hosts and not workers:  # out of threads: no take runs, nothing to give back;
                for h in hosts:        # the run reports the hosts and leaves them alone
                    lease._answers[h.name] = Unreached(RuntimeError(
                        f"fleet could not start a thread to take the fleet lease ({why})"))
                    lease.answered_s[h.name] = 0.0
            while not _decided(lease, hosts, times, connected):
                lease._cond.wait(0.05)
            answers = dict(lease._answers)
            deciding[0] = False
    except BaseException:  # Ctrl-C or a bug while taking: give back whatever a take landed
        _give_back(lease, hosts, conns)
        raise
    for host in hosts:
        if host.name in answers:
            lease._record(host, answers[host.name])
        elif host.name not in lease._untaken:
            lease.late.add(host.name)
    if lease.refused:
        with lease._cond:  # hosts still waiting their turn are not asked at all
            lease._stop = True
            lease._untaken.update(h.name for h in hosts if h.name not in lease._started
                                  and h.name not in lease._answers)
        for host in hosts:  # a take still under way may yet succeed: let it land first
            if host.name in lease.late:
                lease.wait(host)
        release(lease, conns)
        lease.held = []
        lease.targets = []
    return lease


def _refuses(answer: object) -> bool:
    """Whether a take's answer is a refusal (another run's lease or a maintenance lock)."""
    reply = answer_of(answer)
    return reply is not None and reply.get("ok") is not True \
        and isinstance(reply.get("holder"), dict)


def _decided(lease: Lease, hosts: list[Host], times: list[float], connected: set[str]) -> bool:
    """Whether the take may stop waiting (under `lease._cond`): every host answered, or the
    run was refused (hosts not started yet never are), or only late hosts are left: each
    started (a queued host is never late for its place in the queue) and either past its own
    budget or not even connected while most hosts answered (`_go_on`); or, as a bound, the
    last host's turn has surely come and gone (`lease._deadline`)."""
    now = time.monotonic()
    if lease._stop:
        lease._untaken.update(h.name for h in hosts if h.name not in lease._started
                              and h.name not in lease._answers)
    if len(lease._answers) + len(lease._untaken) >= len(hosts) or now >= lease._deadline:
        return True
    if len(lease._started) + len(lease._untaken) < len(hosts):  # some still queued
        return False
    pending = [h for h in hosts if h.name not in lease._answers
               and h.name not in lease._untaken]
    if all(now >= lease._due(h) for h in pending):
        return True
    waited = min(now - lease._started[h.name] for h in pending)
    return not connected.intersection(h.name for h in pending) \
        and _go_on(times, len(hosts), waited)


def _give_back(lease: Lease, hosts: list[Host], conns: Connections | None) -> None:
    """After a take failed as a whole: start no more takes, let the ones under way land (each
    given up at its own budget), then release every host a take ran on, by run id."""
    with lease._cond:
        lease._stop = True
        lease._untaken.update(h.name for h in hosts if h.name not in lease._started
                              and h.name not in lease._answers)
        while True:
            left = [h for h in hosts if h.name in lease._started
                    and h.name not in lease._answers]
            due = max((lease._due(h) for h in left), default=0.0)
            if time.monotonic() >= due:
                break
            lease._cond.wait(max(0.01, due - time.monotonic()))
        for host in hosts:
            if isinstance(lease._answers.get(host.name), Unreached):
                lease.unreached[host.name] = lease._answers[host.name]
    release(lease, conns)


def answer_of(res: object) -> dict | None:
    """The JSON verdict a lease command printed last (None: an exception or no verdict)."""
    if isinstance(res, Exception):
        return None
    try:
        answer = json.loads((getattr(res, "stdout", "") or "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return answer if isinstance(answer, dict) else None


def no_verdict(res: object) -> str:
    """What a take that gave no JSON verdict said instead, for the host's report."""
    if isinstance(res, Exception):
        return str(res) or type(res).__name__
    out = ((getattr(res, "stderr", "") or "") + (getattr(res, "stdout", "") or "")).strip()
    tail = out.splitlines()[-1][:200] if out else "no output"
    return f"exit {getattr(res, 'exit_code', '?')}: {tail}"


def _dead_here(holder: dict) -> bool:
    """The holder was a run on this control machine whose process no longer exists."""
    pid = holder.get("pid")
    return (holder.get("from") == process.hostname() and isinstance(pid, int)
            and pid != process.pid() and not process.alive(pid))


def release_host(lease: Lease, host: Host, conns: Connections | None = None) -> None:
    """Give back the lease on one host at once: the run gave up on it (no answer from its
    installer), and an installer of the run still at work there must not switch now (it checks
    the lease before it switches). Best effort and bounded; `release` later is a no-op there."""
    try:
        run_on(host, lease_command(host, "release", lease.run_id), take_timeout(host), conns)
    except Exception:  # the run's release at the end tries again
        pass


def release(lease: Lease, conns: Connections | None = None) -> None:
    """Give back the lease on every target host (by run id: a host where the take did not
    answer in time may still have taken it), appending `Lease.audit`'s line where the run
    refused the host; best effort and bounded."""
    hosts = [h for h in (lease.targets or lease.held) if h.name not in lease.unreached
             and h.name not in lease.unchanged and h.name not in lease.given_back
             and h.name not in lease._untaken]
    if hosts:
        longest = max(_take_budget(h) for h in hosts)
        _each(hosts, lambda h: run_on(h, lease_command(h, "release", lease.run_id,
                                                       lease.audit.get(h.name)),
                                       take_timeout(h), conns), longest)


FENCE_LEASE_S = 120.0  # a fence holds the lease only for its own take and release


def fence(hosts: list[Host], owner: str) -> None:
    """Take the fleet lease on `hosts` and give it back at once. A take replaces the lease of a
    run that died on this machine (as every take does), so an installer that run left in flight
    there (hung, or still uploading) never switches afterwards: it switches only while its own
    run holds the lease (fleet.installer.transaction.fleet_lease_run). Best effort: where
    another live run holds a host, nothing is taken (the work that follows is refused there)."""
    if hosts:
        release(take(hosts, owner, FENCE_LEASE_S))
