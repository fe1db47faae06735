"""Agent sessions and runs: start, turn (hooks + simulated model), append, close.

A turn appends the user prompt, fires `before_prompt_build` (its merged `prependSystemContext`
is the injected context, returned to the caller), appends the scripted model output, and fires
`agent_end` with the session's messages. Every hook gets exactly the event and ctx fields
OpenClaw 2026.9.6 gives it (docs/architecture.md, "Hook contract"), nothing more.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

from fleet.continuity import ids, private
from fleet.continuity.paths import resolve_agent_workspace, validate_agent_id
from fleet.continuity.tokens import estimate_tokens
from fleet.gateway.hooks import HookBus
from fleet.gateway.messages import (
    build_steps,
    is_compaction,
    message_text,
    normalize_message,
    now_ms,
    system_message,
    user_message,
)
from fleet.gateway.sessions import SessionError, SessionStore, agent_of, normalize_key, public

OnRunEnd = Callable[[Dict[str, Any]], Optional[Dict[str, Any]]]


class Agents:
    """Runs sessions for agents; the only place that fires the agent and session hooks."""

    def __init__(
        self,
        store: SessionStore,
        hooks: HookBus,
        config_source: Callable[[], Dict[str, Any]],
        default_agent: Callable[[], str],
    ) -> None:
        self.store = store
        self.hooks = hooks
        self.config_source = config_source
        self.default_agent = default_agent
        # Called after each run (`turn`, once agent_end has fired), not after a hook-less append:
        # in OpenClaw only a run of a paused child can produce its final answer.
        self.on_run_end: List[OnRunEnd] = []
        self.on_close: List[Callable[[Dict[str, Any]], None]] = []

    def workspace(self, agent_id: str):
        return resolve_agent_workspace(agent_id, self.config_source(),
                                       self.store.layout.state_dir)

    def agent_ctx(self, rec: Dict[str, Any], run_id: str, trigger: str = "user") -> Dict[str, Any]:
        """`before_prompt_build` / `agent_end` ctx (no requester: OpenClaw gives none here)."""
        return {
            "runId": run_id,
            "agentId": rec["agentId"],
            "sessionKey": rec["sessionKey"],
            "sessionId": rec["sessionId"],
            "workspaceDir": rec["workspaceDir"],
            "trigger": trigger,
        }

    def start(self, args: Dict[str, Any]) -> Dict[str, Any]:
        """Open a session; an already open session with the same key is returned as is."""
        with self.store.lock:
            agent_id = args.get("agentId")
            key = args.get("sessionKey")
            if key is not None:
                key = normalize_key(key)
                key_agent = agent_of(key)
                if agent_id is not None and validate_agent_id(str(agent_id)) != key_agent:
                    raise SessionError(
                        f"sessionKey {key!r} belongs to agent {key_agent!r}, not {agent_id!r}"
                    )
                agent_id = key_agent
            else:
                agent_id = validate_agent_id(str(agent_id or self.default_agent()))
                key = f"agent:{agent_id}:main"
            existing = self.store.find(key)
            if existing is not None and not existing.get("closedAt"):
                out = public(existing)
                out["resumed"] = True
                return out
            ws = self.workspace(agent_id)
            private.make_dir(ws)
            rec = self.store.create(key, agent_id, ws, kind="main")
            out = public(rec)
            out["resumed"] = False
            return out

    def turn(self, args: Dict[str, Any]) -> Dict[str, Any]:
        """One agent run: prompt in, hooks fired, scripted output recorded."""
        with self.store.lock:
            rec = self.store.get(args.get("sessionKey"), open_only=True)
            prompt = args.get("prompt", "")
            if not isinstance(prompt, str):
                raise SessionError("prompt must be a string")
            script = args.get("steps", args.get("assistant"))
            extra = [normalize_message(m, f"messages[{i}]")
                     for i, m in enumerate(args.get("messages") or [])]
            return self.run(rec, prompt, script, extra, trigger=str(args.get("trigger", "user")),
                            success=bool(args.get("success", True)), error=args.get("error"))

    def run(
        self,
        rec: Dict[str, Any],
        prompt: str,
        script: Any,
        extra: List[Dict[str, Any]],
        trigger: str = "user",
        inputs: Optional[List[Dict[str, Any]]] = None,
        provenance: Optional[Dict[str, Any]] = None,
        run_id: Optional[str] = None,
        success: bool = True,
        error: Any = None,
    ) -> Dict[str, Any]:
        """A run of an open session (hold `store.lock`). `inputs`: messages the run starts from
        instead of the prompt (an announce turn's completion event, with its `provenance`, which
        only `before_prompt_build`'s ctx carries, as in OpenClaw)."""
        started = time.time()
        output = build_steps(script, rec.get("compactions", 0))
        transcript = self.store.transcript(rec)
        history = transcript.messages()
        run_id = run_id or ids.uuid4()
        ctx = self.agent_ctx(rec, run_id, trigger)
        prompt_ctx = dict(ctx, inputProvenance=provenance) if provenance else ctx
        notes = self._drain_notifications(rec)
        injected, errors = self.hooks.run_modifying(
            "before_prompt_build", {"prompt": prompt, "messages": history}, prompt_ctx
        )
        new: List[Dict[str, Any]] = list(notes) + list(inputs or [])
        if prompt:
            new.append(user_message(prompt))
        run_msgs = list(new)
        unwritten = list(new)
        for msg in output + extra:
            if is_compaction(msg):  # the hook sees the transcript as it was before
                transcript.append(unwritten)
                unwritten = []
                errors += self._compact(rec, history + run_msgs)
            unwritten.append(msg)
            run_msgs.append(msg)
        transcript.append(unwritten)
        compactions = sum(1 for m in output + extra if is_compaction(m))
        if compactions:
            self.store.update(rec, compactions=rec.get("compactions", 0) + compactions)
        event = {
            "runId": run_id,
            "messages": history + run_msgs,
            "success": success,
            "durationMs": int((time.time() - started) * 1000),
        }
        if error:
            event["error"] = str(error)
        errors += self.hooks.run_void("agent_end", event, ctx)
        result = {
            "sessionKey": rec["sessionKey"],
            "sessionId": rec["sessionId"],
            "injectedContext": injected.get("prependSystemContext"),
            "appended": len(run_msgs),
            "notifications": [n["content"][0]["text"] for n in notes],
            "hookErrors": errors,
        }
        result.update(self._after_run(rec))
        return result

    def append(self, args: Dict[str, Any]) -> Dict[str, Any]:
        """Add messages (or scripted steps) to a session without running hooks."""
        with self.store.lock:
            rec = self.store.get(args.get("sessionKey"), open_only=True)
            msgs = [normalize_message(m, f"messages[{i}]")
                    for i, m in enumerate(args.get("messages") or [])]
            msgs += build_steps(args.get("steps"), rec.get("compactions", 0))
            if not msgs:
                raise SessionError("session.messages needs 'messages' (list) or 'steps' to append")
            self.store.transcript(rec).append(msgs)
            compactions = sum(1 for m in msgs if is_compaction(m))
            if compactions:
                self.store.update(rec, compactions=rec.get("compactions", 0) + compactions)
            return {"sessionKey": rec["sessionKey"], "appended": len(msgs)}

    def _compact(self, rec: Dict[str, Any], messages: List[Dict[str, Any]]) -> List[str]:
        """`before_compaction` as OpenClaw's compaction path fires it: counts, no messages."""
        tokens = sum(estimate_tokens(message_text(m)) for m in messages)
        event = {"messageCount": len(messages), "tokenCount": tokens}
        ctx = {
            "sessionId": rec["sessionId"],
            "agentId": rec["agentId"],
            "sessionKey": rec["sessionKey"],
            "workspaceDir": rec["workspaceDir"],
        }
        return self.hooks.run_void("before_compaction", event, ctx)

    def _after_run(self, rec: Dict[str, Any]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for fn in self.on_run_end:
            extra = fn(rec)
            if extra:
                out.update(extra)
        return out

    def _drain_notifications(self, rec: Dict[str, Any]) -> List[Dict[str, Any]]:
        pending = rec.get("notifications") or []
        if not pending:
            return []
        self.store.update(rec, notifications=[])
        return [system_message(text, "notification") for text in pending]

    def notify(self, rec: Dict[str, Any], text: str) -> None:
        """Queue a system notification the session's next turn receives first."""
        self.store.update(rec, notifications=list(rec.get("notifications") or []) + [text])

    def close(self, args: Dict[str, Any]) -> Dict[str, Any]:
        """Close a session: before_reset (for new/reset), session_end, dispose its instances."""
        with self.store.lock:
            rec = self.store.get(args.get("sessionKey"), open_only=True)
            reason = str(args.get("reason", "unknown"))
            transcript = self.store.transcript(rec)
            messages = transcript.messages()
            errors: List[str] = []
            if reason in ("new", "reset"):
                errors += self.hooks.run_void(
                    "before_reset",
                    {"sessionFile": rec["transcript"], "messages": messages, "reason": reason},
                    {"agentId": rec["agentId"], "sessionKey": rec["sessionKey"],
                     "sessionId": rec["sessionId"], "workspaceDir": rec["workspaceDir"]},
                )
            for fn in self.on_close:
                fn(rec)
            event = {
                "sessionId": rec["sessionId"],
                "sessionKey": rec["sessionKey"],
                "messageCount": len(messages),
                "durationMs": now_ms() - int(rec.get("createdAt") or now_ms()),
                "reason": reason,
            }
            ctx = {  # a session ctx: no workspaceDir in OpenClaw
                "sessionId": rec["sessionId"],
                "sessionKey": rec["sessionKey"],
                "agentId": rec["agentId"],
            }
            errors += self.hooks.run_void("session_end", event, ctx)
            self.store.update(rec, closedAt=now_ms(), closeReason=reason)
            out = public(rec)
            out["hookErrors"] = errors
            return out

    def transcript(self, args: Dict[str, Any]) -> Dict[str, Any]:
        tail = args.get("limit")
        with self.store.lock:
            rec = self.store.get(args.get("sessionKey"))
            transcript = self.store.transcript(rec)
            if isinstance(tail, int) and tail >= 0:
                messages = transcript.tail(tail)
            else:
                messages = transcript.messages()
        return {"session": public(rec), "messages": messages}
