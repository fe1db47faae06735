"""Nothing a host or an inventory says reaches the terminal as control (issue 30, item 2).

A hostile sandbox host serves hostile text in every field it owns: its gateway log, its
maintenance lock (owner, message), its deploy lock, a leftover temp file's name, a state file,
and an installer whose every `status` and `doctor` field is hostile; a second host answers
every command with hostile errors. (An inventory that names a host with such text is refused,
the refusal quoting it escaped: the last tests.)
Every task that prints host text runs against them through the `fleet` script, as a user runs
it: on a pipe no raw ESC, C1, bidi or invisible character comes out at all; on a terminal
(Rich's colours on) only fleet's own colour codes do, and the hostile text is shown escaped
with its `[link=...]` markup printed literally; `--json` keeps every text exact.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
from deploy_helpers import REPO, stop_gateways

MARKUP = "[link=http://evil.example]CLICK[/link]"
# clear screen, window title, an OSC 8 hyperlink, a C1 CSI, a bidi override and isolate, a
# zero-width space, an invisible tag character
CONTROLS = ("\x1b[2J\x1b]0;pwned\x07\x1b]8;;http://evil.example\x07\x9b31m\u202e\u2066\u200b"
            "\U000e0041")
SHOWN = r"\x1b[2J\x1b]0;pwned\x07\x1b]8;;http://evil.example\x07\x9b31m\u202e\u2066\u200b" \
        r"\U000e0041" + MARKUP  # how the terminal must show CONTROLS + MARKUP
LINE = CONTROLS + MARKUP  # fits on one log line (no character str.splitlines splits at)
TEXT = LINE + "\r\u2028\x85!"  # any other field: carriage return, line separator, NEL too
NAME = "evil"  # host names with control, invisible or bidi characters are refused
TEMP = f".{CONTROLS.replace('http://', '')}[link=evil]CLICK.tmp"  # a file name: no slash
ORDINARY = "gateway ready\tpid 4242 é 日本 👍"
# what must never reach a terminal raw: C0 but tab and newline, DEL, C1, bidi controls,
# zero-width and other invisible formatting characters, line/paragraph separators, tags
HAZARD = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e"
                    "\u2028\u2029\u2060-\u2069\ufeff\U000e0000-\U000e007f]")
SGR = re.compile(r"\x1b\[[0-9;]*m")  # Rich's own colours on a terminal

STATUS = {
    "ok": True, "result": "status", "ready": False, "problem": TEXT, "disk_free_bytes": 1 << 30,
    "current": {"release": TEXT, "version": TEXT, "sha256": TEXT, "components": {TEXT: TEXT}},
    "gateway": {"pid": TEXT, "uptime_s": 1.5, "openclaw": TEXT, "gateway_pid": TEXT,
                "plugins": {TEXT: {"version": TEXT, "status": TEXT}}, "rpc": TEXT},
    "lock": {"owner": TEXT, "pid": 7, "host": TEXT, "stale": TEXT},
    "last_audit": {"time": TEXT, "action": TEXT, "result": TEXT, "who": TEXT},
    "openclaw_support": {"state": TEXT, "version": TEXT, "message": TEXT},
}
HOSTILE_CHECK = {"check": TEXT, "severity": "warning", "message": TEXT}
HOSTILE_TARGET = {"agent": TEXT, "child": TEXT, "severity": "warning",
                  "findings": [{"check": TEXT, "severity": "warning", "message": TEXT}]}

# The hostile host's installer (its release's `python -m fleet.installer`): every status field
# is hostile; its doctor runs the real host checks of its deploy lock, temp files and state
# files (the checkout's host side), plus a hostile check and state file target of its own.
INSTALLER = """\
import json, sys, time
from pathlib import Path
command, state = sys.argv[1], Path(sys.argv[sys.argv.index("--state-dir") + 1])
if command == "status":
    answer = @STATUS@
elif command == "doctor":
    for name in [m for m in sys.modules if m == "fleet" or m.startswith("fleet.")]:
        del sys.modules[name]  # this fake release's package: the real one answers from here
    sys.path.insert(0, @REPO@)
    from fleet.continuity import doctor as continuity
    from fleet.installer import doctor
    report = continuity.diagnose(state).as_dict()
    report["targets"].append(@TARGET@)
    report["severity"] = "warning"
    answer = {"ok": True, "result": "doctor", "time": time.time(), "continuity": report,
              "checks": [doctor.check_lock(state), doctor.check_temp_files(state), @CHECK@]}
else:
    answer = {"ok": False, "result": "failed", "reason": @TEXT@}
print(json.dumps(answer))
"""
STATE_FILE = f"""\
# CURRENT_STATE

> Last updated: 2026-01-01T00:00:00.000Z

## Objective
ship it

## Current Step
None

## Key Decisions
- None

## Next Action
None

## Blockers
None

## Unsurfaced Results
{LINE}
"""


def yaml_string(text: str) -> str:
    """`text` as a YAML double-quoted scalar, every character outside printable ASCII escaped."""
    out = []
    for char in text:
        code = ord(char)
        if 0x20 <= code < 0x7F and char not in '"\\':
            out.append(char)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def fake_release(state: Path, main: str = "") -> None:
    """A release dir whose installer is `main` (`status`, `doctor` run it), made current."""
    package = state / "fleet" / "releases" / "hostile" / "fleet"
    (package / "installer").mkdir(parents=True)
    for name in ("__init__.py", "installer/__init__.py", "installer/cli.py"):
        (package / name).write_text("")
    (package / "installer" / "__main__.py").write_text(main)
    (state / "fleet" / "current").symlink_to("releases/hostile")


def hostile_artifact(built: Path, out: Path) -> Path:
    """A copy of a real artifact whose manifest names a hostile version (`--artifact` takes
    any file: the version is printed in the task's title)."""
    with zipfile.ZipFile(built) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "fleet_manifest.json":
                data = json.dumps({**json.loads(data), "version": LINE}).encode()
            dst.writestr(item, data)
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    evil, broken = root / ".fleet" / "sandbox" / "evil", root / ".fleet" / "sandbox" / "broken"
    fake_release(evil, INSTALLER.replace("@STATUS@", repr(STATUS)).replace("@REPO@", repr(
        str(REPO))).replace("@TARGET@", repr(HOSTILE_TARGET)).replace(
        "@CHECK@", repr(HOSTILE_CHECK)).replace("@TEXT@", repr(TEXT)))
    fake_release(broken)
    (evil / "logs").mkdir()
    (evil / "logs" / "gateway.log").write_text(f"{ORDINARY}\n{LINE}\n", encoding="utf-8")
    (evil / "fleet" / "run.lease").write_text(json.dumps(  # a maintenance lock
        {"owner": TEXT, "pid": TEXT, "from": TEXT, "manual": True, "message": TEXT,
         "time": time.time(), "expires": None, "lease": 0}))
    (evil / "fleet" / "deploy.lock").write_text(json.dumps(  # a dead installer's deploy lock
        {"owner": TEXT, "pid": TEXT, "host": TEXT, "time": 0, "lease": 1}))
    temp = evil / TEMP
    temp.write_text("")
    os.utime(temp, (time.time() - 7200, time.time() - 7200))  # left by a killed writer
    memory = evil / "workspace" / "memory"
    memory.mkdir(parents=True)
    (memory / "CURRENT_STATE.md").write_text(STATE_FILE, encoding="utf-8")
    python = root / "broken-python"  # every command the second host runs fails, saying this
    python.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write({LINE!r} + '\\n')\n"
                      f"sys.stderr.write({LINE!r} + '\\n')\nsys.exit(1)\n", encoding="utf-8")
    python.chmod(0o755)
    (root / "inventory.yaml").write_text(
        "vars: {connection: local, gateway: {manager: fleet}, timeouts: {command: 60}}\n"
        "hosts:\n"
        f"  {yaml_string(NAME)}: {{state_dir: .fleet/sandbox/evil}}\n"
        f"  broken: {{state_dir: .fleet/sandbox/broken, python: {python}}}\n"
        f"groups:\n  sandbox: {{hosts: [{yaml_string(NAME)}, broken]}}\n")
    yield root
    stop_gateways([evil, broken])  # none should start: every change is refused by the lock


def environment(terminal: bool) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS")}
    env["PYTHONIOENCODING"] = "utf-8"
    if terminal:  # Rich writes as to a terminal; wide enough that no table cell folds
        env.update(FORCE_COLOR="1", TTY_COMPATIBLE="1", TERM="xterm-256color", COLUMNS="5000")
    return env


def fleet(cwd: Path, *args: str, terminal: bool = False) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-c", "from fleet.cli.program import main; main()",
                           *args], cwd=cwd, capture_output=True, encoding="utf-8",
                          timeout=300, env=environment(terminal))
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def inert(output: str, what: str) -> None:
    found = sorted({f"U+{ord(c):04X}" for c in HAZARD.findall(output)})
    assert not found, f"{what}: {found} reach the terminal raw:\n{output}"


def on_terminal(output: str, what: str) -> str:
    """A terminal's output: only Rich's own colour codes, the hostile text shown escaped with
    its markup printed literally (never a hyperlink or a style). Returns it without colours."""
    plain = SGR.sub("", output)
    inert(plain, what)
    assert SHOWN in plain, f"{what}: the hostile text is not shown escaped:\n{plain}"
    return plain


def hosts_of(doc: dict) -> dict:
    return {h["host"]: h for h in doc["hosts"]}


def exact_status(doc: dict) -> None:
    evil = hosts_of(doc)[NAME]
    assert evil["data"] == STATUS
    assert LINE in hosts_of(doc)["broken"]["note"]  # the host's own error, exact


def exact_lock(doc: dict) -> None:
    holder = hosts_of(doc)[NAME]["data"]["holder"]
    assert holder["owner"] == TEXT and holder["message"] == TEXT and holder["from"] == TEXT


def exact_refusal(doc: dict) -> None:
    if doc["action"] == "deploy":
        assert doc["artifact"]["version"] == LINE
    note = hosts_of(doc)[NAME]["note"]
    assert note.startswith(f"locked for maintenance by {TEXT} since ") and f": {TEXT};" in note
    assert f"fleet lock.release -H {shlex.quote(NAME)} --inventory " in note


def exact_doctor(doc: dict) -> None:
    evil = hosts_of(doc)[NAME]["data"]
    messages = [c["message"] for c in evil["checks"]]
    assert HOSTILE_CHECK in evil["checks"]
    assert any(f"stale lock of {TEXT} (pid {TEXT} on {TEXT})" in m for m in messages), messages
    assert any(f"temp file(s) older than 60 min: {TEMP};" in m for m in messages), messages
    targets = evil["continuity"]["targets"]
    assert HOSTILE_TARGET in targets
    findings = [f["message"] for t in targets for f in t.get("findings", [])]
    assert f"Unsurfaced Results holds: {LINE[:80]}" in findings
    assert LINE in hosts_of(doc)["broken"]["note"]


# Every task that prints what hosts say, with what its --json must keep exact.
TASKS = {
    "status": (["status"], exact_status),
    "doctor": (["doctor", "--verbose"], exact_doctor),
    "lock.status": (["lock.status"], exact_lock),
    "deploy": (["deploy", "--artifact", "{artifact}"], exact_refusal),
    "restart": (["restart"], exact_refusal),
    "rollback": (["rollback"], exact_refusal),
}


@pytest.mark.parametrize("task", list(TASKS))
def test_a_task_shows_hostile_host_text_escaped_and_its_json_keeps_it_exact(task, hostile,
                                                                              request):
    args, exact = TASKS[task]
    if "{artifact}" in args:  # built once per session, only for the task that needs one
        built = request.getfixturevalue("artifacts")().path
        art = hostile_artifact(built, hostile / "hostile.pyz")
        args = [a.format(artifact=art) for a in args]
    code, out, err = fleet(hostile, *args)
    assert code in (1, 2), (code, out, err)  # refused, failing or unhealthy hosts
    inert(out, f"{task} stdout")
    inert(err, f"{task} stderr")

    code, out, _ = fleet(hostile, *args, terminal=True)
    table = on_terminal(out, f"{task} on a terminal")
    assert MARKUP in table and "CLICK" in table

    code, out, err = fleet(hostile, *args, "--json")
    inert(out, f"{task} --json")  # JSON escaping only: the exact text, nothing raw
    inert(err, f"{task} --json stderr")
    doc = json.loads(out)
    assert doc["action"] == task and set(hosts_of(doc)) == {NAME, "broken"}
    exact(doc)


def test_logs_show_hostile_lines_escaped_and_ordinary_lines_as_they_are(hostile):
    code, out, err = fleet(hostile, "logs")
    assert code == 1  # the broken host cannot be read
    inert(out, "logs")
    inert(err, "logs stderr")
    width = len("broken")
    assert out.splitlines() == [f"{'evil':<{width}} | {ORDINARY}",
                                f"{'evil':<{width}} | {SHOWN}"]
    assert "broken" in err and SHOWN in err  # the host's error, escaped too

    _, out, _ = fleet(hostile, "logs", terminal=True)
    assert SHOWN in on_terminal(out, "logs on a terminal")

    code, out, _ = fleet(hostile, "logs", "--json")
    inert(out, "logs --json")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["line"] for r in records if r["host"] == NAME] == [ORDINARY, LINE]
    assert any(r["error"] and LINE in r["line"] for r in records if r["host"] == "broken")
    assert "pid 4242 é 日本 👍" in out  # non-ASCII letters as they are, as before


def test_logs_follow_shows_new_hostile_lines_escaped(hostile):
    proc = subprocess.Popen(
        [sys.executable, "-c", "from fleet.cli.program import main; main()", "logs", "-n", "0",
         "-f"], cwd=hostile, stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8",
        env=environment(False))
    killer = threading.Timer(60, proc.kill)  # a broken follower must not hang the suite
    killer.start()
    try:
        assert "broken" in proc.stderr.readline()  # the first round is done
        log = hostile / ".fleet" / "sandbox" / "evil" / "logs" / "gateway.log"
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"followed {LINE}\n")
        line = proc.stdout.readline()  # blocks until the follower prints it
        assert line.endswith(f" | followed {SHOWN}\n") and line.startswith("evil")
        inert(line, "logs -f")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
        inert(proc.stderr.read(), "logs -f stderr")
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


@pytest.mark.parametrize("task", ["status", "logs", "lock.status"])
def test_an_inventory_error_quoting_hostile_text_is_escaped_and_exact_in_json(tmp_path, task):
    (tmp_path / "inventory.yaml").write_text(
        f"hosts:\n  box: {{connection: local, {yaml_string(TEXT)}: 1}}\n")
    code, _, err = fleet(tmp_path, task)
    assert code == 2 and "unknown key" in err
    inert(err, f"{task}: the inventory's error")
    assert SHOWN in err
    code, out, _ = fleet(tmp_path, task, "--json")
    inert(out, f"{task} --json: the inventory's error")
    assert code == 2 and TEXT in json.loads(out)["error"]


@pytest.mark.parametrize("task", ["status", "logs"])
def test_a_hostile_host_name_is_refused_and_its_refusal_is_inert(tmp_path, task):
    (tmp_path / "inventory.yaml").write_text(
        f"hosts:\n  {yaml_string('evil' + LINE)}: {{connection: local}}\n")
    code, out, err = fleet(tmp_path, task)
    assert code == 2 and "inventory.yaml" in err and "evil" in err
    inert(out + err, f"{task}: the refused host name")


# A host whose answer has the right top-level shape but wrong types inside (issue 30 follow-up):
# `h1` answers as the case says, `h2` answers well; each task reports h1 as failing with the
# field named, on one line, and still shows h2.
ANSWERING_INSTALLER = """\
import json, sys, time
from pathlib import Path
command, state = sys.argv[1], Path(sys.argv[sys.argv.index("--state-dir") + 1])
answer = json.loads((state / (command + ".json")).read_text())
if command == "doctor":
    answer["time"] = time.time()  # the host's clock agrees with ours
print(json.dumps(answer))
"""
GOOD_STATUS = {
    "ok": True, "result": "status", "ready": True, "problem": None, "disk_free_bytes": 1 << 30,
    "current": {"release": "1.0.0-abcdefabcdef", "version": "1.0.0", "sha256": "ab" * 32,
                "components": {"fleet": "1.0.0"}},
    "gateway": {"pid": 4242, "uptime_s": 12.5, "plugins": {"memory-continuity": {
        "version": "1.0.0", "status": "loaded"}}},
    "lock": None, "last_audit": {"time": "2026-01-01T00:00:00Z", "action": "install",
                                 "result": "installed", "who": "ops"},
}
GOOD_DOCTOR = {
    "ok": True, "result": "doctor",
    "checks": [{"check": "disk", "severity": "ok", "message": "1.0 GiB free"}],
    "continuity": {"severity": "ok", "targets": [
        {"agent": "main", "child": None, "path": "workspace/memory/CURRENT_STATE.md",
         "severity": "ok", "findings": [{"check": "format", "severity": "ok",
                                          "message": "well-formed"}]}]},
}


def answer_with(answer: dict, path: tuple, value: object) -> dict:
    """A copy of `answer` with the field at `path` (keys and list indexes) set to `value`."""
    out = json.loads(json.dumps(answer))
    inner = out
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    return out


MALFORMED = {  # task, field, wrong value, the reason shown for h1
    "uptime": ("status", ("gateway", "uptime_s"), "x",
               "'gateway.uptime_s' must be a number or null, got 'x'"),
    "plugins": ("status", ("gateway", "plugins"), ["memory-continuity"],
                "'gateway.plugins' must be an object or null, got ['memory-continuity']"),
    "components": ("status", ("current", "components"), ["fleet"],
                   "'current.components' must be an object or null, got ['fleet']"),
    "findings": ("doctor", ("continuity", "targets", 0, "findings"), "none",
                 "'continuity.targets[0].findings' must be a list or null, got 'none'"),
    "finding": ("doctor", ("continuity", "targets", 0, "findings", 0), ["format"],
                "'continuity.targets[0].findings[0]' must be an object, got ['format']"),
    "message": ("doctor", ("continuity", "targets", 0, "findings", 0, "message"), 7,
                "'continuity.targets[0].findings[0].message' must be a string or null, got 7"),
    "agent": ("doctor", ("continuity", "targets", 0, "agent"), {"id": "main"},
              "'continuity.targets[0].agent' must be a string or null, got {'id': 'main'}"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_host_answer_of_wrong_nested_types_is_that_hosts_readable_failure(tmp_path, case):
    task, path, value, reason = MALFORMED[case]
    good = {"status": GOOD_STATUS, "doctor": GOOD_DOCTOR}
    for name in ("h1", "h2"):
        state = tmp_path / ".fleet" / "sandbox" / name
        fake_release(state, ANSWERING_INSTALLER)
        for command, answer in good.items():
            if name == "h1" and command == task:
                answer = answer_with(answer, path, value)
            (state / f"{command}.json").write_text(json.dumps(answer))
    (tmp_path / "inventory.yaml").write_text(
        "vars: {connection: local, gateway: {manager: fleet}}\n"
        "hosts:\n  h1: {state_dir: .fleet/sandbox/h1}\n  h2: {state_dir: .fleet/sandbox/h2}\n"
        "groups:\n  sandbox: {hosts: [h1, h2]}\n")
    why = f"{task} gave an answer fleet cannot read: host h1: {reason}"

    code, out, _ = fleet(tmp_path, task, terminal=True)  # a wide terminal: no cell folds
    plain = SGR.sub("", out)
    assert code in (1, 2), plain
    assert any("h1" in line and why in line for line in plain.splitlines()), plain
    h2 = [line for line in plain.splitlines() if "│ h2 " in line]
    if task == "status":
        assert h2 and "1.0.0-abcdefabcdef" in h2[0] and "yes" in h2[0], plain
    else:
        assert h2 and "summary" in h2[0] and "OK" in h2[0], plain

    code, out, _ = fleet(tmp_path, task, "--json")
    hosts = hosts_of(json.loads(out))
    assert hosts["h1"]["ok"] is False and hosts["h1"]["note"] == why
    assert hosts["h2"]["ok"] is True
