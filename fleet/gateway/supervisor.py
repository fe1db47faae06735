"""The subagent supervisor: each run's workflow state, and only the legal moves between states.

States: running, waiting_input, completed, failed, cancelled (docs/continuity.md, "Persistent
subagents"). The last three are terminal. An illegal move raises instead of quietly rewriting
history, so a late completion can never resurrect a cancelled run.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Optional

from fleet.continuity import ids

RUNNING = "running"
WAITING_INPUT = "waiting_input"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
STATES = (RUNNING, WAITING_INPUT, COMPLETED, FAILED, CANCELLED)
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED})
TRANSITIONS = {
    RUNNING: frozenset({WAITING_INPUT, COMPLETED, FAILED, CANCELLED}),
    WAITING_INPUT: frozenset({RUNNING, FAILED, CANCELLED}),
    COMPLETED: frozenset(),
    FAILED: frozenset(),
    CANCELLED: frozenset(),
}


class IllegalTransition(ValueError):
    """A run was asked to move where its state does not allow."""


class UnknownRun(KeyError):
    """No run with that id."""


class Supervisor:
    """Run id -> state and history; thread-safe."""

    def __init__(self) -> None:
        self._runs: Dict[str, Dict[str, Any]] = {}
        self._lock = threading.Lock()

    def start(self, owner: str, run_id: Optional[str] = None) -> Dict[str, Any]:
        """A new run in state `running`, owned by a persistent instance or child session."""
        run_id = run_id or ids.uuid4()
        with self._lock:
            if run_id in self._runs:
                raise IllegalTransition(f"run {run_id} already exists")
            run = {
                "runId": run_id,
                "owner": owner,
                "state": RUNNING,
                "history": [(RUNNING, time.time())],
            }
            self._runs[run_id] = run
            return dict(run)

    def transition(self, run_id: str, new_state: str, detail: Optional[str] = None) -> str:
        """Move a run to `new_state`; IllegalTransition names both states if not allowed."""
        if new_state not in STATES:
            raise IllegalTransition(f"unknown state {new_state!r}; states are {STATES}")
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                raise UnknownRun(run_id)
            old = run["state"]
            if new_state not in TRANSITIONS[old]:
                allowed = ", ".join(sorted(TRANSITIONS[old])) or "none (terminal)"
                raise IllegalTransition(
                    f"run {run_id}: cannot go from {old} to {new_state} (allowed: {allowed})"
                )
            run["state"] = new_state
            run["history"].append((new_state, time.time()))
            if detail is not None:
                run["detail"] = detail
            return old

    def state(self, run_id: str) -> str:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                raise UnknownRun(run_id)
            return run["state"]

    def runs(self, owner: Optional[str] = None) -> List[Dict[str, Any]]:
        with self._lock:
            return [
                {"runId": r["runId"], "owner": r["owner"], "state": r["state"],
                 "history": [s for s, _ in r["history"]], "detail": r.get("detail")}
                for r in self._runs.values()
                if owner is None or r["owner"] == owner
            ]

    def active(self, owner: str) -> Optional[str]:
        """The owner's non-terminal run id, if any."""
        with self._lock:
            for r in self._runs.values():
                if r["owner"] == owner and r["state"] not in TERMINAL:
                    return r["runId"]
        return None
