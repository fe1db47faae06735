"""Persistent subagents: one instance per (parent session, key), reused, disposed.

An instance is a child session of its parent (so the parent seed reaches it) that keeps its
transcript across invocations. Each invocation is a supervised run. Results enter the parent's
context as tool results; `scheduling: silent` adds no notification; a config with `pendingMessage`
answers at once with that message and queues completion/failure notifications for the parent.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from fleet.continuity import ids, private
from fleet.continuity.paths import validate_agent_id
from fleet.gateway import supervisor as sv
from fleet.gateway.agents import Agents
from fleet.gateway.announce import summarize
from fleet.gateway.messages import now_ms
from fleet.gateway.sessions import SessionError, normalize_key

PERSISTENT = "persistent_session"
EPHEMERAL = "ephemeral"
SCHEDULING = ("silent", "when_idle", "interrupt")


class PersistentError(ValueError):
    """A persistent invocation is malformed or not allowed now."""


class PersistentManager:
    """Persistent instances (kept in the session store, so they survive a gateway restart) and
    the supervisor of their runs (in memory: a restart ends the runs, not the instances)."""

    def __init__(self, agents: Agents, supervisor: Optional[sv.Supervisor] = None) -> None:
        self.agents = agents
        self.store = agents.store
        self.supervisor = supervisor or sv.Supervisor()
        agents.on_close.append(self.dispose_session)

    def _live(self, parent_key: Optional[str] = None) -> List[Dict[str, Any]]:
        return [
            r for r in self.store.all(closed=False)
            if r.get("kind") == "persistent" and not r.get("closedAt")
            and r.get("lifetime") == PERSISTENT
            and (parent_key is None or r.get("requesterSessionKey") == parent_key)
        ]

    def instances(self, parent_key: Optional[str] = None) -> List[Dict[str, Any]]:
        with self.store.lock:
            return sorted((_view(r) for r in self._live(parent_key)),
                          key=lambda i: (i["parentSessionKey"], i["key"]))

    def _config(self, args: Dict[str, Any]) -> Dict[str, Any]:
        config = args.get("config") or {}
        if not isinstance(config, dict):
            raise PersistentError(
                "config must be an object such as {'lifetime': 'persistent_session'}"
            )
        lifetime = config.get("lifetime", PERSISTENT)
        if lifetime not in (PERSISTENT, EPHEMERAL):
            raise PersistentError(
                f"config.lifetime {lifetime!r} is not one of {(PERSISTENT, EPHEMERAL)}"
            )
        key = args.get("key") or config.get("name")
        if not isinstance(key, str) or not key.strip():
            raise PersistentError(
                "persistent.invoke needs 'key' (or config.name), e.g. ask_openclaw"
            )
        pending = config.get("pendingMessage")
        if pending is not None and not isinstance(pending, str):
            raise PersistentError("config.pendingMessage must be a string")
        return {"lifetime": lifetime, "key": key.strip(), "pendingMessage": pending,
                "agentId": config.get("agentId")}

    def _instance(self, parent: Dict[str, Any], cfg: Dict[str, Any]) -> Tuple[Dict[str, Any], bool]:
        """The (parent, key) instance's session record, created on first use."""
        if cfg["lifetime"] == PERSISTENT:
            for rec in self._live(parent["sessionKey"]):
                if rec.get("persistentKey") == cfg["key"]:
                    return rec, True
        target = validate_agent_id(str(cfg["agentId"] or parent["agentId"]).lower())
        child_key = f"agent:{target}:subagent:{ids.uuid4()}"
        ws = self.agents.workspace(target)
        private.make_dir(ws)
        rec = self.store.create(
            child_key, target, ws, kind="persistent",
            requesterSessionKey=parent["sessionKey"], task=cfg["key"], label=cfg["key"],
            persistentKey=cfg["key"], lifetime=cfg["lifetime"], invocations=0,
        )
        spawn_run = ids.uuid4()  # a persistent child is OpenClaw's mode "session" spawn
        self.agents.hooks.run_void(
            "subagent_spawned",
            {"runId": spawn_run, "childSessionKey": child_key, "agentId": target,
             "label": cfg["key"], "mode": "session", "threadRequested": False},
            {"runId": spawn_run, "childSessionKey": child_key,
             "requesterSessionKey": parent["sessionKey"]},
        )
        return rec, False

    def invoke(self, args: Dict[str, Any]) -> Dict[str, Any]:
        """Run one call on the (parent, key) instance; see the module doc for where results go."""
        cfg = self._config(args)
        scheduling = args.get("scheduling")
        if scheduling is not None and scheduling not in SCHEDULING:
            raise PersistentError(f"scheduling {scheduling!r} is not one of {SCHEDULING}")
        with self.store.lock:
            parent = self.store.get(args.get("sessionKey"), open_only=True)
            inst, reused = self._instance(parent, cfg)
            owner = inst["sessionKey"]
            run_id = self.supervisor.active(owner)
            if run_id is not None and self.supervisor.state(run_id) == sv.WAITING_INPUT:
                self.supervisor.transition(run_id, sv.RUNNING)
            elif run_id is not None:
                raise PersistentError(f"instance {cfg['key']!r} is still running run {run_id}")
            else:
                run_id = self.supervisor.start(owner)["runId"]
            self.store.update(inst, invocations=int(inst.get("invocations") or 0) + 1)
            try:
                turn = self.agents.turn({
                    "sessionKey": owner,
                    "prompt": str(args.get("input", "")),
                    "steps": args.get("steps", args.get("assistant")),
                })
            except Exception as exc:  # a bad script must not leave the run "running" forever
                self.supervisor.transition(run_id, sv.FAILED, str(exc))
                raise
            error = args.get("error")
            new_msgs = self.store.transcript(self.store.get(owner)).messages()[-turn["appended"]:]
            text = args.get("text")
            if text is None:
                text = summarize(new_msgs).assistant_text or ""
            if error:
                state = sv.FAILED
            elif args.get("waitingInput"):
                state = sv.WAITING_INPUT
            else:
                state = sv.COMPLETED
            self.supervisor.transition(run_id, state, str(error) if error else None)
            delivery = self._deliver(parent, cfg, run_id, state, text, error, scheduling)
            if cfg["lifetime"] == EPHEMERAL and state != sv.WAITING_INPUT:
                self.agents.close({"sessionKey": owner, "reason": "deleted"})
            return {
                "key": cfg["key"],
                "instance": _view(inst),
                "reused": reused,
                "runId": run_id,
                "state": state,
                "text": text,
                "scheduling": scheduling,
                "error": str(error) if error else None,
                "injectedContext": turn["injectedContext"],
                **delivery,
            }

    def _deliver(self, parent: Dict[str, Any], cfg: Dict[str, Any], run_id: str, state: str,
                 text: str, error: Any, scheduling: Optional[str]) -> Dict[str, Any]:
        pending = cfg["pendingMessage"]
        immediate = pending if pending is not None else (
            f"Error: {error}" if error else text
        )
        details = {"runId": run_id, "state": state, "scheduling": scheduling or "default",
                   "persistentKey": cfg["key"]}
        tool_result = {
            "role": "toolResult",
            "toolCallId": "call_" + ids.uuid4_hex()[:12],
            "toolName": cfg["key"],
            "content": [{"type": "text", "text": immediate}],
            "isError": bool(error) and pending is None,
            "details": details,
            "timestamp": now_ms(),
        }
        messages = [tool_result]
        notification = None
        if pending is not None:
            if scheduling == "silent" and not error:
                messages.append({
                    "role": "toolResult", "toolCallId": tool_result["toolCallId"],
                    "toolName": cfg["key"], "content": [{"type": "text", "text": text}],
                    "isError": False, "details": dict(details, final=True), "timestamp": now_ms(),
                })
            elif error:
                notification = f"[{cfg['key']}] failed: {error}"
            elif state == sv.WAITING_INPUT:
                notification = f"[{cfg['key']}] needs input: {text}"
            else:
                notification = f"[{cfg['key']}] completed: {text}"
        self.store.transcript(parent).append(messages)
        if notification is not None:
            self.agents.notify(parent, notification)
        return {"notificationQueued": notification is not None, "notification": notification,
                "pendingMessage": pending}

    def cancel(self, args: Dict[str, Any]) -> Dict[str, Any]:
        run_id = args.get("runId")
        if not isinstance(run_id, str):
            raise PersistentError("persistent.cancel needs runId")
        try:
            old = self.supervisor.transition(run_id, sv.CANCELLED, args.get("reason"))
        except sv.UnknownRun as exc:
            raise PersistentError(f"unknown run {run_id}") from exc
        return {"runId": run_id, "from": old, "state": sv.CANCELLED}

    def status(self, args: Dict[str, Any]) -> Dict[str, Any]:
        parent = args.get("sessionKey")
        parent = normalize_key(parent) if parent is not None else None
        insts = self.instances(parent)
        owners = {i["childSessionKey"] for i in insts}
        runs = [r for r in self.supervisor.runs() if parent is None or r["owner"] in owners]
        return {"instances": insts, "runs": runs}

    def dispose_session(self, rec: Dict[str, Any]) -> None:
        """Parent closed: cancel live runs and close every instance it owned."""
        with self.store.lock:
            for inst in self._live(rec["sessionKey"]):
                run_id = self.supervisor.active(inst["sessionKey"])
                if run_id is not None:
                    self.supervisor.transition(run_id, sv.CANCELLED, "parent session closed")
                try:
                    self.agents.close({"sessionKey": inst["sessionKey"], "reason": "deleted"})
                except SessionError:
                    pass


def _view(rec: Dict[str, Any]) -> Dict[str, Any]:
    """What a client sees of an instance."""
    return {
        "key": rec.get("persistentKey"),
        "parentSessionKey": rec.get("requesterSessionKey"),
        "childSessionKey": rec["sessionKey"],
        "lifetime": rec.get("lifetime"),
        "createdAt": rec.get("createdAt"),
        "invocations": rec.get("invocations", 0),
    }
