"""Subagents: spawn a child session for a parent, end it once, announce its result to the parent.

The announce follows `announce.select_output`; when the child is waiting for a continuation
(after `sessions_yield` or compaction) the announce stays pending and is delivered by the
child's next run that gives a real answer (or a silent token).

`subagent_ended` fires once the announce is settled, as in OpenClaw (a run that expects a
completion message emits it after the announce is delivered or intentionally not delivered; a
yield-paused run emits nothing until it finishes or is killed): right after the end when the
announce is delivered or silent at once, else after the run that releases it. A paused child
that then times out, fails or is killed ends again with that outcome: its announce is settled
and the hook fires with the new outcome. It fires exactly once per child (`endedHookAt` is
recorded before the hook runs, and the record survives restarts).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from fleet.continuity import ids, origin, private, subagenttask
from fleet.continuity.paths import check_session_key, validate_agent_id
from fleet.continuity.tokens import estimate_tokens
from fleet.gateway import announce as announce_mod
from fleet.gateway.agents import Agents
from fleet.gateway.hooks import HookBus
from fleet.gateway.messages import message_text, now_ms
from fleet.gateway.sessions import SessionError, normalize_key, public

OUTCOMES = ("ok", "error", "timeout", "killed", "reset", "deleted")
REASONS = (
    "subagent-complete",
    "subagent-error",
    "subagent-killed",
    "session-reset",
    "session-delete",
)
_REASON_FOR = {
    "ok": "subagent-complete",
    "timeout": "subagent-complete",
    "error": "subagent-error",
    "killed": "subagent-killed",
    "reset": "session-reset",
    "deleted": "session-delete",
}


# The session index keeps an excerpt of a child's announce (and error): every session op of the
# agent rewrites the index, so a 10 MB answer must not live there. The full text is in the
# parent's transcript.
EXCERPT_CHARS = 2000


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters in the transcript]"


def _depth(rec: Dict[str, Any]) -> int:
    """How deep a session is in its spawn chain (0 for a main session)."""
    if rec.get("kind") != "subagent":
        return 0
    try:
        return max(1, check_session_key(rec["sessionKey"]).depth)
    except ValueError:
        return 1


class Subagents:
    """Spawn and end children of sessions run by `Agents`."""

    def __init__(self, agents: Agents, hooks: HookBus) -> None:
        self.agents = agents
        self.store = agents.store
        self.hooks = hooks
        agents.on_run_end.append(self._retry_pending)

    def spawn(self, args: Dict[str, Any]) -> Dict[str, Any]:
        parent_key = args.get("parentSessionKey") or args.get("requesterSessionKey") or args.get(
            "sessionKey"
        )
        if parent_key is None:
            raise SessionError("subagent.spawn needs parentSessionKey (the requester session)")
        task = args.get("task", "")
        if not isinstance(task, str):
            raise SessionError("task must be a string")
        with self.store.lock:
            parent = self.store.get(parent_key, open_only=True)
            target = validate_agent_id(str(args.get("agentId") or parent["agentId"]).lower())
            key = f"agent:{target}:subagent:{ids.uuid4()}"
            run_id = ids.uuid4()
            ws = self.agents.workspace(target)
            private.make_dir(ws)
            rec = self.store.create(
                key,
                target,
                ws,
                kind="subagent",
                requesterSessionKey=parent["sessionKey"],
                runId=run_id,
                task=task,
                label=args.get("label"),
            )
            event: Dict[str, Any] = {"runId": run_id, "childSessionKey": key, "agentId": target}
            if isinstance(args.get("label"), str) and args["label"]:
                event["label"] = args["label"]
            event.update({"mode": "run", "threadRequested": False})
            errors = self.hooks.run_void("subagent_spawned", event, self._ctx(rec))
            out = public(rec)
            out["childSessionKey"] = key
            out["hookErrors"] = errors
            if any(k in args for k in ("steps", "assistant", "prompt", "messages")):
                turn_args = {
                    "sessionKey": key,
                    "prompt": args.get("prompt", subagenttask.wrap(task, _depth(parent) + 1)),
                    "steps": args.get("steps", args.get("assistant")),
                    "messages": args.get("messages"),
                }
                out["turn"] = self.agents.turn(turn_args)
            return out

    def _ctx(self, rec: Dict[str, Any]) -> Dict[str, Any]:
        """The subagent hooks' ctx: no workspaceDir, no agentId (as in OpenClaw)."""
        return {
            "runId": rec.get("runId"),
            "childSessionKey": rec["sessionKey"],
            "requesterSessionKey": rec.get("requesterSessionKey"),
        }

    def end(self, args: Dict[str, Any]) -> Dict[str, Any]:
        """Announce (or hold the announce while waiting), then fire subagent_ended once.

        OpenClaw's order: the announce reaches the parent before `subagent_ended` fires.
        """
        key = normalize_key(args.get("childSessionKey") or args.get("sessionKey"))
        outcome = args.get("outcome", "ok")
        if outcome not in OUTCOMES:
            raise SessionError(f"outcome {outcome!r} is not one of {OUTCOMES}")
        reason = args.get("reason") or _REASON_FOR[outcome]
        if reason not in REASONS:
            raise SessionError(f"reason {reason!r} is not one of {REASONS}")
        with self.store.lock:
            rec = self.store.get(key)
            if not rec.get("requesterSessionKey"):
                raise SessionError(f"session {key!r} is not a subagent session (no requester)")
            paused = (rec.get("announce") or {}).get("state") == "pending"
            if rec.get("ended") and not (paused and outcome != "ok"):
                return {
                    "childSessionKey": key,
                    "alreadyEnded": True,
                    "ended": rec["ended"],
                    "announce": rec.get("announce"),
                    "hookErrors": [],
                }
            ended: Dict[str, Any] = {"outcome": outcome, "reason": reason, "endedAt": now_ms()}
            if args.get("error"):
                ended["error"] = excerpt(str(args["error"]))
            if isinstance(args.get("runtimeMs"), (int, float)):
                ended["runtimeMs"] = args["runtimeMs"]
            self.store.update(rec, ended=ended)
            result = self._announce(rec)
            errors = self._fire_ended(rec) if result["state"] != "pending" else []
            return {
                "childSessionKey": key,
                "alreadyEnded": False,
                "ended": ended,
                "announce": result,
                "hookErrors": errors,
            }

    def _fire_ended(self, rec: Dict[str, Any]) -> List[str]:
        """`subagent_ended` with OpenClaw's fields, once per child (recorded before it runs)."""
        if rec.get("endedHookAt"):
            return []
        self.store.update(rec, endedHookAt=now_ms())
        ended = rec["ended"]
        event: Dict[str, Any] = {
            "targetSessionKey": rec["sessionKey"],
            "targetKind": "subagent",
            "reason": ended["reason"],
            "sendFarewell": True,
            "runId": rec.get("runId"),
            "endedAt": ended["endedAt"],
            "outcome": ended["outcome"],
        }
        if "error" in ended:
            event["error"] = ended["error"]
        return self.hooks.run_void("subagent_ended", event, self._ctx(rec))

    def _retry_pending(self, rec: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """After a run of a child whose announce is held: deliver it if the run answered."""
        if (rec.get("announce") or {}).get("state") != "pending":
            return None
        result = self._announce(rec, retry=True)
        if result["state"] == "pending":
            return {"announce": result}
        return {"announce": result, "endedHookErrors": self._fire_ended(rec)}

    def _announce(self, rec: Dict[str, Any], retry: bool = False) -> Dict[str, Any]:
        """Deliver, hold (pending) or skip (silent) the announce of an ended child.

        At the end, a child with no final answer that is not waiting announces "(no output)";
        a held announce is only released by a real answer (or a silent token), never by an
        intermediate step that arrives while the child keeps working.
        """
        ended = rec["ended"]
        outcome = ended["outcome"]
        messages = self.store.transcript(rec).messages()
        choice = announce_mod.select_output(messages, outcome)
        state = choice["state"]
        if retry and state not in ("text", "silent"):
            return {"state": "pending", "text": None, "snapshot": choice["snapshot"]}
        if state == "silent":
            info = {"state": "silent", "text": None}
        elif state == "waiting" and outcome == "ok":
            info = {"state": "pending", "text": None}
        else:
            text = self._block(rec, messages, choice["text"])
            self._deliver(rec, text)
            info = {"state": "delivered", "text": text, "deliveredAt": now_ms()}
        stored = dict(info)
        if isinstance(info.get("text"), str):
            stored["text"] = excerpt(info["text"])
        self.store.update(rec, announce=stored)
        out = dict(info)
        out["snapshot"] = choice["snapshot"]
        return out

    def _block(self, rec: Dict[str, Any], messages: List[Dict[str, Any]],
               result: Optional[str]) -> str:
        ended = rec["ended"]
        tokens_in = tokens_out = 0
        for msg in messages:
            text = message_text(msg)
            if msg.get("role") == "assistant":
                tokens_out += estimate_tokens(text)
            elif msg.get("role") in ("user", "toolResult", "tool"):
                tokens_in += estimate_tokens(text)
        runtime = ended.get("runtimeMs")
        if runtime is None:
            runtime = now_ms() - int(rec.get("createdAt") or now_ms())
        return announce_mod.format_announce(
            rec["sessionKey"],
            rec.get("label") or rec.get("task") or "",
            ended["outcome"],
            result,
            runtime,
            tokens_in,
            tokens_out,
            ended.get("error"),
        )

    def _deliver(self, rec: Dict[str, Any], text: str) -> None:
        """The announce turn, as OpenClaw delivers it: a run of the requester session whose
        input is the completion event (run id `announce:v1:<child>:<child run>`, empty prompt,
        `inputProvenance` in `before_prompt_build`'s ctx only). A closed requester cannot run:
        the event is only appended to its transcript."""
        parent = self.store.get(rec["requesterSessionKey"])
        stated = origin.announce_provenance(rec["sessionKey"])
        msg = {
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "timestamp": now_ms(),
            "provenance": stated,
            "__openclaw": {"kind": "subagent_announce", "childSessionKey": rec["sessionKey"],
                           "runId": rec.get("runId")},
        }
        if parent.get("closedAt"):
            self.store.transcript(parent).append([msg])
            return
        run_id = f"announce:v1:{rec['sessionKey']}:{rec.get('runId')}"
        self.agents.run(parent, "", None, [], inputs=[msg], provenance=stated, run_id=run_id)
