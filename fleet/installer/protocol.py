"""What the control side and the installer agree on: manager names, how long a run may take, and
the one JSON answer every installer command prints.

Both sides import this module (the control side may import host code; this one needs nothing
but the standard library), so the installer's argument choices, the control side's inventory
check, the installer's own lock lease and the control side's command deadline can never drift
apart, and each answer is read into a typed value that says which host and field is wrong
instead of a dict probed with `.get(...)`.

The answer of install / rollback / restart (`InstallerResult`): `{action, ok, result, host,
state_dir, owner, from, to, reason, notes, restarted, steps: {step: seconds}, duration_s,
cpu_s: {step: CPU seconds, process: the installer's CPU in all}, gateway: <health>, selftest?,
lock_takeover?, lock_holder?, pruned?}` where `result` is installed | unchanged | rolled_back |
restarted | refused | failed and `from`/`to` are `release_summary()`s `{release, version,
sha256, components}`. An install that restarted the gateway runs the plugins' self-tests after
readiness (step `selftest`; `selftest`: `{state: passed|failed|unsupported, plugins: {id: ...},
reason}`, fleet/installer/selftest.py):
a failed one switches back as a failed readiness does. `status` (`HostStatus`) gives
`{result: "status", current, previous, releases, gateway, ready, problem, lock, last_audit,
disk_free_bytes, hooks, openclaw_support?}`, `lock` the holder `{owner, pid, host, time, lease,
stale}` (`LockHolder`), `hooks` each plugin's hook statistics `{id: {calls, errors, timeouts,
restarts, since}}` (`HookStats`; null when the gateway does not answer them),
`openclaw_support` (OpenClaw hosts) `{state: proven|unproven|outside, version, message}`: the
host's OpenClaw against the active release's proof. `install` takes ALLOW_UNPROVEN_OPENCLAW to
go ahead on an OpenClaw the release was not proven on (the answer's `notes` then say so).
`doctor` (`DoctorAnswer`) gives `{result: "doctor", checks: [{check, severity, message}],
continuity: {severity, targets}, time, severity, exit, openclaw_support?, ...}`
(fleet/installer/doctor.py). Bad arguments give `{ok: false, result: "error", reason}`.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, NamedTuple, Optional, Tuple, Type, TypeVar

MANAGERS = ("fleet", "systemd", "launchd", "openclaw", "command")
FLEET_MANAGER, SYSTEMD, LAUNCHD, OPENCLAW, COMMAND = MANAGERS  # FLEET_MANAGER: the default
READY_TIMEOUT_S = 60.0  # default `--timeout` (one restart's readiness wait) = timeouts.ready
STEP_SLACK_S = 5.0  # beyond --timeout, for one restart or one readiness wait
# The longest wait anyone may ask for: an inventory's timeouts, the installer's --timeout and
# --lock-wait, an OpenClaw host's cli_timeout and stop_grace. Longer is a typo (1e300 overflowed
# every wait built from it), and deadlines and leases are sums of these.
MAX_WAIT_S = 86400.0
MAX_LEASE_S = 7 * 86400.0  # a lock's lease: outlives worst_case_s(MAX_WAIT_S)
# `install` (and `invoke deploy`): go ahead on an OpenClaw the release was not proven on
ALLOW_UNPROVEN_OPENCLAW = "--allow-unproven-openclaw"
# `install --fleet-lease RUN`: the run's fleet lease (`<state>/fleet/run.lease`, fleet.deploy.lease)
# must still be there when the installer switches; a run that gave up on a hung host released it
FLEET_LEASE = "--fleet-lease"
# With FLEET_LEASE, this variable set to "1" in the installer's environment: when done, it gives
# that run's lease back itself (answer `lease_given_back: true`), so the run needs no process of
# its own on the host for that. An environment variable, not a flag: an older installer ignores
# it (its answer does not say so, and the run releases the lease as before).
LEASE_GIVE_BACK_ENV = "FLEET_LEASE_GIVE_BACK"


def worst_case_s(timeout: float) -> float:
    """The longest an install, rollback or restart with `--timeout timeout` runs: a restart, a
    readiness wait and the plugins' self-tests, then on failure the switch-back restart and its
    readiness wait, each up to `timeout` plus a little. The installer's lock lease must outlive
    it (or a peer takes over mid-run), and the control side must wait for it (or it cuts a host
    off mid-rollback)."""
    return 5 * (timeout + STEP_SLACK_S)


def read_only_s(timeout: float) -> float:
    """The longest `status` or `doctor` with `--timeout timeout` may run before it gives up on
    its own: two waits of `timeout` (an OpenClaw CLI call and a gateway answer) plus a little.
    Read-only commands change nothing, so nothing is lost when they end; a host-side process
    that outlived the control side's wait would be left running for nobody."""
    return 2 * timeout + STEP_SLACK_S


def wait_problem(value: Any, maximum: float = MAX_WAIT_S) -> Optional[str]:
    """What is wrong with a number of seconds someone typed (None if nothing): it must be a
    finite number from 0 to `maximum`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        return f"expected a number of seconds >= 0, got {value!r}"
    if not value <= maximum:
        return (f"{value!r} seconds: at most {maximum:.0f} ({_days(maximum)}); use a smaller "
                "number")
    return None


def _days(seconds: float) -> str:
    days = seconds / 86400
    return "a day" if days == 1 else f"{days:g} days"


def sha_mismatch(path: object, actual: str, expected: str, note: str) -> str:
    """The reason an install gives when the artifact is not the one the control side built;
    the control side recognises it (`is_sha_mismatch`) and uploads the artifact again."""
    return f"artifact {path} has SHA-256 {actual}, expected {expected} ({note})"


def is_sha_mismatch(reason: str) -> bool:
    return " has SHA-256 " in reason and ", expected " in reason


def openclaw_refusal(where: str, verdict: str, overridable: bool) -> str:
    """Why an install is refused on this host's OpenClaw, in the same words whether the
    installer refuses it or the control side does before its upload: `where` names whose
    version it is, `verdict` is fleet.continuity.openclawrange's message, `overridable` whether
    ALLOW_UNPROVEN_OPENCLAW would let it through (not for an OpenClaw older than the floor)."""
    fix = (f"; pass {ALLOW_UNPROVEN_OPENCLAW} to deploy it anyway, or deploy a fleet release "
           "proven on it" if overridable else "")
    return f"{where}: {verdict}{fix}; nothing was changed"


def openclaw_note(where: str, verdict: str) -> str:
    """The note of an install that went ahead on an unproven OpenClaw."""
    return f"{where}: {verdict}; deployed anyway ({ALLOW_UNPROVEN_OPENCLAW})"


class InstallerAnswerError(ValueError):
    """The installer's answer is not what this protocol says; the message names the host (when
    the reader knows it) and the field."""


def _bad(host: str, message: str) -> InstallerAnswerError:
    return InstallerAnswerError(f"host {host}: {message}" if host else message)


def _optional(data: Dict[str, Any], key: str, kind: Any, what: str, host: str = "",
              prefix: str = "") -> Any:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise _bad(host, f"'{prefix}{key}' must be {what} or null, got {value!r:.80}")
    if isinstance(value, float) and not math.isfinite(value):  # would end --json as Infinity
        raise _bad(host, f"'{prefix}{key}' must be a finite number, got {value!r:.80}")
    return value


AnswerT = TypeVar("AnswerT", bound="_Answer")


class _Record:
    """A record compared and shown field by field (its `__slots__`), as a dataclass would be,
    without the `dataclasses` import every installer start would pay for."""

    __slots__: Tuple[str, ...] = ()

    def _values(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  (its dicts are not hashable)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"


class _Answer(_Record):
    """What every typed answer has: read from one line of JSON."""

    __slots__ = ()

    @classmethod
    def from_dict(cls: Type[AnswerT], data: Any, host: str = "") -> AnswerT:
        raise NotImplementedError

    @classmethod
    def from_json(cls: Type[AnswerT], text: str, host: str = "") -> AnswerT:
        """Parse one answer line; `InstallerAnswerError` names the host and what is wrong."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise _bad(host, f"not JSON ({exc}): {text[:120]!r}") from None
        return cls.from_dict(data, host)


def _object(data: Any, host: str) -> Dict[str, Any]:
    if not isinstance(data, dict):
        raise _bad(host, f"the answer must be a JSON object, got {type(data).__name__}")
    return data


def release_summary(meta: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """How an answer names a release (`from`, `to`, `current`, `previous`), from its
    `fleet_release.json` with the release dir's name added as `release`."""
    if not meta:
        return None
    return {"release": meta.get("release"), "version": meta.get("version"),
            "sha256": meta.get("sha256"), "components": meta.get("components", {})}


class InstallerResult(_Answer):
    """One installer answer. `data` keeps every field as the installer wrote it (reports and
    `--json` show it whole); the typed fields are the ones the control side decides on."""

    __slots__ = ("ok", "result", "reason", "notes", "steps", "from_release", "to_release",
                 "status", "data")

    def __init__(self, ok: bool, result: str, reason: str = "", notes: Tuple[str, ...] = (),
                 steps: Optional[Dict[str, float]] = None,
                 from_release: Optional[Dict[str, Any]] = None,
                 to_release: Optional[Dict[str, Any]] = None,
                 status: Optional[HostStatus] = None,  # a `status` answer, typed
                 data: Optional[Dict[str, Any]] = None) -> None:
        self.ok = ok
        self.result = result
        self.reason = reason
        self.notes = notes
        self.steps: Dict[str, float] = {} if steps is None else steps
        self.from_release = from_release
        self.to_release = to_release
        self.status = status
        self.data: Dict[str, Any] = {} if data is None else data

    @classmethod
    def from_dict(cls, data: Any, host: str = "") -> InstallerResult:
        data = _object(data, host)
        if not isinstance(data.get("ok"), bool):
            raise _bad(host, f"'ok' must be true or false, got {data.get('ok')!r:.80}")
        result = data.get("result")
        if not isinstance(result, str) or not result:
            raise _bad(host, f"'result' must be a non-empty string, got {result!r:.80}")
        notes = _optional(data, "notes", list, "a list of strings", host) or []
        if not all(isinstance(n, str) for n in notes):
            raise _bad(host, f"'notes' must be a list of strings, got {notes!r:.80}")
        steps = _optional(data, "steps", dict, "an object of step -> seconds", host) or {}
        for name, seconds in steps.items():
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise _bad(host, f"'steps.{name}' must be a number of seconds, got "
                                 f"{seconds!r:.80}")
        return cls(ok=data["ok"], result=result,
                   reason=_optional(data, "reason", str, "a string", host) or "",
                   notes=tuple(notes), steps=dict(steps),
                   from_release=_optional(data, "from", dict, "an object", host),
                   to_release=_optional(data, "to", dict, "an object", host),
                   status=HostStatus.from_dict(data, host) if result == "status" else None,
                   data=data)


class LockHolder(NamedTuple):
    """Who holds a host's deploy lock, as `status` shows it (`stale`: why it may be taken over,
    None while its holder is alive)."""

    owner: Optional[str]
    pid: Optional[int]
    host: Optional[str]
    stale: Optional[str]

    @classmethod
    def from_dict(cls, data: Dict[str, Any], host: str = "") -> LockHolder:
        return cls(owner=_optional(data, "owner", str, "a string", host, "lock."),
                   pid=_optional(data, "pid", int, "an integer", host, "lock."),
                   host=_optional(data, "host", str, "a string", host, "lock."),
                   stale=_optional(data, "stale", str, "a string", host, "lock."))


class HookStats(NamedTuple):
    """One plugin's hook statistics as `status` shows them: its hook calls since `since` (ISO
    time) and how many raised (`errors`) or ran out of time (`timeouts`); `restarts`: its
    OpenClaw worker's (0 on our gateway, where a plugin lives as long as the gateway)."""

    calls: int = 0
    errors: int = 0
    timeouts: int = 0
    restarts: int = 0
    since: Optional[str] = None

    @classmethod
    def from_dict(cls, data: Any, host: str = "", prefix: str = "") -> HookStats:
        if not isinstance(data, dict):
            raise _bad(host, f"'{prefix}' must be an object, got {data!r:.80}")
        counts = {}
        for key in ("calls", "errors", "timeouts", "restarts"):
            value = _optional(data, key, int, "an integer", host, f"{prefix}.")
            if value is not None and value < 0:
                raise _bad(host, f"'{prefix}.{key}' must be >= 0, got {value!r}")
            counts[key] = value or 0
        return cls(since=_optional(data, "since", str, "a string", host, f"{prefix}."),
                   **counts)


class HostStatus(_Answer):
    """A host's `status` answer: what runs there. Fields missing from the answer read as
    "nothing" (an empty status is a host with nothing installed); `data` keeps it whole.
    Inside `current` and `gateway` the fields the control side computes with are typed too
    (`current.components`, `gateway.uptime_s`, `gateway.plugins`), so a wrong one is this
    host's error naming it, not a crash of the report that shows every host; the others are
    shown as text, whatever their type."""

    __slots__ = ("current", "ready", "problem", "lock", "gateway", "last_audit",
                 "disk_free_bytes", "openclaw_support", "supervisor", "hooks", "data")

    def __init__(
        self,
        current: Optional[Dict[str, Any]] = None,  # the active release (`release_summary`)
        ready: bool = False,  # the gateway is ready on it
        problem: Optional[str] = None,  # why not
        lock: Optional[LockHolder] = None,
        gateway: Optional[Dict[str, Any]] = None,  # its health answer ({} when none)
        last_audit: Optional[Dict[str, Any]] = None,  # the newest audit entry ({} when none)
        disk_free_bytes: Optional[int] = None,
        # an OpenClaw host: its OpenClaw against the active release's proof
        # {state, version, message}
        openclaw_support: Optional[Dict[str, Any]] = None,
        # the fleet manager's supervisor: {running, restarts, last_exit: {why, time}}
        # (supervision.py)
        supervisor: Optional[Dict[str, Any]] = None,
        # plugin id -> its hook statistics; None when the gateway is down or does not answer
        hooks: Optional[Dict[str, HookStats]] = None,
        data: Optional[Dict[str, Any]] = None,
    ) -> None:
        self.current = current
        self.ready = ready
        self.problem = problem
        self.lock = lock
        self.gateway: Dict[str, Any] = {} if gateway is None else gateway
        self.last_audit: Dict[str, Any] = {} if last_audit is None else last_audit
        self.disk_free_bytes = disk_free_bytes
        self.openclaw_support = openclaw_support
        self.supervisor = supervisor
        self.hooks = hooks
        self.data: Dict[str, Any] = {} if data is None else data

    @classmethod
    def from_dict(cls, data: Any, host: str = "") -> HostStatus:
        data = _object(data, host)
        lock = _optional(data, "lock", dict, "an object", host)
        support = _optional(data, "openclaw_support", dict, "an object", host)
        if support is not None and not isinstance(support.get("state"), str):
            raise _bad(host, f"'openclaw_support.state' must be a string, got "
                             f"{support.get('state')!r:.80}")
        current = _optional(data, "current", dict, "an object", host)
        if current is not None:  # listed component by component
            _optional(current, "components", dict, "an object", host, "current.")
        gateway = _optional(data, "gateway", dict, "an object", host) or {}
        # what the status table computes with: the uptime as a number, the plugins one by one
        _optional(gateway, "uptime_s", (int, float), "a number", host, "gateway.")
        _optional(gateway, "plugins", dict, "an object", host, "gateway.")
        supervisor = _optional(data, "supervisor", dict, "an object", host)
        if supervisor is not None:  # counted and shown in the status table and the doctor
            _optional(supervisor, "restarts", int, "an integer", host, "supervisor.")
            _optional(supervisor, "running", bool, "true or false", host, "supervisor.")
            last = _optional(supervisor, "last_exit", dict, "an object", host, "supervisor.")
            if last is not None:
                _optional(last, "time", (int, float), "a number", host, "supervisor.last_exit.")
        hooks = _optional(data, "hooks", dict, "an object", host)
        if hooks is not None:
            hooks = {str(pid): HookStats.from_dict(v, host, f"hooks.{str(pid)[:80]}")
                     for pid, v in hooks.items()}
        return cls(current=current,
                   ready=bool(_optional(data, "ready", bool, "true or false", host)),
                   problem=_optional(data, "problem", str, "a string", host),
                   lock=None if lock is None else LockHolder.from_dict(lock, host),
                   gateway=gateway,
                   last_audit=_optional(data, "last_audit", dict, "an object", host) or {},
                   disk_free_bytes=_optional(data, "disk_free_bytes", int, "an integer", host),
                   openclaw_support=support, supervisor=supervisor, hooks=hooks, data=data)


class DoctorAnswer(_Answer):
    """A host's `doctor` answer: its checks (`{check, severity, message, ...}`), the continuity
    doctor's report (`{severity, targets}`) and the host's clock (`time`, for the skew). Each
    target's `agent`, `child` and `findings` (`[{check, severity, message}]`) are typed as
    far as the doctor's table reads them, for the same reason as `HostStatus`'s."""

    __slots__ = ("checks", "continuity", "time", "data")

    def __init__(self, checks: Tuple[Dict[str, Any], ...], continuity: Dict[str, Any],
                 time: Optional[float], data: Optional[Dict[str, Any]] = None) -> None:
        self.checks = checks
        self.continuity = continuity
        self.time = time
        self.data: Dict[str, Any] = {} if data is None else data

    @property
    def severities(self) -> Tuple[str, ...]:
        """Every check's severity and the continuity report's."""
        return tuple(c["severity"] for c in self.checks) + (self.continuity["severity"],)

    @classmethod
    def from_dict(cls, data: Any, host: str = "") -> DoctorAnswer:
        # only `doctor` needs the severity names, and with them fleet.continuity.doctor: not
        # imported at the top, where every installer start would pay for it
        from fleet.continuity.doctor import SEVERITIES

        data = _object(data, host)

        def severity(item: Dict[str, Any], where: str) -> str:
            value = item.get("severity", "ok")
            if value not in SEVERITIES:
                raise _bad(host, f"'{where}severity' must be one of {', '.join(SEVERITIES)}, "
                                 f"got {value!r:.80}")
            return value

        checks = []
        for i, check in enumerate(_optional(data, "checks", list, "a list", host) or []):
            if not isinstance(check, dict):
                raise _bad(host, f"'checks[{i}]' must be an object, got {check!r:.80}")
            checks.append({**check, "check": str(check.get("check", "?")),
                           "severity": severity(check, f"checks[{i}]."),
                           "message": str(check.get("message", ""))})
        continuity = dict(_optional(data, "continuity", dict, "an object", host) or {})
        continuity["severity"] = severity(continuity, "continuity.")
        targets = _optional(continuity, "targets", list, "a list", host, "continuity.") or []
        for i, target in enumerate(targets):
            where = f"continuity.targets[{i}]"
            if not isinstance(target, dict):
                raise _bad(host, f"'{where}' must be an object, got {target!r:.80}")
            severity(target, f"{where}.")
            # what the doctor's table shows: whose state file, and each finding's message
            for key in ("agent", "child"):
                _optional(target, key, str, "a string", host, f"{where}.")
            findings = _optional(target, "findings", list, "a list", host, f"{where}.") or []
            for j, finding in enumerate(findings):
                if not isinstance(finding, dict):
                    raise _bad(host, f"'{where}.findings[{j}]' must be an object, got "
                                     f"{finding!r:.80}")
                severity(finding, f"{where}.findings[{j}].")
                _optional(finding, "message", str, "a string", host, f"{where}.findings[{j}].")
        continuity["targets"] = targets
        clock = _optional(data, "time", (int, float), "a number", host)
        return cls(checks=tuple(checks), continuity=continuity,
                   time=None if clock is None else float(clock), data=data)
