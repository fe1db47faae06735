"""Run hooks through the `fleet` command line, as Kamal's hooks: executables in `.fleet/hooks/`
beside the inventory get the run's JSON document on stdin and FLEET_* variables; a failing
`pre-*` hook stops the run before any host changes; a hook is killed at its timeout; a failing
post hook is a warning; `rollout-aborted` runs when a rollout takes its hosts back; and the
webhook example only prints without a URL."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from deploy_helpers import release_of, stop_gateways
from fleetcli import FLEET

from fleet.continuity import detached
from fleet.continuity.statelayout import StateLayout
from fleet.deploy import rollout, runhooks

REPO = Path(__file__).resolve().parents[2]
NAMES = ("h01", "h02", "h03")
INVENTORY = ("vars: {connection: local, gateway: {manager: fleet}, "
             "timeouts: {ready: 30, command: 120}}\nhosts:\n"
             + "".join(f"  {n}: {{state_dir: .fleet/hosts/{n}}}\n" for n in NAMES)
             + f"groups:\n  sandbox: {{hosts: [{', '.join(NAMES)}]}}\n")
# a hook that records what it was given: stdin, its FLEET_* variables, and the order hooks ran
RECORDER = """#!/bin/sh
name=$(basename "$0")
cat > "$OUT/$name.json"
env | grep '^FLEET_' | sort > "$OUT/$name.env"
echo "$name" >> "$OUT/order"
echo "$name says hello on stdout"
echo "$name says hello on stderr" >&2
exit "${HOOK_EXIT:-0}"
"""


class Box:
    """A sandbox fleet in a temp dir, driven by the `fleet` script as an operator would."""

    def __init__(self, root: Path):
        self.root = root
        self.out = root / "hook-out"
        self.out.mkdir()
        self.hooks = root / ".fleet" / "hooks"
        (root / "inventory.yaml").write_text(INVENTORY)

    def hook(self, name: str, text: str = RECORDER) -> Path:
        self.hooks.mkdir(parents=True, exist_ok=True)
        path = self.hooks / name
        path.write_text(text)
        path.chmod(0o755)
        return path

    def run(self, *args: str, env: dict | None = None) -> tuple[int, str, str]:
        full = dict(os.environ, OUT=str(self.out), **(env or {}))
        full.pop("SLACK_WEBHOOK_URL", None)
        proc = subprocess.run([sys.executable, "-c", FLEET, *args], cwd=self.root,
                              capture_output=True, text=True, timeout=600, env=full)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc.returncode, proc.stdout, proc.stderr

    def json(self, *args: str, env: dict | None = None) -> tuple[int, dict, str]:
        code, out, err = self.run(*args, "--json", env=env)
        try:
            return code, json.loads(out), err
        except ValueError:
            raise AssertionError(f"not one JSON document (exit {code}):\n{out}\n{err}") from None

    def seen(self, hook: str) -> tuple[dict, dict]:
        """What `hook` read on stdin and the FLEET_* variables fleet sets for hooks that it had
        (other FLEET_* variables of the environment, such as CI's FLEET_REQUIRE_*, pass through
        and are not the hook's)."""
        doc = json.loads((self.out / f"{hook}.json").read_text())
        env = dict(line.split("=", 1) for line in
                   (self.out / f"{hook}.env").read_text().splitlines())
        return doc, {k: v for k, v in env.items() if k in runhooks.VARIABLES}

    def order(self) -> list[str]:
        path = self.out / "order"
        return path.read_text().split() if path.exists() else []

    def forget(self) -> None:
        shutil.rmtree(self.out)
        self.out.mkdir()

    def current(self, name: str) -> str | None:
        link = StateLayout(self.root / ".fleet" / "hosts" / name).current
        return os.path.basename(os.readlink(link)) if os.path.islink(link) else None

    def audit_lines(self) -> int:
        return sum(len(StateLayout(self.root / ".fleet" / "hosts" / n).audit.read_text()
                       .splitlines()) for n in NAMES)


@pytest.fixture
def box(tmp_path, artifacts):
    """Three sandbox hosts on the base release, deployed before any hook exists."""
    fleet = Box(tmp_path)
    base = artifacts()
    code, out, err = fleet.run("deploy", "--artifact", str(base.path))
    assert code == 0, out + err
    yield fleet, base
    stop_gateways([tmp_path / ".fleet" / "hosts" / n for n in NAMES])


def test_hooks_read_the_plan_then_the_outcome_with_fleet_variables(box, artifacts):
    fleet, base = box
    for name in ("pre-deploy", "post-deploy"):
        fleet.hook(name)
    fleet.hook("post-deploy.sh")  # as Kamal's, a hook has no extension: named, never run
    new = artifacts(bump="5.9.20")

    code, out, err = fleet.run("deploy", "--artifact", str(new.path), "--dry-run")
    assert code == 0, err
    assert fleet.order() == [] and "not run (pre-deploy, post-deploy)" in err

    # a variable of the operator's own environment that this run has no value for is unset
    code, doc, err = fleet.json("deploy", "--artifact", str(new.path),
                                env={"FLEET_ROLLOUT": "not-this-run"})
    assert code == 0, err
    assert fleet.order() == ["pre-deploy", "post-deploy"]
    assert "post-deploy.sh is not a hook fleet runs; name it post-deploy (no extension)" in err

    plan, env = fleet.seen("pre-deploy")
    assert plan["action"] == "deploy" and plan["ok"] is None and plan["exit_code"] is None
    assert [(h["host"], h["result"]) for h in plan["hosts"]] == [(n, "pending") for n in NAMES]
    assert plan["artifact"]["sha256"] == new.sha256
    assert env == {"FLEET_HOOK": "pre-deploy", "FLEET_ACTION": "deploy",
                   "FLEET_RELEASE": release_of(new), "FLEET_VERSION": new.version,
                   "FLEET_SHA256": new.sha256, "FLEET_HOSTS": ",".join(NAMES),
                   "FLEET_INVENTORY": str(fleet.root / "inventory.yaml"),
                   "FLEET_PERFORMER": env["FLEET_PERFORMER"],
                   "FLEET_RECORDED_AT": env["FLEET_RECORDED_AT"]}
    assert "@" in env["FLEET_PERFORMER"] and env["FLEET_RECORDED_AT"].endswith("Z")

    finished, env = fleet.seen("post-deploy")
    assert env["FLEET_HOOK"] == "post-deploy" and env["FLEET_OUTCOME"] == "succeeded"
    assert env["FLEET_RUNTIME"].isdigit() and "FLEET_ROLLOUT" not in env
    assert finished["ok"] is True and finished["summary"] == {"installed": 3}
    assert [h["to"]["release"] for h in finished["hosts"]] == [release_of(new)] * 3
    assert [h["hook"] for h in finished["hooks"]] == ["pre-deploy"]

    # the printed document lists both hooks; their output went to stderr, never to stdout
    assert [(h["hook"], h["ok"], h["exit_code"]) for h in doc["hooks"]] == [
        ("pre-deploy", True, 0), ("post-deploy", True, 0)]
    assert "pre-deploy| pre-deploy says hello on stdout" in err
    assert "post-deploy| post-deploy says hello on stderr" in err


def test_a_failing_pre_deploy_stops_the_run_before_any_host_changes(box, artifacts):
    fleet, base = box
    new = artifacts(bump="5.9.21")
    fleet.hook("post-deploy")
    audit = fleet.audit_lines()
    gate = fleet.hook("pre-deploy", RECORDER.replace(
        'exit "${HOOK_EXIT:-0}"', 'printf "CI is red \\033[2J\\n" >&2; exit 3'))

    code, doc, err = fleet.json("deploy", "--artifact", str(new.path))
    assert code == 2, err
    assert doc["error"].startswith(f"error: refusing: hook {gate} exited with 3")
    assert "CI is red \x1b[2J" in doc["error"]  # exact in JSON
    assert "CI is red \\x1b[2J" in err and "\x1b" not in err  # escaped on the terminal
    assert doc["hosts"] == [] and doc["hooks"][0]["exit_code"] == 3
    assert fleet.order() == ["pre-deploy"]  # no post-deploy: the run never started

    for text, mode, words in [(RECORDER, 0o644, f"chmod +x {gate}"),
                              ("echo no interpreter line\n", 0o755, "#! line")]:
        gate.write_text(text)
        gate.chmod(mode)
        code, doc, err = fleet.json("deploy", "--artifact", str(new.path))
        assert code == 2 and words in doc["error"], doc
    gate.unlink()
    gate.mkdir()
    code, out, err = fleet.run("deploy", "--artifact", str(new.path))
    assert code == 2 and "is not a regular file" in err, err

    assert fleet.audit_lines() == audit  # no host heard of any of these runs
    assert all(fleet.current(n) == release_of(base) for n in NAMES)

    code, doc, err = fleet.json("deploy", "--artifact", str(new.path), "--skip-hooks")
    assert code == 0 and "hooks" not in doc, err
    assert "--skip-hooks: the hooks in" in err
    assert fleet.order() == ["pre-deploy"]  # still only the first refused run's


def test_a_failing_pre_rollback_stops_the_rollback_before_any_host_changes(box, artifacts):
    fleet, base = box
    new = artifacts(bump="5.9.22")
    code, out, err = fleet.run("deploy", "--artifact", str(new.path))
    assert code == 0, out + err
    fleet.hook("post-rollback")
    audit = fleet.audit_lines()
    gate = fleet.hook("pre-rollback", RECORDER.replace('exit "${HOOK_EXIT:-0}"', "exit 4"))

    code, doc, err = fleet.json("rollback")
    assert code == 2, err
    assert doc["error"].startswith(f"error: refusing: hook {gate} exited with 4")
    assert doc["hosts"] == [] and fleet.order() == ["pre-rollback"]
    assert fleet.audit_lines() == audit
    assert all(fleet.current(n) == release_of(new) for n in NAMES)

    gate.unlink()
    code, doc, err = fleet.json("rollback")
    assert code == 0, err
    assert all(fleet.current(n) == release_of(base) for n in NAMES)
    assert fleet.order() == ["pre-rollback", "post-rollback"]


def test_a_hanging_hook_is_killed_with_its_process_group_at_its_timeout(box, artifacts):
    fleet, base = box
    new = artifacts(bump="5.9.22")
    fleet.hook("pre-deploy", "#!/bin/sh\n"
               "sleep 600 &\n"
               'echo $! > "$OUT/child"\n'
               "trap '' TERM\n"  # it ignores SIGTERM: only SIGKILL ends it
               'echo "waiting for CI" >&2\n'
               "sleep 600\n")
    code, doc, err = fleet.json("deploy", "--artifact", str(new.path), "--hook-timeout", "1s")
    assert code == 2, err
    assert "did not finish within its timeout of 1s" in doc["error"]
    assert doc["hooks"][0]["timed_out"] is True
    assert "waiting for CI" in doc["error"]
    child = int((fleet.out / "child").read_text())
    assert not detached.alive(child)  # its background child went with it
    assert all(fleet.current(n) == release_of(base) for n in NAMES)

    code, doc, err = fleet.json("deploy", "--hook-timeout", "2h")
    assert code == 2 and "--hook-timeout '2h': at most 1h" in doc["error"], doc


def test_post_deploy_sees_the_outcome_and_its_own_failure_changes_no_exit_code(box, artifacts):
    fleet, base = box
    fleet.hook("post-deploy", RECORDER.replace('"${HOOK_EXIT:-0}"', "7"))
    good = artifacts(bump="5.9.23")
    code, doc, err = fleet.json("deploy", "--artifact", str(good.path))
    assert code == 0, err
    assert doc["hooks"][0]["exit_code"] == 7 and not doc["hooks"][0]["ok"]
    assert "warning: hook" in err and "exited with 7" in err

    bad = artifacts(bump="5.9.24", fail_on=("h02",))
    code, doc, err = fleet.json("deploy", "--artifact", str(bad.path))
    assert code == 1, err
    finished, env = fleet.seen("post-deploy")
    assert env["FLEET_OUTCOME"] == "failed" and finished["exit_code"] == 1
    assert {h["host"]: h["result"] for h in finished["hosts"]} == {
        "h01": "installed", "h02": "rolled_back", "h03": "installed"}


def test_rollout_aborted_runs_when_a_spent_budget_takes_the_hosts_back(box, artifacts):
    fleet, base = box
    for name in ("pre-deploy", "post-deploy", "rollout-aborted"):
        fleet.hook(name)
    bad = artifacts(bump="5.9.25", fail_on=("h01",))
    code, doc, err = fleet.json("deploy", "--artifact", str(bad.path), "--waves", "1,100%",
                                "--max-fail", "0")
    assert code == 1 and doc["rollout"]["state"] == "aborted", err
    rid = doc["rollout"]["id"]
    assert fleet.order() == ["pre-deploy", "rollout-aborted", "post-deploy"]

    plan, env = fleet.seen("pre-deploy")
    assert plan["rollout"]["id"] == rid and plan["waves"] == [["h01"], ["h02", "h03"]]
    assert env["FLEET_ROLLOUT"] == rid
    aborted, env = fleet.seen("rollout-aborted")
    assert env["FLEET_ROLLOUT"] == rid and env["FLEET_OUTCOME"] == "aborted"
    assert env["FLEET_RELEASE"] == release_of(bad)
    assert aborted["rollout"]["state"] == "aborted"
    assert aborted["rollout"]["stands"] == {release_of(base): list(NAMES)}
    assert fleet.seen("post-deploy")[1]["FLEET_OUTCOME"] == "aborted"


def test_rollout_aborted_runs_when_the_operator_takes_a_rollout_back(box, artifacts):
    fleet, base = box
    new = artifacts(bump="5.9.26")
    code, out, err = fleet.run("deploy", "--artifact", str(new.path), "--waves", "1,100%",
                               env={rollout.CRASH_ENV: "wave-1-done"})
    assert code == -9, err
    rid = rollout.unfinished(fleet.root / "inventory.yaml")[0]["id"]
    for name in ("pre-rollback", "post-rollback", "rollout-aborted"):
        fleet.hook(name)
    code, doc, err = fleet.json("rollback", "--rollout", rid)
    assert code == 1 and doc["rollout"]["state"] == "aborted", err
    assert fleet.order() == ["pre-rollback", "rollout-aborted", "post-rollback"]
    plan, env = fleet.seen("pre-rollback")
    assert env["FLEET_ACTION"] == "rollback" and env["FLEET_ROLLOUT"] == rid
    assert plan["rollout"]["state"] == "running"
    assert fleet.seen("rollout-aborted")[1]["FLEET_OUTCOME"] == "aborted"

    fleet.forget()  # taken back already: nothing to do, no hook runs
    code, doc, err = fleet.json("rollback", "--rollout", rid)
    assert doc["rollout"]["state"] == "aborted" and fleet.order() == []


def test_the_webhook_example_only_prints_without_a_url(box, artifacts):
    fleet, base = box
    example = REPO / "examples" / "hooks" / "post-deploy"
    assert example.stat().st_mode & stat.S_IXUSR
    # the docs show the very file
    docs = (REPO / "docs" / "operations.md").read_text()
    assert f"```python\n{example.read_text()}```" in docs
    fleet.hook("post-deploy", example.read_text())
    new = artifacts(bump="5.9.27")
    code, doc, err = fleet.json("deploy", "--artifact", str(new.path))
    assert code == 0 and doc["hooks"][0]["ok"], err
    said = next(line for line in err.splitlines() if "would send:" in line)
    message = json.loads(said.split("would send: ", 1)[1])["text"]
    assert message.startswith(f"fleet deploy of {release_of(new)} by ")
    assert ": succeeded on 3 host(s) (3 installed)" in message
