"""The continuity scenario on one real OpenClaw gateway: what a release must do for fleet to call
it proven (the compat matrix runs it on every release; lab.openclaw.compat).

One sandbox OpenClaw host of the release, fleet's plugins deployed as a user deploys them, and a
probe plugin beside them that records what OpenClaw hands plugins (lab/openclaw/probe: the turn
corpus is made from it). Then, as a user would, through the gateway's own RPCs and the scripted
model (lab/openclaw/model.py):

- deploy: the first deploy installs, both plugins answer at the release's versions;
- turn: a user turn, and the parent's Objective is the user's words;
- spawn, seed, child state: a turn that spawns a child; the child runs, its model request holds
  the parent's seed, its own Objective is its task;
- recovered once: the child's final answer lands in the parent's Unsurfaced Results once,
  and OpenClaw's announce turn leaves the parent's Objective alone;
- recovery: the next user turn gets the recovery block with the parent's Objective;
- /mc subagents, /mc doctor, /mc settings: each answers through `chat.send` (settings also
  writes a value into openclaw.json);
- clean state: no section of the parent's or the child's state holds OpenClaw's own text;
- upgrade: a new release deploys and answers at its version;
- rollback: python, rollback: entry: a release whose Python core raises at import, and one whose
  entry throws at load, are each rolled back with the error named, the old version answering.

Each check passes or fails on its own with what went wrong; one that needs an earlier one that
failed is not run. Timings are the deploys' wall time as the control side sees it.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from fleet.continuity.atomicfile import atomic_write
from fleet.continuity.document import SECTIONS, StateDocument
from fleet.continuity.statelayout import StateLayout
from fleet.deploy import api
from fleet.deploy.inventory import Host
from fleet.installer.openclawgw import RpcError
from lab.openclaw.drive import (
    MAIN_SESSION,
    Driver,
    completion_steered_in,
    is_child_request,
    is_completion_turn,
    texts,
    wait_for,
)
from lab.sourcetree import break_js_entry, break_python_entry, snapshot

OBJECTIVE = "Migrate the billing service to Postgres 16 this week"
MARKER = "PARENT-MARKER-7f3"
TASK = "Check the replication lag on db-2"
RESULT = "Replication lag on db-2 is 3 seconds, safe to switch"
NEXT = "What is next?"
FIRST_TURN = f"{OBJECTIVE} [[reply: Plan: dump, restore, switch DNS.]]"
SPAWN_TURN = (f"{MARKER}: check the replication lag on db-2 [[spawn: {TASK} | reply: {RESULT} | "
              "label: lag]] [[reply: Asked a subagent.]]")
NEXT_TURN = f"{NEXT} [[reply: Next: restore on db-2.]]"
CHILD_TASK = f"{TASK} [[reply: {RESULT}]]"  # what the scripted model makes the task
SETTING = ("bridgeTimeoutMs", 25000)
BROKEN_ENTRY = "broken release: the entry throws at load"
BROKEN_PYTHON = "broken release: the Python core raises at import"
UPGRADE_VERSION, PYTHON_BROKEN_VERSION, ENTRY_BROKEN_VERSION = "5.0.1", "5.0.2", "5.0.3"

CHECKS = ("deploy", "turn", "spawn", "seed", "child state", "recovered once", "recovery",
          "/mc subagents", "/mc doctor", "/mc settings", "clean state", "upgrade",
          "rollback: python", "rollback: entry")
# On a host whose plugins OpenClaw installed itself (`openclaw plugins install`): every check up
# to fleet's own deploys (an upgrade and rollbacks are what fleet adds); "deploy" is then the
# installed versions answering.
INSTALLED_CHECKS = CHECKS[:CHECKS.index("upgrade")]
PROBE = Path(__file__).resolve().parent / "probe"
PROBE_ID = "fleet-probe"

# OpenClaw's own text, which no section of a state file may hold: its envelopes and markers
# (every form the supported releases write), and its timestamp envelope at a line's start.
OPENCLAW_TEXT = (
    "[Inter-session message]", "This content was routed by OpenClaw", "isUser=false",
    "BEGIN_OPENCLAW_INTERNAL_CONTEXT", "END_OPENCLAW_INTERNAL_CONTEXT",
    "OpenClaw runtime context (internal)", "[Internal task completion event]",
    "A background task completed", "[Subagent Context]", "[Subagent Task]",
    "Your assigned task is in the system prompt", "[Bootstrap pending]",
    "Keep this internal context private", "UNTRUSTED_CHILD_RESULT", "<prompt-data>",
    "session_key:", "sourceSession=",
)
_STAMP = re.compile(r"^\[\w{3} \d{4}-\d{2}-\d{2} \d{2}:\d{2}[^\]]*\]", re.M)


@dataclass(frozen=True)
class Releases:
    """The four builds the scenario deploys, made once from the checkout's sources."""

    base: api.ArtifactRef
    upgrade: api.ArtifactRef
    python_broken: api.ArtifactRef
    entry_broken: api.ArtifactRef


def build_releases(work: Path) -> Releases:
    """Build the scenario's releases from snapshots of the checkout in `work`."""
    out = work / "dist"

    def tree(name: str, version: str | None, breaker: Callable | None = None) -> Path:
        plugin = snapshot(work / name, version=version)
        if breaker is not None:
            breaker(plugin)
        return work / name

    return Releases(
        base=api.build_artifact(tree("base", None), out),
        upgrade=api.build_artifact(tree("upgrade", UPGRADE_VERSION), out),
        python_broken=api.build_artifact(tree("python-broken", PYTHON_BROKEN_VERSION, lambda p:
                                              break_python_entry(p, BROKEN_PYTHON)), out),
        entry_broken=api.build_artifact(tree("entry-broken", ENTRY_BROKEN_VERSION, lambda p:
                                             break_js_entry(p, BROKEN_ENTRY)), out))


def install_probe(host: Host, log: Path) -> None:
    """Load the probe plugin beside fleet's (a path of the user's own in openclaw.json, which a
    deploy keeps), recording into `log`."""
    config = Path(host.state_dir) / "openclaw.json"
    data = json.loads(config.read_text(encoding="utf-8"))
    plugins = data.setdefault("plugins", {})
    load = plugins.setdefault("load", {})
    load["paths"] = [p for p in load.get("paths", []) if p != str(PROBE)] + [str(PROBE)]
    plugins.setdefault("entries", {})[PROBE_ID] = {
        "enabled": True, "hooks": {"allowConversationAccess": True},
        "config": {"logFile": str(log)}}
    atomic_write(config, json.dumps(data, indent=2) + "\n", 0o600)


def probe_records(log: Path) -> list[dict]:
    """What the probe recorded, in order (a torn last line is skipped)."""
    out = []
    if log.exists():
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


@dataclass
class Outcome:
    """What one run of the scenario found: each check's verdict, deploy timings, and the turns
    it started (run id -> the message, for the corpus)."""

    checks: dict = field(default_factory=dict)  # name -> {"ok": bool, "detail": str}
    seconds: dict = field(default_factory=dict)
    turns: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(self.checks.get(name, {}).get("ok") for name in CHECKS)


class Scenario:
    """One run on one prepared sandbox host (its model running, its gateway not yet deployed)."""

    checks = CHECKS

    def __init__(self, host: Host, releases: Releases, probe_log: Path) -> None:
        self.host, self.releases, self.probe_log = host, releases, probe_log
        self.driver = Driver(host)
        self.outcome = Outcome()
        self.spawn_from = 0  # model requests before the spawning turn
        self.child_dir: Path | None = None

    # -- running ---------------------------------------------------------------------------
    def run(self) -> Outcome:
        steps = [
            ("deploy", (), self.first_deploy),
            ("turn", ("deploy",), self.user_turn),
            ("spawn", ("deploy",), self.spawn),
            ("seed", ("spawn",), self.seed),
            ("child state", ("spawn",), self.child_state),
            ("recovered once", ("spawn",), self.recovered_once),
            ("recovery", ("turn",), self.recovery),
            ("/mc subagents", ("deploy",), lambda: self.mc("/mc subagents",
                                                           "Subagent State Overview")),
            ("/mc doctor", ("deploy",), lambda: self.mc("/mc doctor", "Continuity doctor")),
            ("/mc settings", ("deploy",), self.mc_settings),
            ("clean state", ("turn",), self.clean_state),
            ("upgrade", ("deploy",), self.upgrade),
            ("rollback: python", ("upgrade",), lambda: self.rollback(
                "python", self.releases.python_broken, BROKEN_PYTHON)),
            ("rollback: entry", ("upgrade",), lambda: self.rollback(
                "entry", self.releases.entry_broken, BROKEN_ENTRY)),
        ]
        for name, needs, body in steps:
            if name not in self.checks:
                continue
            missing = [n for n in needs if not self.outcome.checks.get(n, {}).get("ok")]
            if missing:
                self._verdict(name, False, f"not run: {', '.join(missing)} failed")
                continue
            try:
                body()
            except Exception as exc:  # a check fails alone, with what went wrong
                self._verdict(name, False, f"{type(exc).__name__}: {exc}"[:600])
            else:
                self._verdict(name, True, "")
        return self.outcome

    @property
    def ok(self) -> bool:
        """Every check of this scenario passed."""
        return all(self.outcome.checks.get(name, {}).get("ok") for name in self.checks)

    def _verdict(self, name: str, ok: bool, detail: str) -> None:
        self.outcome.checks[name] = {"ok": ok, "detail": detail}

    def _deploy(self, artifact: api.ArtifactRef, timing: str) -> api.HostResult:
        started = time.monotonic()
        # The matrix is what proves a release, so it deploys to releases not proven yet.
        (result,) = api.deploy([self.host], artifact, lambda *_e: None,
                               allow_unproven_openclaw=True)
        self.outcome.seconds[timing] = round(time.monotonic() - started, 1)
        return result

    @staticmethod
    def _versions(artifact: api.ArtifactRef) -> dict:
        return {k: v for k, v in artifact.components.items() if k in ("memory-continuity", "mc")}

    # -- the checks ------------------------------------------------------------------------
    def first_deploy(self) -> None:
        res = self._deploy(self.releases.base, "deploy")
        assert res.result == "installed", f"{res.result}: {res.note}"
        loaded = self.driver.loaded()
        assert loaded == self._versions(self.releases.base), f"plugins answer {loaded}"
        # the lab's own precondition: without the probe there is no corpus to record
        wait_for(f"the {PROBE_ID} plugin to load beside fleet's (its manifest is not one this "
                 "release loads?)", lambda: any(r.get("hook") == "register"
                                                for r in probe_records(self.probe_log)),
                 timeout=60, every=1.0)

    def _turn(self, message: str) -> None:
        run = self.driver.agent(message)
        self.outcome.turns[run] = message

    def _state(self, path: Path) -> StateDocument:
        return StateDocument.parse(path.read_text(encoding="utf-8"))

    @property
    def parent_state(self) -> Path:
        return self.driver.memory / "CURRENT_STATE.md"

    def _parent_ends(self) -> int:
        """How many of the main session's runs fleet's plugin has finished with (its agent_end
        outcome line names the session)."""
        log = StateLayout(self.driver.state).openclaw_log
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        return text.count(f"agent_end: {MAIN_SESSION}: ")

    def _settled(self) -> None:
        """Wait until fleet's plugin has handled the agent_end of every main-session run that
        ended (the probe saw them end): the state is then what those runs left."""
        def ended() -> int:
            return sum(1 for r in probe_records(self.probe_log) if r.get("hook") == "agent_end"
                       and (r.get("ctx") or {}).get("sessionKey") == MAIN_SESSION)

        wait_for("fleet's agent_end of every finished main-session run",
                 lambda: ended() and self._parent_ends() >= ended(), timeout=120, every=0.5)

    def user_turn(self) -> None:
        self._turn(FIRST_TURN)
        self._settled()
        objective = self._state(self.parent_state).get("Objective")
        assert objective == FIRST_TURN, f"the parent's Objective is {objective!r}"

    def spawn(self) -> None:
        self.spawn_from = len(self.driver.requests())
        self._turn(SPAWN_TURN)
        wait_for("the child's model request", lambda: self._child_requests(), timeout=300)

    def _child_requests(self) -> list:
        return [r for r in self.driver.requests()[self.spawn_from:]
                if is_child_request(r) and r.get("reply") == RESULT]

    def seed(self) -> None:
        child = texts(self._child_requests()[0])
        assert "=== PARENT AGENT CONTEXT ===" in child, "no parent seed in the child's request"
        seed = child.split("=== PARENT AGENT CONTEXT ===", 1)[1].split("=== END PARENT", 1)[0]
        assert MARKER in seed, "the seed lacks the parent's state"

    def child_state(self) -> None:
        path = wait_for("the child's CURRENT_STATE.md",
                        lambda: [p for p in (self.driver.memory / "subagents").glob(
                            "*/CURRENT_STATE.md")], timeout=120)[0]
        self.child_dir = path.parent
        objective = self._state(path).get("Objective")
        assert objective == CHILD_TASK, f"the child's Objective is {objective!r}"

    def _announce_ended(self) -> bool:
        """Whether a main-session run the scenario did not start (OpenClaw's announce) ended."""
        return any(r.get("hook") == "agent_end"
                   and (r.get("ctx") or {}).get("sessionKey") == MAIN_SESSION
                   and (r.get("ctx") or {}).get("runId") not in self.outcome.turns
                   for r in probe_records(self.probe_log))

    def recovered_once(self) -> None:
        first = wait_for("the parent's turn on the child's completion", lambda: [
            r for r in self.driver.requests()[self.spawn_from:] if is_completion_turn(r)],
            timeout=300)[0]
        if not completion_steered_in(first):  # else the spawning run took it: no announce run
            wait_for("the end of OpenClaw's announce turn", self._announce_ended, timeout=300)
        wait_for("the child's result in the parent's Unsurfaced Results",
                 lambda: RESULT in self._state(self.parent_state).get("Unsurfaced Results"),
                 timeout=120)
        self._settled()
        doc = self._state(self.parent_state)
        count = doc.get("Unsurfaced Results").count(f"Result: {RESULT}")
        assert count == 1, f"the child's result is in Unsurfaced Results {count} times"
        assert doc.get("Objective") == SPAWN_TURN, \
            f"after the announce, the parent's Objective is {doc.get('Objective')!r}"

    def recovery(self) -> None:
        before = len(self.driver.requests())
        self._turn(NEXT_TURN)
        later = [texts(r) for r in self.driver.requests()[before:] if not is_child_request(r)]
        assert later, "no model request for the next turn"
        block = later[0].split("=== CONTINUITY RECOVERY ===", 1)
        assert len(block) == 2, "no recovery block in the next turn's request"
        wanted = self._state_objective_at_recovery()
        assert f"Objective: {wanted}" in block[1].split("=== END RECOVERY ===", 1)[0], \
            f"the recovery block does not give the Objective {wanted!r}"
        self._settled()

    def _state_objective_at_recovery(self) -> str:
        # the last user turn before this one: the spawning one if it ran, else the first
        return SPAWN_TURN if SPAWN_TURN in self.outcome.turns.values() else FIRST_TURN

    def mc(self, command: str, answer: str) -> None:
        # A settings change may make the gateway restart (2026.4.x restarts on any plugin
        # config change): its chat is back a few seconds later, as its user sees it. An answer
        # OpenClaw lost (2026.5.20 once failed to append it to the transcript: "file lock
        # stale") is asked for again, once, as its user would.
        for attempt, wait in enumerate((60, 180)):
            self.driver.chat(command)
            try:
                wait_for(f"the {command} answer", lambda: answer in self.driver.history_text(),
                         timeout=wait, tolerate=(RpcError,))
                return
            except AssertionError:
                if attempt:
                    raise

    def mc_settings(self) -> None:
        self.mc("/mc settings", "MC Settings")
        key, value = SETTING
        self.mc(f"/mc settings {key} {value}", f"{key} = {value}")
        config = json.loads((self.driver.state / "openclaw.json").read_text(encoding="utf-8"))
        entry = config["plugins"]["entries"]["memory-continuity"]  # the settings /mc tunes
        written = (entry.get("config") or {}).get(key)
        assert written == value, f"openclaw.json has memory-continuity {key} = {written!r}"

    def clean_state(self) -> None:
        files = [self.parent_state] + sorted((self.driver.memory / "subagents").glob(
            "*/CURRENT_STATE.md"))
        found = []
        for path in files:
            if not path.exists():
                continue
            doc = self._state(path)
            for section in SECTIONS:
                text = doc.get(section)
                marks = [m for m in OPENCLAW_TEXT if m in text] + _STAMP.findall(text)
                if marks:
                    found.append(f"{path.parent.name}/{path.name} {section}: {marks[0]!r}")
        assert not found, "OpenClaw's text in the state: " + "; ".join(found[:4])

    def upgrade(self) -> None:
        res = self._deploy(self.releases.upgrade, "upgrade")
        assert res.result == "installed", f"{res.result}: {res.note}"
        loaded = self.driver.loaded()
        assert loaded == self._versions(self.releases.upgrade), f"plugins answer {loaded}"

    def rollback(self, what: str, artifact: api.ArtifactRef, error: str) -> None:
        res = self._deploy(artifact, f"rollback_{what}")
        reason = str(res.data.get("reason") or res.note)
        assert res.result == "rolled_back", f"{res.result}: {reason}"
        assert error in reason, f"the reason does not name the error: {reason[:300]}"
        loaded = self.driver.loaded()
        assert loaded == self._versions(self.releases.upgrade), \
            f"after the rollback the plugins answer {loaded}"


class InstalledScenario(Scenario):
    """The scenario on a host whose fleet plugins `openclaw plugins install` put there
    (lab.openclaw.pluginpackage), its gateway running: `versions` ({plugin id: version}) are
    what must answer."""

    checks = INSTALLED_CHECKS

    def __init__(self, host: Host, versions: dict, probe_log: Path) -> None:
        super().__init__(host, None, probe_log)
        self.versions = versions

    def first_deploy(self) -> None:
        loaded = self.driver.loaded()
        assert loaded == self.versions, f"plugins answer {loaded}"
        wait_for(f"the {PROBE_ID} plugin to load beside fleet's", lambda: any(
            r.get("hook") == "register" for r in probe_records(self.probe_log)),
            timeout=60, every=1.0)
