"""What an operator meets on the command line: help, usage errors, reach of selectors, first-use
confirmation, dirty builds, dry runs, failure kinds, --json for every outcome, and the output.

Every test drives the `fleet` console script's entry point as a subprocess, as a user would.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from deploy_helpers import make_tree, stop_gateways
from fleetcli import FLEET

from fleet.continuity.statelayout import StateLayout

INVENTORY = """\
vars: {connection: local, gateway: {manager: fleet}, timeouts: {ready: 30, command: 120}}
hosts:
  box: {state_dir: .fleet/sandbox/box}
  mine: {state_dir: state/mine}
groups:
  sandbox: {hosts: [box]}
"""
STATES = (Path(".fleet/sandbox/box"), Path("state/mine"))
REPO = Path(__file__).resolve().parents[2]
LAB_TASKS = {"test", "lint", "bench", "sim", "harness.up", "harness.down", "harness.status",
             "harness.images", "openclaw.install", "openclaw.down", "openclaw.compat"}


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    yield tmp_path
    stop_gateways([tmp_path / s for s in STATES])


def fleet(cwd: Path, *args: str, stdin: str | None = None, env: dict | None = None):
    import os
    proc = subprocess.run([sys.executable, "-c", FLEET, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, input=stdin,
                          env=dict(os.environ, **(env or {})))
    return proc.returncode, proc.stdout, proc.stderr


def no_traceback(err: str) -> None:
    assert "Traceback" not in err, err


def checkout(*args: str) -> tuple[int, str, str]:
    """The checkout's `invoke` (tasks.py: the product's tasks plus the lab's), run from REPO."""
    proc = subprocess.run([sys.executable, "-m", "invoke", "-r", str(REPO), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("task", ["deploy", "status", "rollback", "restart", "build"])
def test_dash_h_is_help_and_dash_capital_h_is_hosts(tmp_path, task):
    code, out, err = fleet(tmp_path, task, "-h")
    assert code == 0, err
    assert "Usage:" in out
    if task in ("deploy", "status", "rollback", "restart"):
        assert "-H STRING, --hosts=STRING" in out


def listed(out: str) -> set[str]:
    """Task names in `--list` output (a summary's wrapped lines are indented further)."""
    return {m.group(1) for m in re.finditer(r"^  (\S+)", out, re.MULTILINE)}


def test_the_fleet_script_lists_the_product_and_the_checkout_adds_the_lab(tmp_path):
    code, out, err = fleet(REPO, "--list")
    assert code == 0, err
    product = listed(out)
    assert {"deploy", "status", "rollback", "restart", "build", "verify", "release", "logs",
            "doctor", "sandbox.down"} <= product
    assert not product & LAB_TASKS  # an operator's install has no lab to run them
    code, out, err = checkout("--list")
    assert code == 0, err
    assert listed(out) == product | LAB_TASKS
    # outside a project checkout, the tasks that need one are not offered, and say why
    code, out, err = fleet(tmp_path, "--list")
    assert listed(out) == product - {"verify", "release"}
    code, out, err = fleet(tmp_path, "verify")
    assert code == 2 and "works in a project checkout" in err and str(tmp_path) in err


@pytest.mark.parametrize("args, words", [
    (("deploy", "--bogus"), "unknown task or flag '--bogus'"),
    (("deploy", "-H"), "--hosts (-H) needs a value"),
    (("status", "--parallel"), "--parallel (-p) needs a value"),
    (("nosuchtask",), "unknown task or flag 'nosuchtask'"),
    (("verify",), "works in a project checkout"),  # outside one: a usage error too
])
def test_parser_errors_are_usage_errors_and_one_json_document(tmp_path, args, words):
    code, out, err = fleet(tmp_path, *args)
    assert code == 2 and words in err and not out
    no_traceback(err)
    code, out, err = fleet(tmp_path, *args[:1], "--json", *args[1:])
    doc = json.loads(out)
    assert code == 2 and doc["exit_code"] == 2 and words in doc["error"]
    assert doc["action"] == args[0] and doc["hosts"] == []


def test_every_task_summary_is_a_whole_sentence():
    """`--list` shows a task's first docstring line: it must say what the task does, whole."""
    from lab.cli import build_namespace

    def walk(coll, prefix=""):
        for name, task in coll.tasks.items():
            yield prefix + name, task
        for name, sub in coll.collections.items():
            yield from walk(sub, prefix + name + ".")

    cut = {name: (task.__doc__ or "").strip().splitlines()[:1]
           for name, task in walk(build_namespace())}
    assert not {n: line for n, line in cut.items() if not line or not line[0].endswith(".")}



def test_every_short_flag_is_a_letter():
    """Invoke gives a flag the first free character of its name as its short form; a dash
    (`--skip-hooks` once got `--`, the end-of-options marker) must never be one."""
    from lab.cli import build_namespace

    def walk(coll, prefix=""):
        for name, task in coll.tasks.items():
            yield prefix + name, task
        for name, sub in coll.collections.items():
            yield from walk(sub, prefix + name + ".")

    odd = {}
    for name, task in walk(build_namespace()):
        for arg in task.get_arguments():
            shorts = [n for n in arg.names if len(n) == 1]
            if any(not n.isalnum() for n in shorts):
                odd[f"{name} --{arg.name}"] = shorts
    assert odd == {}

ENVELOPE = {"schema", "action", "ok", "exit_code", "error", "duration_s", "summary", "hosts"}


def test_every_tasks_json_has_the_one_shape(workdir, artifacts):
    """One document of one shape (docs/operations.md) from every task that takes --json,
    whatever it adds (an artifact, versions, a severity); `logs` streams one object per line."""
    art = artifacts()
    runs = [("deploy", "--artifact", str(art.path)), ("status",), ("restart",), ("rollback",),
            ("doctor",), ("lock.status",), ("build",), ("verify",)]
    for args in runs:
        cwd = REPO if args[0] in ("build", "verify") else workdir
        code, out, err = fleet(cwd, *args, "--json")
        doc = json.loads(out)
        assert set(doc) >= ENVELOPE, (args, sorted(doc))
        assert doc["schema"] == 1 and doc["action"] == args[0], doc
        assert doc["exit_code"] == code and doc["ok"] is (code == 0), (args, code, err)
    code, out, err = fleet(workdir, "logs", "-n", "2", "--json")
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and records, err
    assert {(r["schema"], r["action"]) for r in records} == {(1, "logs")}
    assert {r["host"] for r in records} == {"box"} and all(r["error"] is False for r in records)
    code, out, _ = fleet(workdir, "logs", "-H", "nope", "--json")
    assert code == 2 and json.loads(out)["error"].startswith("error: ")


def test_dash_capital_h_selects_hosts(workdir):
    code, out, err = fleet(workdir, "status", "-H", "nosuch")
    assert code == 2 and "unknown host or group 'nosuch'" in err


@pytest.mark.parametrize("args, message", [
    (["deploy", "--parallel", "abc"], "--parallel 'abc': expected a whole number"),
    (["status", "--parallel", "0"], "--parallel 0: use 1 or more"),
    (["deploy", "--hosts", ""], "no hosts selected"),
    (["deploy", "--hosts", ",", "--json"], "no hosts selected"),
    (["status", "--hosts", "boxx"], "did you mean 'box'"),
    (["deploy", "--batch", "x", "--artifact", "/nonexistent.pyz"], "not a fleet artifact"),
])
def test_usage_errors_are_one_line_exit_2_without_traceback(workdir, args, message):
    code, out, err = fleet(workdir, *args)
    assert code == 2 and message in err, (code, err)
    no_traceback(err)
    if "--json" in args:
        doc = json.loads(out)
        assert doc["ok"] is False and doc["exit_code"] == 2 and message in doc["error"]


def test_wrong_build_hint_is_gone(workdir):
    _, _, err = fleet(workdir, "deploy", "--artifact", str(workdir / "inventory.yaml"))
    assert "invoke build" in err and "release.build" not in err


def test_no_inventory_refuses_naming_where_it_looked_and_creates_nothing(tmp_path):
    code, out, err = fleet(tmp_path, "deploy", env={"FLEET_INVENTORY": ""})
    assert code == 2 and str(tmp_path / "inventory.yaml") in err and "FLEET_INVENTORY" in err
    no_traceback(err)
    assert list(tmp_path.iterdir()) == []
    code, out, _ = fleet(tmp_path, "status", "--json", env={"FLEET_INVENTORY": ""})
    doc = json.loads(out)
    assert code == 2 and doc["exit_code"] == 2 and "no inventory" in doc["error"]
    assert doc["hosts"] == [] and doc["schema"] == 1


def test_all_never_reaches_the_sandbox_and_outside_hosts_need_a_yes_once(workdir, artifacts):
    art = artifacts()
    code, out, err = fleet(workdir, "deploy", "-H", "all", "--artifact", str(art.path))
    assert code == 2 and "mine" in err and "--yes" in err
    assert str(workdir / ".fleet") not in err  # the listed targets: all = mine only
    assert f"mine (local, {workdir / 'state' / 'mine'})" in err  # shown before anything
    assert not (workdir / "state").exists() and not (workdir / ".fleet" / "sandbox").exists()
    code, out, err = fleet(workdir, "deploy", "-H", "all", "--artifact", str(art.path), "--json",
                           stdin="y\n")  # not a terminal: the answer is not read
    assert code == 2 and json.loads(out)["error"].startswith("error: refusing")
    code, out, err = fleet(workdir, "deploy", "-H", "all", "--artifact", str(art.path), "--yes",
                           "--json")
    doc = json.loads(out)
    assert code == 0 and [h["host"] for h in doc["hosts"]] == ["mine"], err
    code, out, err = fleet(workdir, "restart", "-H", "mine", "--json")  # confirmed once: no ask
    assert code == 0 and json.loads(out)["hosts"][0]["result"] == "restarted", err
    code, _, err = fleet(workdir, "deploy", "-H", "box", "--artifact", str(art.path))
    assert code == 0, err  # the sandbox never asks


def test_a_dirty_build_goes_outside_the_sandbox_only_with_allow_dirty(workdir, tmp_path):
    tree = make_tree(tmp_path / "tree")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tree)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    layout = tree / "fleet" / "gateway" / "layout.py"
    layout.write_text(layout.read_text() + "# uncommitted\n")
    from fleet.release.artifact import build_artifact
    art = build_artifact(tree, tmp_path / "dist")
    assert "+dirty." in art.version
    args = ("--artifact", str(art.path), "--yes")
    code, _, err = fleet(workdir, "deploy", "-H", "mine", *args)
    assert code == 2 and "uncommitted" in err and "--allow-dirty" in err
    assert not (workdir / "state").exists()
    code, _, err = fleet(workdir, "deploy", "-H", "box", *args)
    assert code == 0, err
    code, out, err = fleet(workdir, "deploy", "-H", "mine", *args, "--allow-dirty", "--json")
    assert code == 0 and json.loads(out)["artifact"]["version"] == art.version, err


def test_dry_run_writes_nothing_not_even_the_artifact(tmp_path):
    tree = make_tree(tmp_path / "tree")
    (tree / "inventory.yaml").write_text(INVENTORY)
    before = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    code, out, err = fleet(tree, "deploy", "-H", "box,mine", "--dry-run", "--json")
    doc = json.loads(out)
    assert code == 0 and {h["result"] for h in doc["hosts"]} == {"planned"}, err
    assert doc["dry_run"] is True and doc["artifact"]["path"] is None
    after = sorted(p.relative_to(tree) for p in tree.rglob("*") if "__pycache__" not in p.parts)
    assert after == [p for p in before if "__pycache__" not in p.parts]  # no dist/, no .fleet/


def _hold_for(fault: Path, seconds: float) -> threading.Thread:
    """A `hold` fault at a step, lifted `seconds` after the installer stands there."""
    fault.parent.mkdir(parents=True, exist_ok=True)
    fault.write_text("hold")
    marker = fault.with_name(fault.name + ".held")

    def lift() -> None:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(seconds)
        fault.unlink(missing_ok=True)

    thread = threading.Thread(target=lift, daemon=True)
    thread.start()
    return thread


def test_output_force_restart_rollback_and_timing(workdir, artifacts):
    base, bumped = artifacts(), artifacts(bump="5.0.1")
    code, out, err = fleet(workdir, "deploy", "-H", "box", "--artifact", str(base.path))
    assert code == 0, err
    assert re.search(r"OK: 1 installed in \d+\.\ds", out)
    lines = [ln for ln in err.splitlines() if " box " in f" {ln} " and "(local" not in ln]
    assert lines and all(re.match(r"\d\d:\d\d:\d\d box ", ln) for ln in lines), err
    assert all(a != b for a, b in zip(lines, lines[1:])), lines  # no line twice in a row
    code, out, err = fleet(workdir, "deploy", "-H", "box", "--artifact", str(base.path),
                           "--force", "--json")
    assert code == 0 and json.loads(out)["hosts"][0]["result"] == "restarted"
    fleet(workdir, "deploy", "-H", "box", "--artifact", str(bumped.path))
    # a step that lasts: the installer announces only those (quick ones send no line)
    switch = StateLayout(workdir / STATES[0]).faults_dir / "switch"
    lift = _hold_for(switch, 0.6)
    code, out, err = fleet(workdir, "rollback", "-H", "box")
    lift.join(timeout=30)
    assert code == 0 and "rolled_back" in out, err
    assert "box rollback: switch" in err and "install:" not in err
    assert re.search(r"in \d+\.\ds", out)


def test_unreachable_host_and_paramiko_noise(workdir):
    """A port that accepts and hangs up: paramiko would print its own banner error; we don't."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    port = server.getsockname()[1]

    def serve():
        for _ in range(2):
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    (workdir / "inventory.yaml").write_text(f"""\
vars: {{known_hosts: kh, timeouts: {{connect: 3}}}}
hosts:
  hangup: {{host: 127.0.0.1, port: {port}}}
  refused: {{host: 127.0.0.1, port: 1}}
""")
    try:
        code, out, err = fleet(workdir, "status", "-H", "hangup,refused", "--json")
    finally:
        server.close()
    doc = json.loads(out)
    assert code == 1 and {h["host"]: h["result"] for h in doc["hosts"]} == {
        "hangup": "unreachable", "refused": "unreachable"}, doc
    assert "Exception (client)" not in err and "Socket exception" not in err
    no_traceback(err)


def test_failure_kinds_are_told_apart():
    import paramiko

    from fleet.deploy.connection import failure_kind
    from fleet.deploy.hostkeys import HostKeyError
    assert failure_kind(HostKeyError("x")) == "host_key"
    assert failure_kind(paramiko.AuthenticationException("no")) == "auth_failed"
    assert failure_kind(ConnectionRefusedError()) == "unreachable"
    assert failure_kind(socket.gaierror()) == "unreachable"
    assert failure_kind(paramiko.SSHException("Error reading SSH protocol banner")) == \
        "unreachable"
    assert failure_kind(RuntimeError("?")) == "failed"


def test_status_table_keeps_names_whole_at_80_columns():
    from rich.console import Console

    from fleet.deploy.report import status_summary, status_table
    from fleet.deploy.runner import HostResult
    from fleet.installer.protocol import HostStatus
    release = "5.0.1+dirty.0123abcd-0123456789ab"
    answer = {"current": {"release": release, "components": {"memory-continuity": "5.0.1",
                                                             "mc": "2.1.0"}},
              "ready": True, "gateway": {"pid": 1234, "uptime_s": 5.0},
              "disk_free_bytes": 5 * 1024 ** 3}
    results = [HostResult(f"sandbox-{i}", "ok", True, data=answer,
                          status=HostStatus.from_dict(answer)) for i in (1, 2, 3)]
    console = Console(width=80, record=True, color_system=None)
    console.print(status_table(results, console.width))
    text = console.export_text()
    for i in (1, 2, 3):
        assert f"sandbox-{i}" in text
    assert text.count(release) == 3 and text.count("5.0 GiB") == 3, text
    assert max(len(line) for line in text.splitlines()) <= 80
    wide = Console(width=200, record=True, color_system=None)
    wide.print(status_table(results, wide.width))
    assert "memory-continuity 5.0.1" in wide.export_text()
    summary = status_summary(results, 0.42)
    assert "3 host(s): 3 ready" in summary and release in summary and "0.4s" in summary


def _alive(pid: int) -> bool:
    import os
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # our own gateways are not our children, but be safe about zombies
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"
    except OSError:
        return True


def test_sandbox_down_stops_gateways_even_after_dot_fleet_was_removed(workdir, artifacts):
    import shutil
    (workdir / "inventory.yaml").write_text(INVENTORY.replace(
        "groups:", "  box2: {state_dir: .fleet/sandbox/box2}\ngroups:"))
    art = artifacts()
    code, out, err = fleet(workdir, "deploy", "-H", "box,box2,mine", "--yes", "--json",
                           "--artifact", str(art.path))
    pids = {h["host"]: h["data"]["gateway"]["pid"] for h in json.loads(out)["hosts"]}
    assert code == 0 and all(_alive(p) for p in pids.values()), err
    try:
        shutil.rmtree(workdir / ".fleet" / "sandbox" / "box2")  # box2 orphaned
        code, out, err = fleet(workdir, "sandbox.down")
        assert code == 0, err
        assert f"box: gateway pid {pids['box']} stopped" in out
        # box2's supervisor is found by its own pidfile and stops its gateway with it
        assert "orphaned gateway supervisor pid" in out and "its gateway with it" in out
        assert not _alive(pids["box"]) and not _alive(pids["box2"])
        assert _alive(pids["mine"])  # outside the sandbox: never touched
        assert (workdir / ".fleet" / "sandbox" / "box").is_dir()
        fleet(workdir, "deploy", "-H", "box", "--artifact", str(art.path))
        shutil.rmtree(workdir / ".fleet")  # the whole .fleet/ gone from under it
        code, out, err = fleet(workdir, "sandbox.down", "--purge")
        assert code == 0 and "orphaned gateway supervisor pid" in out
        assert "1 gateway(s) stopped" in out
        code, out, err = fleet(workdir, "deploy", "-H", "box", "--artifact", str(art.path))
        assert code == 0
        code, out, err = fleet(workdir, "sandbox.down", "--purge")
        assert code == 0 and "box: removed" in out
        assert not (workdir / ".fleet" / "sandbox" / "box").exists()
        assert (workdir / "state" / "mine").is_dir()
    finally:
        for pid in pids.values():
            if _alive(pid):
                import os
                os.kill(pid, 15)


def test_sandbox_down_finds_a_gateway_whose_supervisor_was_killed_and_state_removed(workdir,
                                                                                   artifacts):
    """The fleet manager's gateway is a fork of its supervisor (its command line is the
    supervisor's): orphaned by both, it is still found by the gateway pidfile it holds."""
    import os
    import shutil

    art = artifacts()
    code, out, err = fleet(workdir, "deploy", "-H", "box", "--yes", "--json", "--artifact",
                           str(art.path))
    assert code == 0, err
    gateway = json.loads(out)["hosts"][0]["data"]["gateway"]["pid"]
    state = workdir / ".fleet" / "sandbox" / "box"
    supervisor = json.loads((state / "run" / "supervisor.pid").read_text())["pid"]
    try:
        assert b"fleet.installer" in Path(f"/proc/{gateway}/cmdline").read_bytes()
        os.kill(supervisor, 9)
        shutil.rmtree(state)
        code, out, err = fleet(workdir, "sandbox.down")
        assert code == 0, err
        assert f"orphaned gateway pid {gateway} ({state.resolve()}) stopped" in out, out
        assert "supervisor pid" not in out
        assert not _alive(gateway)
    finally:
        if _alive(gateway):
            os.kill(gateway, 15)


def test_invoke_test_unit_and_k_with_spaces_select_real_tests():
    code, out, err = checkout("test", "--unit", "-k", "test_parse_count and not rejects",
                              "--args", "--collect-only -q tests/deploy/test_runner.py")
    collected = [ln for ln in out.splitlines() if "::" in ln]
    assert code == 0, (out, err)
    assert collected and all("test_parse_count[" in ln for ln in collected), out
    code, out, _ = checkout("test", "--unit", "--args",
                            "--collect-only -q tests/integration/test_ssh_config.py")
    assert "no tests collected" in out or "deselected" in out  # docker tests left out
    code, out, _ = checkout("test", "--docker", "--args",
                            "--collect-only -q tests/integration/test_ssh_config.py")
    assert "test_alias_and_jump_host_from_ssh_config" in out


def test_invoke_test_runs_the_tests_in_parallel_workers():
    code, out, err = checkout("test", "--workers", "2", "-k", "test_parse_count",
                              "--args", "tests/deploy/test_runner.py")
    assert code == 0, (out, err)
    assert "2 workers" in out and re.search(r"\b\d+ passed", out), out
    code, out, err = checkout("test", "--workers", "none")
    assert code == 2 and "--workers 'none': expected a whole number" in err


@pytest.mark.parametrize("answer, code", [("n\n", 2), ("y\n", 0)])
def test_on_a_terminal_first_use_asks_and_takes_the_answer(workdir, artifacts, answer, code):
    import os
    import pty
    art = artifacts()
    master, slave = pty.openpty()
    seen: list[bytes] = []

    def drain():
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            seen.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    os.write(master, answer.encode())
    proc = subprocess.run([sys.executable, "-c", FLEET, "deploy", "-H", "mine", "--artifact",
                           str(art.path)], cwd=workdir, stdin=slave, stderr=slave,
                          stdout=subprocess.PIPE, text=True, timeout=300)
    os.close(slave)
    reader.join(timeout=5)
    os.close(master)
    text = b"".join(seen).decode("utf-8", "replace")
    assert "outside the sandbox: mine. Continue? [y/N]" in text
    assert proc.returncode == code, text
    assert (workdir / "state" / "mine" / "fleet" / "current").exists() == (code == 0)
    assert (workdir / ".fleet" / "confirmed-hosts.json").exists() == (code == 0)


def test_re_pointing_an_ssh_config_alias_asks_again(workdir):
    """Consent is for where a host really goes: ssh_config's HostName, port, user and jump
    hosts, not the alias the inventory names."""
    ssh_config = workdir / "ssh_config"
    ssh_config.write_text("Host h-cloud\n  HostName 127.0.0.1\n  Port 1\n  User opc\n")
    (workdir / "inventory.yaml").write_text(
        "vars: {timeouts: {connect: 5}}\nhosts:\n  cloud: {host: h-cloud}\n")
    env = {"FLEET_SSH_CONFIG": str(ssh_config)}
    code, out, err = fleet(workdir, "restart", "-H", "cloud", "--yes", "--json", env=env)
    assert "cloud (opc@127.0.0.1:1)" in err  # the resolved destination, shown before
    assert json.loads(out)["hosts"][0]["result"] == "unreachable"  # nothing listens: confirmed
    code, out, err = fleet(workdir, "restart", "-H", "cloud", "--json", env=env)
    assert json.loads(out)["hosts"][0]["result"] == "unreachable"  # no question the 2nd time
    for moved in ("Host h-cloud\n  HostName 127.0.0.2\n  Port 1\n  User opc\n",
                  "Host h-cloud\n  HostName 127.0.0.1\n  Port 1\n  User opc\n"
                  "  ProxyJump admin@127.0.0.1:2\n"):
        ssh_config.write_text(moved)
        code, out, err = fleet(workdir, "restart", "-H", "cloud", "--json", env=env)
        assert code == 2 and json.loads(out)["error"].startswith("error: refusing"), out
        assert "cloud" in json.loads(out)["error"]


def test_without_hosts_the_default_selection_is_explained_when_the_inventory_lacks_it(tmp_path):
    (tmp_path / "inventory.yaml").write_text("hosts:\n  web1: {host: web1.invalid}\n")
    for task in ("status", "deploy", "doctor", "logs", "lock.status"):
        code, out, err = fleet(tmp_path, task, "--json")
        error = json.loads(out)["error"]
        assert code == 2 and "no --hosts (-H) given" in error and "'sandbox'" in error, error
        assert "web1" in error and "all" in error
    code, out, err = fleet(tmp_path, "status", "-H", "sandbox", "--json")  # typed: plain
    assert "unknown host or group 'sandbox'" in json.loads(out)["error"]


def test_two_inventories_in_one_directory_keep_their_own_confirmations(tmp_path):
    for name, state in (("staging", "st"), ("production", "pr")):
        (tmp_path / f"{name}.yaml").write_text(
            "vars: {connection: local, gateway: {manager: fleet}}\n"
            f"hosts:\n  web1: {{state_dir: {state}/web1}}\n")

    def restart(inventory: str, *extra: str) -> tuple[int, dict]:
        code, out, err = fleet(tmp_path, "restart", "-H", "web1", "--inventory", inventory,
                               "--json", *extra)
        return code, json.loads(out)

    code, doc = restart("staging.yaml", "--yes")
    assert code == 1 and "nothing to restart" in doc["hosts"][0]["note"]  # confirmed, reached
    code, doc = restart("production.yaml")  # the same name in another inventory: asked
    assert code == 2 and "not yet confirmed for" in doc["error"]
    assert "production.yaml" in doc["error"] and "staging.yaml" not in doc["error"]
    assert restart("production.yaml", "--yes")[0] == 1
    for inventory in ("staging.yaml", "production.yaml"):  # neither overwrote the other
        code, doc = restart(inventory)
        assert code == 1 and doc["error"] is None, doc


def test_an_ssh_config_fleet_cannot_follow_is_refused_before_any_host(workdir):
    ssh_config = workdir / "ssh_config"
    ssh_config.write_text("Host h-cloud\n  ProxyCommand ssh -W %h:%p gw\n")
    (workdir / "inventory.yaml").write_text("hosts:\n  cloud: {host: h-cloud}\n")
    code, out, err = fleet(workdir, "restart", "-H", "cloud", "--yes", "--json",
                           env={"FLEET_SSH_CONFIG": str(ssh_config)})
    error = json.loads(out)["error"]
    assert code == 2 and f"{ssh_config}:2" in error and "ProxyCommand" in error, error
    assert "ProxyJump" in error  # what to use instead
    no_traceback(err)
