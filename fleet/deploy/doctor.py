"""`invoke doctor`: every host's health and continuity in one round trip per host, read-only.

Each host runs its installed release's `doctor` (fleet/installer/doctor.py), which answers with
its checks, the continuity doctor's report and its clock. Here the clock is compared with ours
around that one command (skew = host time - midpoint of the call, uncertain by half the call's
duration), a host that cannot be asked is critical, and the worst severity of the fleet gives the
exit code: 0 healthy, 1 warnings, 2 critical (the continuity doctor's codes).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from rich.table import Table

from fleet.continuity.doctor import exit_code, worst
from fleet.deploy import commands, inventory
from fleet.deploy.api import command_timeout, default_owner, parse_json
from fleet.deploy.connection import connect
from fleet.deploy.inventory import Host
from fleet.deploy.runner import HostResult, Progress, RunOptions, run
from fleet.installer.protocol import DoctorAnswer, InstallerAnswerError, InstallerResult
from fleet.terminal.text import cell

SKEW_WARN_S = 5.0
SKEW_CRITICAL_S = 120.0  # locks, leases and staleness checks compare clocks across hosts
STYLE = {"ok": "green", "info": "cyan", "warning": "yellow", "critical": "bold red"}


def clock_check(host_time: float | None, t0: float, t1: float) -> dict:
    """Skew of the host's clock against ours, from one call that started at t0, ended at t1."""
    if not isinstance(host_time, (int, float)):
        return {"check": "clock", "severity": "warning", "message": "host sent no time"}
    skew = host_time - (t0 + t1) / 2
    slack = (t1 - t0) / 2
    beyond = max(0.0, abs(skew) - slack)
    text = f"skew {skew:+.1f}s (±{slack:.1f}s) against the control machine"
    if beyond > SKEW_CRITICAL_S:
        severity = "critical"
    elif beyond > SKEW_WARN_S:
        severity = "warning"
    else:
        severity = "ok"
    if severity != "ok":
        text += "; fix: enable NTP (timedatectl set-ntp true, or chrony)"
    return {"check": "clock", "severity": severity, "message": text, "skew_s": round(skew, 3)}


def doctor_host(host: Host, progress: Progress, owner: str) -> HostResult:
    """Connect, run the host's doctor, add the clock check; never raises."""
    t_start = time.monotonic()
    conn = None
    try:
        progress("connect", "")
        conn = connect(host)
        progress("doctor", "")
        t0 = time.time()
        res = conn.run(commands.doctor(host, owner), command_timeout(host))
        t1 = time.time()
    except Exception as exc:  # unreachable, auth, host key, timeout: the host is not healthy
        return _unreachable(host, str(exc), t_start)
    finally:
        if conn is not None:
            conn.close()
    data = parse_json(res.stdout)
    if _result(data, host) not in ("doctor", "status"):
        tail = " ".join((res.stdout + res.stderr).strip().splitlines()[-3:])
        return _unreachable(host, f"doctor gave no answer (exit {res.exit_code}): {tail[:300]}",
                            t_start)
    if _result(data, host) == "status":  # NOT_INSTALLED: nothing deployed there yet
        data = {"checks": [{"check": "release", "severity": "critical",
                            "message": "fleet is not installed; run a deploy first"}],
                "time": None, "continuity": {"targets": [], "severity": "ok"}}
        severity = "critical"
    else:
        try:
            answer = DoctorAnswer.from_dict(data, host.name)
        except InstallerAnswerError as exc:
            return _unreachable(host, f"doctor gave an answer fleet cannot read: {exc}", t_start)
        clock = clock_check(answer.time, t0, t1)
        data["checks"] = [dict(c, message=pasteable(str(c.get("message", "")), host))
                          for c in answer.checks] + [clock]
        data["continuity"] = answer.continuity
        severity = worst([*answer.severities, clock["severity"]])
    data["severity"], data["exit"] = severity, exit_code(severity)
    return HostResult(host.name, severity, True, duration_s=time.monotonic() - t_start,
                      note=_headline(data), data=data)


_HINT = re.compile(r"`(?:invoke|fleet) ([a-z][a-z0-9_.-]*)`")


def pasteable(message: str, host: Host) -> str:
    """A host's "fix: `invoke restart`" as a command that works when pasted: the host and its
    inventory named (the host cannot know either)."""
    return _HINT.sub(lambda m: f"`{inventory.command(m.group(1), [host.name], host.inventory)}`",
                     message)


def _result(data: dict | None, host: Host) -> str | None:
    """What kind of answer the host gave: `doctor`, `status` (nothing installed), ...; None for
    none or one fleet cannot read."""
    try:
        return None if data is None else InstallerResult.from_dict(data, host.name).result
    except InstallerAnswerError:
        return None


def _unreachable_data(why: str) -> dict:
    return {"checks": [{"check": "reach", "severity": "critical", "message": why}],
            "continuity": {"targets": [], "severity": "ok"}, "severity": "critical", "exit": 2}


def _unreachable(host: Host, why: str, t_start: float) -> HostResult:
    return HostResult(host.name, "critical", False, duration_s=time.monotonic() - t_start,
                      note=why, data=_unreachable_data(why))


def _headline(data: dict) -> str:
    bad = [c for c in data.get("checks", []) if c.get("severity") in ("warning", "critical")]
    targets = (data.get("continuity") or {}).get("targets") or []
    bad_targets = [t for t in targets if t.get("severity") in ("warning", "critical")]
    parts = [c["message"] for c in bad[:2]] + [f"{len(bad_targets)} state file(s) need care"
                                               if bad_targets else ""]
    return "; ".join(p for p in parts if p)


def doctor(hosts: list[Host], sink: Callable[[str, str, str], None],
           options: RunOptions | None = None, owner: str | None = None) -> list[HostResult]:
    owner = owner or default_owner()
    options = options or RunOptions()
    options.deadline = lambda h: h.timeouts.connect + command_timeout(h) + 30
    results = run(hosts, lambda h, p: doctor_host(h, p, owner), sink, options)
    for res in results:  # the runner's own verdicts (deadline exceeded, skipped) carry no checks
        if not (res.data or {}).get("checks"):
            res.data = _unreachable_data(res.note or res.result)
            res.result = "critical"
    return results


def fleet_severity(results: list[HostResult]) -> str:
    return worst([(r.data or {}).get("severity", "critical") if r.result != "skipped"
                  else "critical" for r in results])


def rows(results: list[HostResult], verbose: bool = False) -> list[tuple[str, str, str, str]]:
    """(host, check, severity, detail) for the table and the JSON; ok rows only if verbose,
    except one `summary` row per host so every host appears."""
    out = []
    for res in results:
        data = res.data or {}
        host_rows = []
        for c in data.get("checks") or []:
            host_rows.append((res.host, c.get("check", "?"), c.get("severity", "ok"),
                              c.get("message", "")))
        for t in (data.get("continuity") or {}).get("targets") or []:
            # DoctorAnswer typed these (strings or absent, findings a list of objects)
            agent = t.get("agent") or "?"
            label = f"{agent}/{t['child']}" if t.get("child") else agent
            problems = [f.get("message") or "" for f in t.get("findings") or []
                        if f.get("severity", "ok") != "ok"]
            host_rows.append((res.host, f"state {label}", t.get("severity", "ok"),
                              "; ".join(problems) or "healthy"))
        shown = [r for r in host_rows if verbose or r[2] != "ok"]
        if not shown or not verbose:
            passed = sum(1 for r in host_rows if r[2] == "ok")
            shown.insert(0, (res.host, "summary", data.get("severity", res.result),
                             f"{passed} of {len(host_rows)} checks ok"))
        out += shown
    return out


def table(results: list[HostResult], verbose: bool = False) -> Table:
    """Every cell is the host's words (a check, a state file's agent, a finding naming a temp
    file or a lock's owner): shown escaped, never as markup (fleet.terminal.text)."""
    t = Table(title="fleet doctor")
    for column in ("host", "check", "status", "detail"):
        t.add_column(column, overflow="fold")
    for host, check, severity, detail in rows(results, verbose):
        t.add_row(cell(host), cell(check), cell(severity.upper(), STYLE.get(severity, "white")),
                  cell(detail))
    return t


