"""The installer's answer as the control side reads it: typed, and a bad answer names its field."""

from __future__ import annotations

import json

import pytest

from fleet.deploy import api, doctor
from fleet.deploy.inventory import Host
from fleet.deploy.runner import Progress
from fleet.installer.protocol import (
    DoctorAnswer,
    HookStats,
    HostStatus,
    InstallerAnswerError,
    InstallerResult,
)

INSTALLED = {"action": "install", "ok": True, "result": "installed", "reason": None,
             "notes": ["took over a stale lock"], "steps": {"unpack": 0.25},
             "from": None, "to": {"release": "1.2.0-abcdefabcdef", "version": "1.2.0"},
             "gateway": {"pid": 42}}


def test_a_good_answer_is_read_into_typed_fields_and_kept_whole():
    answer = InstallerResult.from_json(json.dumps(INSTALLED))
    assert answer.ok and answer.result == "installed"
    assert answer.to_release == {"release": "1.2.0-abcdefabcdef", "version": "1.2.0"}
    assert answer.notes == ("took over a stale lock",) and answer.steps == {"unpack": 0.25}
    assert answer.reason == "" and answer.data["gateway"] == {"pid": 42}


@pytest.mark.parametrize("change, named", [
    ({"ok": "yes"}, "'ok' must be true or false"),
    ({"result": None}, "'result' must be a non-empty string"),
    ({"steps": [1, 2]}, "'steps' must be an object"),
    ({"steps": {"unpack": "fast"}}, "'steps.unpack' must be a number"),
    ({"notes": "one note"}, "'notes' must be a list of strings"),
    ({"to": "1.2.0"}, "'to' must be an object"),
    ({"result": "status", "ready": "true"}, "'ready' must be true or false"),
    ({"result": "status", "lock": {"pid": "12"}}, "'lock.pid' must be an integer"),
])
def test_a_bad_answer_names_the_field(change, named):
    with pytest.raises(InstallerAnswerError, match=named):
        InstallerResult.from_json(json.dumps({**INSTALLED, **change}))


def test_text_that_is_not_a_json_object_is_refused():
    with pytest.raises(InstallerAnswerError, match="not JSON"):
        InstallerResult.from_json("{oops")
    with pytest.raises(InstallerAnswerError, match="must be a JSON object, got list"):
        InstallerResult.from_json("[1]")


class _Run:
    def __init__(self, stdout: str, exit_code: int = 0):
        self.stdout, self.stderr, self.exit_code = stdout, "", exit_code


class _Conn:
    def __init__(self, stdout: str):
        self.stdout = stdout

    def run(self, command, timeout, on_stderr_line=None):
        return _Run(self.stdout)

    def close(self):
        pass


def _restart_with_answer(monkeypatch, answer: dict):
    monkeypatch.setattr(api, "connect", lambda host: _Conn(json.dumps(answer) + "\n"))
    progress: Progress = lambda step, detail: None  # noqa: E731
    return api._simple_host(Host("edge-1", connection="local", state_dir="/nonexistent"),
                            progress, "true", "restart")


def test_deploy_reports_a_bad_installer_answer_as_failed_naming_the_field(monkeypatch):
    res = _restart_with_answer(monkeypatch, {**INSTALLED, "steps": {"unpack": "fast"}})
    assert (res.result, res.ok) == ("failed", False)
    assert "restart gave an answer fleet cannot read: host edge-1: 'steps.unpack'" in res.note


def test_deploy_turns_a_good_answer_into_the_host_result(monkeypatch):
    res = _restart_with_answer(monkeypatch, INSTALLED)
    assert (res.result, res.ok) == ("installed", True)
    assert res.to_release["release"] == "1.2.0-abcdefabcdef"
    assert res.steps["host.unpack"] == 0.25 and res.note == "took over a stale lock"


STATUS = {"ok": True, "result": "status", "current": {"release": "1.2.0-abcdefabcdef"},
          "ready": False, "problem": "gateway does not answer", "disk_free_bytes": 4096,
          "lock": {"owner": "ops@box", "pid": 7, "host": "box", "stale": "lease expired"},
          "gateway": None, "last_audit": {"action": "install"}}


def test_a_status_answer_is_typed_down_to_the_lock_holder():
    status = InstallerResult.from_json(json.dumps(STATUS), "edge-1").status
    assert status.current == {"release": "1.2.0-abcdefabcdef"} and status.ready is False
    assert status.problem == "gateway does not answer" and status.disk_free_bytes == 4096
    assert (status.lock.owner, status.lock.pid, status.lock.stale) == ("ops@box", 7,
                                                                     "lease expired")
    assert status.gateway == {} and status.last_audit == {"action": "install"}
    assert HostStatus.from_dict({}).current is None and not HostStatus.from_dict({}).ready
    assert status.openclaw_support is None  # not an OpenClaw host
    support = {"state": "unproven", "version": "2026.6.6", "message": "..."}
    assert HostStatus.from_dict({**STATUS, "openclaw_support": support}).openclaw_support == \
        support
    assert status.hooks is None  # a gateway that did not answer them


def test_a_status_answer_types_each_plugins_hook_statistics():
    hooks = {"memory-continuity": {"calls": 12, "errors": 1, "timeouts": 2, "restarts": 1,
                                   "since": "2026-12-04T10:00:00Z"},
             "mc": {"calls": 0}}
    status = HostStatus.from_dict({**STATUS, "hooks": hooks}, "edge-1")
    assert status.hooks == {
        "memory-continuity": HookStats(calls=12, errors=1, timeouts=2, restarts=1,
                                       since="2026-12-04T10:00:00Z"),
        "mc": HookStats()}


@pytest.mark.parametrize("change, named", [
    ({"disk_free_bytes": "4 KiB"}, "host edge-1: 'disk_free_bytes' must be an integer"),
    ({"lock": {"owner": "ops", "stale": True}}, "host edge-1: 'lock.stale' must be a string"),
    ({"current": "1.2.0"}, "host edge-1: 'current' must be an object"),
    ({"openclaw_support": "proven"}, "host edge-1: 'openclaw_support' must be an object"),
    ({"openclaw_support": {"version": "2026.9.6"}},
     "host edge-1: 'openclaw_support.state' must be a string"),
    ({"gateway": {"uptime_s": "x"}}, "host edge-1: 'gateway.uptime_s' must be a number"),
    ({"gateway": {"uptime_s": True}}, "host edge-1: 'gateway.uptime_s' must be a number"),
    ({"gateway": {"plugins": ["memory-continuity"]}},
     "host edge-1: 'gateway.plugins' must be an object"),
    ({"current": {"components": ["fleet"]}}, "host edge-1: 'current.components' must be an "
                                             "object"),
    ({"hooks": []}, "host edge-1: 'hooks' must be an object"),
    ({"hooks": {"mc": 3}}, "host edge-1: 'hooks.mc' must be an object"),
    ({"hooks": {"mc": {"calls": "many"}}}, "host edge-1: 'hooks.mc.calls' must be an integer"),
    ({"hooks": {"mc": {"errors": 1.5}}}, "host edge-1: 'hooks.mc.errors' must be an integer"),
    ({"hooks": {"mc": {"timeouts": -1}}}, "host edge-1: 'hooks.mc.timeouts' must be >= 0"),
    ({"hooks": {"mc": {"since": 5}}}, "host edge-1: 'hooks.mc.since' must be a string"),
])
def test_a_bad_status_names_the_host_and_the_field(change, named):
    with pytest.raises(InstallerAnswerError, match=named):
        HostStatus.from_json(json.dumps({**STATUS, **change}), "edge-1")


DOCTOR = {"ok": True, "result": "doctor", "time": 1000.0,
          "checks": [{"check": "disk", "severity": "warning", "message": "low"}],
          "continuity": {"severity": "ok", "targets": [{"agent": "main", "severity": "ok"}]}}


def test_a_doctor_answer_gives_every_severity():
    answer = DoctorAnswer.from_dict(DOCTOR, "edge-1")
    assert answer.severities == ("warning", "ok") and answer.time == 1000.0


@pytest.mark.parametrize("change, named", [
    ({"checks": [{"check": "disk", "severity": "bad"}]}, "'checks[0].severity' must be one of"),
    ({"continuity": {"severity": "ok", "targets": [{"severity": 3}]}},
     "'continuity.targets[0].severity' must be one of"),
    ({"time": "noon"}, "'time' must be a number"),
    ({"time": float("inf")}, "'time' must be a finite number"),
    ({"time": float("nan")}, "'time' must be a finite number"),
    ({"continuity": {"severity": "ok", "targets": [{"agent": 3}]}},
     "'continuity.targets[0].agent' must be a string"),
    ({"continuity": {"severity": "ok", "targets": [{"agent": "a", "child": ["c"]}]}},
     "'continuity.targets[0].child' must be a string"),
    ({"continuity": {"severity": "ok", "targets": [{"findings": {"check": "x"}}]}},
     "'continuity.targets[0].findings' must be a list"),
    ({"continuity": {"severity": "ok", "targets": [{"findings": ["x"]}]}},
     "'continuity.targets[0].findings[0]' must be an object"),
    ({"continuity": {"severity": "ok", "targets": [{"findings": [{"severity": "odd"}]}]}},
     "'continuity.targets[0].findings[0].severity' must be one of"),
    ({"continuity": {"severity": "ok", "targets": [{"findings": [{"message": None}, {
        "message": 7}]}]}}, "'continuity.targets[0].findings[1].message' must be a string"),
])
def test_a_bad_doctor_answer_names_the_host_and_the_field(change, named):
    with pytest.raises(InstallerAnswerError, match="host edge-1: " + named.replace("[", r"\[")):
        DoctorAnswer.from_dict({**DOCTOR, **change}, "edge-1")


def test_fleet_doctor_reports_a_host_whose_answer_it_cannot_read_as_critical(monkeypatch):
    bad = {**DOCTOR, "checks": [{"check": "disk", "severity": "bad"}]}
    monkeypatch.setattr(doctor, "connect", lambda host: _Conn(json.dumps(bad) + "\n"))
    res = doctor.doctor_host(Host("edge-1", connection="local", state_dir="/nonexistent"),
                             lambda step, detail: None, "ops")
    assert (res.result, res.ok) == ("critical", False)
    assert "doctor gave an answer fleet cannot read: host edge-1: 'checks[0].severity'" in res.note
