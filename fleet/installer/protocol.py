"""What the control side and the installer agree on: manager names, how long a run may take, and
the one JSON answer every installer command prints.

Both sides import this module (the control side may import host code; this one needs nothing
but the standard library), so the installer's argument choices, the control side's inventory
check, the installer's own lock lease and the control side's command deadline can never drift
apart, and the answer is read into a typed value that says which field is wrong instead of a
dict probed with `.get(...)`.

The answer of install / rollback / restart: `{action, ok, result, host, state_dir, owner, from,
to, reason, notes, restarted, steps: {step: seconds}, duration_s, gateway: <health>,
lock_takeover?, lock_holder?, pruned?}` where `result` is installed | unchanged | rolled_back |
restarted | refused | failed and `from`/`to` are `{release, version, sha256, components}`.
`status` gives `{result: "status", current, previous, releases, gateway, ready, problem, lock,
last_audit, disk_free_bytes}`. `doctor` gives `{result: "doctor", checks: [{check, severity,
message}], continuity, severity, exit, time, ...}` (fleet/installer/doctor.py). Bad arguments
give `{ok: false, result: "error", reason}`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

MANAGERS = ("fleet", "systemd", "launchd", "openclaw", "command")
STEP_SLACK_S = 5.0  # beyond --timeout, for one restart or one readiness wait


def worst_case_s(timeout: float) -> float:
    """The longest an install, rollback or restart with `--timeout timeout` runs: a restart and
    a readiness wait, then on failure the switch-back restart and its readiness wait, each up to
    `timeout` plus a little. The installer's lock lease must outlive it (or a peer takes over
    mid-run), and the control side must wait for it (or it cuts a host off mid-rollback)."""
    return 4 * (timeout + STEP_SLACK_S)


class InstallerAnswerError(ValueError):
    """The installer's answer is not what this protocol says; the message names the field."""


def _optional(data: Dict[str, Any], key: str, kind: type, what: str) -> Any:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise InstallerAnswerError(f"'{key}' must be {what} or null, got {value!r:.80}")
    return value


@dataclass(frozen=True)
class InstallerResult:
    """One installer answer. `data` keeps every field as the installer wrote it (reports and
    `--json` show it whole); the typed fields are the ones the control side decides on."""

    ok: bool
    result: str
    reason: str = ""
    notes: Tuple[str, ...] = ()
    steps: Dict[str, float] = field(default_factory=dict)
    from_release: Optional[Dict[str, Any]] = None
    to_release: Optional[Dict[str, Any]] = None
    current: Optional[Dict[str, Any]] = None  # status: the active release
    ready: Optional[bool] = None  # status: the gateway is ready on it
    problem: Optional[str] = None  # status: why not
    data: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, text: str) -> InstallerResult:
        """Parse one answer line; `InstallerAnswerError` names what is wrong with it."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InstallerAnswerError(f"not JSON ({exc}): {text[:120]!r}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> InstallerResult:
        if not isinstance(data, dict):
            raise InstallerAnswerError(f"the answer must be a JSON object, got "
                                       f"{type(data).__name__}")
        if not isinstance(data.get("ok"), bool):
            raise InstallerAnswerError(f"'ok' must be true or false, got {data.get('ok')!r:.80}")
        result = data.get("result")
        if not isinstance(result, str) or not result:
            raise InstallerAnswerError(f"'result' must be a non-empty string, got "
                                       f"{result!r:.80}")
        notes = _optional(data, "notes", list, "a list of strings") or []
        if not all(isinstance(n, str) for n in notes):
            raise InstallerAnswerError(f"'notes' must be a list of strings, got {notes!r:.80}")
        steps = _optional(data, "steps", dict, "an object of step -> seconds") or {}
        for name, seconds in steps.items():
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise InstallerAnswerError(f"'steps.{name}' must be a number of seconds, got "
                                           f"{seconds!r:.80}")
        return cls(ok=data["ok"], result=result,
                   reason=_optional(data, "reason", str, "a string") or "",
                   notes=tuple(notes), steps=dict(steps),
                   from_release=_optional(data, "from", dict, "an object"),
                   to_release=_optional(data, "to", dict, "an object"),
                   current=_optional(data, "current", dict, "an object"),
                   ready=_optional(data, "ready", bool, "true or false"),
                   problem=_optional(data, "problem", str, "a string"),
                   data=data)
