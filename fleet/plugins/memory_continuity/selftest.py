"""The memory-continuity self-test: one parent and one child session on a scratch workspace,
driven through the plugin's own hooks, with no model call.

Why: a deploy's gate (fleet/gateway/selftest.py runs it; the entry re-exports `run` as
`selftest`) must catch a release that loads and answers readiness but no longer keeps state. In
the order a real turn fires the hooks: the parent's state is recovered into its prompt
(`before_prompt_build`), a child is spawned (`subagent_spawned`) and seeded from the parent's
state, the child's run and then the parent's run checkpoint at `agent_end`, and the parent's next
prompt carries its new checkpoint. Each check reads the injection or the file the plugin wrote.

The hooks get the event and ctx fields OpenClaw 2026.9.6 gives them (docs/architecture.md, "Hook
contract"), with this run's own agent id and keys, so nothing of a real session is touched. A
check the host's config rules out (`autoExtract`, `subagentSeed`, `subagentRecovery` off, an
`ignorePatterns` entry that matches, prompt injection not allowed) is skipped, not failed. The one
file outside the scratch, the child's requester record, is forgotten again at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from fleet.continuity import paths, store, subagenttask
from fleet.continuity.document import StateDocument, to_iso

from . import clock, extraction, handoff, lineage
from .startup import SEED_BEGIN

RUN_MS = 1500  # the durationMs the runs report


def _user(text: str) -> Dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _assistant(text: str) -> Dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def _objective(path: Path) -> Optional[str]:
    text = store.read_text(path)
    return None if text is None else StateDocument.parse(text).get("Objective")


def _ignored(config: Dict[str, Any], text: str) -> bool:
    patterns = extraction.compile_ignore_patterns(config.get("ignorePatterns") or [],
                                                  lambda _msg: None)
    return any(p.search(text) for p in patterns)


class _Session:
    """One session of the scenario: its key and the ctx its agent hooks get."""

    def __init__(self, test: Any, key: str, label: str) -> None:
        self.test = test
        self.key = key
        self.label = label
        self.runs = 0

    def ctx(self, run_id: str) -> Dict[str, Any]:
        return {"runId": run_id, "agentId": self.test.agent_id, "sessionKey": self.key,
                "sessionId": f"{self.label}-{self.test.token}",
                "workspaceDir": str(self.test.workspace), "trigger": "user"}

    def new_run(self) -> str:
        self.runs += 1
        return f"selftest-{self.label}-{self.runs}-{self.test.token}"

    def prompt(self, run_id: str, prompt: str) -> Any:
        """`before_prompt_build`: (the injected text, "" if none; errors)."""
        result, errors = self.test.hook("before_prompt_build",
                                        {"prompt": prompt, "messages": []}, self.ctx(run_id))
        injected = (result or {}).get("prependSystemContext")
        return (injected if isinstance(injected, str) else ""), errors

    def end(self, run_id: str, messages: List[Dict[str, Any]]) -> List[str]:
        event = {"runId": run_id, "messages": messages, "success": True, "durationMs": RUN_MS}
        _result, errors = self.test.hook("agent_end", event, self.ctx(run_id))
        return errors


def run(test: Any) -> None:
    """The scenario (see the module doc); `test` is fleet.gateway.selftest.SelfTestRun."""
    child_id = f"selftest-{test.token}"
    child = _Session(test, f"agent:{test.agent_id}:subagent:{child_id}", "child")
    try:
        _scenario(test, child_id, child)
    finally:
        lineage.forget(test.state_dir, child.key)


def _scenario(test: Any, child_id: str, child: _Session) -> None:
    config, ws, token = test.config, test.workspace, test.token
    parent = _Session(test, f"agent:{test.agent_id}:main", "parent")
    objective = f"Keep the fleet self-test {token} green"
    next_action = f"Compare the release notes of {token} with the deploy log"
    asks = f"Split the self-test review {token} between two helpers"
    task = f"Read the deploy log of {token} and report its last error"
    answer = f"The deploy log of {token} has no error since the last release"
    injects = test.injects
    writes = bool(config.get("autoExtract", True))

    doc = StateDocument.new(to_iso(clock.now()))
    doc.set("Objective", objective)
    doc.set("Next Action", next_action)
    own = paths.state_file(ws)
    own.parent.mkdir(parents=True, exist_ok=True)
    store.atomic_write(own, doc.render())

    # 1. the parent's turn: its state is recovered into the prompt
    first = parent.new_run()
    injected, errors = parent.prompt(first, asks)
    want = f"Objective: {objective}"
    if not injects:
        test.skip("recovery", "prompt injection is not allowed for this plugin")
    else:
        test.check("recovery", not errors and want in injected,
                   f"the parent's prompt to carry {want!r}", errors or injected or "nothing")

    # 2. it spawns a child, which is seeded from the parent's state
    spawn = {"runId": first, "childSessionKey": child.key, "agentId": test.agent_id,
             "mode": "run", "threadRequested": False}
    _r, errors = test.hook("subagent_spawned", spawn,
                           {"runId": first, "childSessionKey": child.key,
                            "requesterSessionKey": parent.key})
    recorded = lineage.requester_of(test.state_dir, child.key)
    test.check("spawn", not errors and recorded == parent.key,
               f"the child's requester recorded as {parent.key}", errors or recorded)
    child_run = child.new_run()
    seeded, errors = child.prompt(child_run, subagenttask.wrap(task))
    want = f"Next Action: {next_action}"
    if not (injects and config.get("subagentSeed", True)):
        test.skip("seed", "subagentSeed is off" if injects else "prompt injection is off")
    else:
        test.check("seed", not errors and SEED_BEGIN in seeded and want in seeded,
                   f"the child's prompt to carry the parent's state ({SEED_BEGIN} ... {want})",
                   errors or seeded or "nothing")

    # 3. the child's run ends: its own checkpoint and what its announce will carry
    errors = child.end(child_run, [_user(subagenttask.wrap(task)), _assistant(answer)])
    child_file = paths.child_state_file(ws, child_id)
    if not writes or _ignored(config, task):
        test.skip("child checkpoint", "autoExtract is off or ignorePatterns match the task")
    else:
        found = _objective(child_file)
        test.check("child checkpoint", not errors and found == task,
                   f"{child_file.relative_to(test.root)} with Objective {task!r}",
                   errors or found or "no file")
    if not config.get("subagentRecovery", True):
        test.skip("child handoff", "subagentRecovery is off")
    else:
        record = handoff.read(child_file.parent)
        found = handoff.pick(record, "ok")["text"] if record else None
        test.check("child handoff", not errors and found == answer,
                   f"{handoff.NAME} with the child's answer {answer!r}", errors or found)

    # 4. the parent's run ends: its checkpoint, recovered into its next prompt
    errors = parent.end(first, [_user(asks), _assistant(f"Two helpers review {token}.")])
    if not writes or _ignored(config, asks):
        test.skip("checkpoint", "autoExtract is off or ignorePatterns match the request")
        return
    found = _objective(own)
    test.check("checkpoint", not errors and found == asks,
               f"{own.relative_to(test.root)} with Objective {asks!r}", errors or found)
    injected, errors = parent.prompt(parent.new_run(), "")
    want = f"Objective: {asks}"
    if not injects:
        test.skip("recovery after checkpoint", "prompt injection is off")
    else:
        test.check("recovery after checkpoint", not errors and want in injected,
                   f"the next prompt to carry {want!r}", errors or injected or "nothing")
