"""The `/mc` self-test: the commands that read state, run against a scratch workspace.

Why: a deploy's gate (fleet/gateway/selftest.py runs it; the entry re-exports `run` as
`selftest`) must catch a release whose `/mc` loads but cannot read a checkpoint. The scenario
writes a state file with fleet.continuity's own writer into the scratch agent's workspace, then
asks `/mc state` (must show its objective) and `/mc doctor` (must answer), each through the
gateway's command registry, never with an `MC error`.
"""

from __future__ import annotations

from typing import Any

from fleet.continuity import paths, store
from fleet.continuity.document import StateDocument

ERROR = "MC error"


def run(test: Any) -> None:
    """The scenario; `test` is fleet.gateway.selftest.SelfTestRun."""
    objective = f"Keep the /mc self-test {test.token} green"
    doc = StateDocument.new()  # stamped now
    doc.set("Objective", objective)
    own = paths.state_file(test.workspace)
    own.parent.mkdir(parents=True, exist_ok=True)
    store.atomic_write(own, doc.render())
    ok, text = test.command("/mc state")
    test.check("/mc state", ok and ERROR not in text and objective in text,
               f"/mc state to show the objective {objective!r}", text)
    ok, text = test.command("/mc doctor")
    test.check("/mc doctor", ok and ERROR not in text and "Continuity doctor" in text,
               "/mc doctor to answer with its report", text)
