"""A deploy's self-test gate: each plugin's self-test answer, judged once for the transaction.

Why a module: readiness says the plugins loaded; the gate after it says they work (each plugin's
own scenario through its gateway's hooks, fleet/gateway/selftest.py), and the installer must turn
what the managers collect (our gateway's `selftest` control op, OpenClaw's `<id>.selftest` RPCs)
into one verdict: `passed`, `failed` (naming the plugin and its first failed check, which becomes
the switch-back's reason) or `unsupported` (a release whose plugins do not know the self-test:
an older one, which a rollback must still be able to run). A plugin that does not know it beside
others that passed does not fail the gate either; the verdict names it.

What a manager hands in: plugin id -> the plugin's answer (`{ok, plugin, version, checks,
duration_ms, unsupported?}`), or `{"unsupported": why}` (the gateway does not know the self-test),
or `{"error": why}` (it was asked and did not answer).
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple

PASSED, FAILED, UNSUPPORTED = "passed", "failed", "unsupported"
WHY_MAX = 600  # characters of a reason taken from a host's answer
MAX_CHECKS = 40  # of a failed plugin's checks, kept in the answer


def _clip(text: Any, limit: int = WHY_MAX) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "..."


class Verdict(NamedTuple):
    """The gate's answer: `state`, `reason` (the failure, or which plugins do not know the
    self-test) and `plugins` (per plugin: passed/failed/unsupported, its checks when failed)."""

    state: str
    reason: str
    plugins: Dict[str, Dict[str, Any]]

    def as_dict(self) -> Dict[str, Any]:
        return {"state": self.state, "reason": self.reason, "plugins": self.plugins}


def _failed_check(answer: Dict[str, Any]) -> str:
    checks = answer.get("checks")
    for check in checks if isinstance(checks, list) else []:
        if isinstance(check, dict) and check.get("ok") is not True:
            return f"check '{_clip(check.get('name'), 80)}': {_clip(check.get('detail'))}"
    return "no check passed" if not checks else "its answer says it failed"


def judge(answers: Dict[str, Any]) -> Verdict:
    """One verdict from the plugins' answers (see the module doc)."""
    plugins: Dict[str, Dict[str, Any]] = {}
    failures: List[str] = []
    unknown: List[str] = []
    for pid, answer in sorted(answers.items()):
        if not isinstance(answer, dict):
            answer = {"error": f"an answer that is not an object: {answer!r:.120}"}
        if answer.get("error") is not None and "checks" not in answer:
            why = f"{pid}: the self-test did not run: {_clip(answer['error'])}"
            plugins[pid] = {"state": FAILED, "reason": why}
            failures.append(why)
        elif answer.get("unsupported"):
            plugins[pid] = {"state": UNSUPPORTED, "reason": _clip(answer["unsupported"])}
            unknown.append(pid)
        elif answer.get("ok") is True:
            plugins[pid] = {"state": PASSED, "checks": len(answer.get("checks") or []),
                            "duration_ms": answer.get("duration_ms")}
        else:
            why = f"{pid}: {_failed_check(answer)}"
            checks = answer.get("checks")
            plugins[pid] = {"state": FAILED, "reason": why,
                            "checks": checks[:MAX_CHECKS] if isinstance(checks, list) else None}
            failures.append(why)
    if failures:
        return Verdict(FAILED, "self-test failed: " + "; ".join(failures), plugins)
    known = "do not know" if len(unknown) > 1 else "does not know"
    note = f"{', '.join(unknown)} {known} the self-test" if unknown else ""
    if len(unknown) == len(plugins):
        return Verdict(UNSUPPORTED, note or "no plugin to test", plugins)
    return Verdict(PASSED, note, plugins)
