"""The hook bus: OpenClaw's hook semantics for Python plugins
(https://docs.openclaw.ai/plugins/hooks/reference).

Handlers run one after another, higher priority first. A modifying hook's results merge
(`prependSystemContext` strings joined by a blank line, other keys last-wins); a void hook's return
value is ignored. Every handler runs in a worker thread with a time limit, and its exceptions are
caught and logged, so one broken or hung plugin cannot take an agent run down with it. A caller
with its own deadline may run a modifying hook inline instead (the OpenClaw worker: its bridge
kills and restarts a worker that misses the deadline).

The bus also counts, per plugin, the calls of its handlers, those that raised (`errors`) and
those that ran out of time (`timeouts`), since the bus was made (`stats()`): what `invoke
status` shows of a host's hooks. A caller that only exercises a plugin (its self-test,
fleet/gateway/selftest.py) runs a hook with `counted=False` and `plugin=<id>`, so the figures
stay those of real work and no other plugin's handler sees the exercise.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

log = logging.getLogger("fleet.gateway.hooks")

Handler = Callable[[Dict[str, Any], Dict[str, Any]], Optional[Dict[str, Any]]]

# OpenClaw 2026.9.6's hook names (its `PluginHookName` type). A name outside this list is
# ignored at registration, as OpenClaw ignores it ("unknown typed hook"), so a plugin that uses
# a hook OpenClaw does not have fails here too instead of only on real hosts.
MODIFYING_HOOKS = frozenset(
    {"before_model_resolve", "agent_turn_prepare", "before_prompt_build", "message_sending",
     "before_agent_finalize", "heartbeat_prompt_contribution", "reply_payload_sending"}
)
KNOWN_HOOKS = MODIFYING_HOOKS | frozenset(
    {
        "before_agent_reply", "model_call_started", "model_call_ended", "llm_input",
        "llm_output", "agent_end", "before_compaction", "after_compaction", "before_reset",
        "inbound_claim", "channel_pairing_requested", "message_received", "message_sent",
        "before_tool_call", "after_tool_call", "tool_result_persist", "before_message_write",
        "session_start", "session_end", "subagent_delivery_target", "subagent_spawned",
        "subagent_progress", "subagent_ended", "gateway_start", "gateway_stop",
        "cron_reconciled", "cron_changed", "skill_proposal_evaluate", "skill_proposal_changed",
        "skill_changed", "before_dispatch", "reply_dispatch", "before_install",
        "before_agent_run", "resolve_exec_env",
    }
)
DEFAULT_TIMEOUT_S = 10.0
PROMPT_FIELDS = ("prependSystemContext", "systemPrompt", "prependContext", "appendSystemContext")


class HookError(Exception):
    """A handler raised or ran out of time (`timed_out`); the message names the plugin."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class _Registration:
    __slots__ = ("hook", "handler", "priority", "plugin_id", "timeout_s", "order")

    def __init__(self, hook, handler, priority, plugin_id, timeout_s, order):
        self.hook = hook
        self.handler = handler
        self.priority = priority
        self.plugin_id = plugin_id
        self.timeout_s = timeout_s
        self.order = order


class HookBus:
    """Registered handlers by hook name, and the two ways of running them."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        # plugin id -> may it inject prompt text? (entries.<id>.hooks.allowPromptInjection)
        self.prompt_policy: Optional[Callable[[str], bool]] = None
        self._regs: Dict[str, List[_Registration]] = {}
        self._count = 0
        self._lock = threading.Lock()
        self.since = time.time()  # when the counts of `stats()` began
        self._stats: Dict[str, List[int]] = {}  # plugin id -> [calls, errors, timeouts]

    def register(
        self,
        hook: str,
        handler: Handler,
        priority: int = 0,
        plugin_id: str = "?",
        timeout_s: Optional[float] = None,
    ) -> None:
        """Add a handler; an unknown hook name is logged and ignored, as OpenClaw does."""
        if not callable(handler):
            raise TypeError(f"[{plugin_id}] handler for {hook!r} is not callable")
        if hook not in KNOWN_HOOKS:
            log.warning("[%s] unknown typed hook %r ignored (not a hook of OpenClaw 2026.9.6)",
                        plugin_id, hook)
            return
        with self._lock:
            self._count += 1
            reg = _Registration(hook, handler, int(priority), plugin_id, timeout_s, self._count)
            regs = self._regs.setdefault(hook, [])
            regs.append(reg)
            regs.sort(key=lambda r: (-r.priority, r.order))

    def handlers(self, hook: str) -> List[str]:
        """Plugin ids of a hook's handlers in the order they run (for health and tests)."""
        return [r.plugin_id for r in self._regs.get(hook, [])]

    def summary(self) -> Dict[str, List[str]]:
        """Hook name -> plugin ids in run order."""
        return {hook: self.handlers(hook) for hook in sorted(self._regs) if self._regs[hook]}

    def counts(self, plugin_id: str) -> Dict[str, int]:
        """`{calls, errors, timeouts}` of one plugin's handlers since the bus was made."""
        with self._lock:
            calls, errors, timeouts = self._stats.get(plugin_id, (0, 0, 0))
        return {"calls": calls, "errors": errors, "timeouts": timeouts}

    def stats(self, plugin_ids: Iterable[str] = ()) -> Dict[str, Dict[str, Any]]:
        """Plugin id -> `{calls, errors, timeouts, since}` (ISO time, UTC) for every plugin
        whose handlers ran, and for `plugin_ids` (zeros when none ran)."""
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.since))
        with self._lock:
            counts = {pid: list(c) for pid, c in self._stats.items()}
        for pid in plugin_ids:
            counts.setdefault(pid, [0, 0, 0])
        return {pid: {"calls": c[0], "errors": c[1], "timeouts": c[2], "since": since}
                for pid, c in sorted(counts.items())}

    def _selected(self, hook: str, plugin: Optional[str]) -> List[_Registration]:
        regs = list(self._regs.get(hook, []))
        return regs if plugin is None else [r for r in regs if r.plugin_id == plugin]

    def _tally(self, reg: _Registration, failure: Optional[HookError]) -> None:
        with self._lock:
            counts = self._stats.setdefault(reg.plugin_id, [0, 0, 0])
            counts[0] += 1
            if failure is not None:
                counts[2 if failure.timed_out else 1] += 1

    def _run_one(self, reg: _Registration, event: Dict[str, Any], ctx: Dict[str, Any],
                 inline: bool, counted: bool) -> Any:
        """One handler call, counted unless `counted` is False; raises HookError."""
        try:
            result = (self._call_inline(reg, event, ctx) if inline
                      else self._call(reg, event, ctx))
        except HookError as exc:
            if counted:
                self._tally(reg, exc)
            raise
        if counted:
            self._tally(reg, None)
        return result

    def run_modifying(
        self, hook: str, event: Dict[str, Any], ctx: Dict[str, Any], inline: bool = False,
        plugin: Optional[str] = None, counted: bool = True,
    ) -> Tuple[Dict[str, Any], List[str]]:
        """Run handlers in priority order and merge their results; returns (merged, errors).

        `inline`: in the caller's thread, without the per-handler thread and time limit, for a
        caller that enforces its own deadline (the OpenClaw bridge kills a worker that misses
        it): a thread start and join per handler is most of this hook's cost on a busy host.
        `plugin`: only that plugin's handlers; `counted`: False keeps the call out of `stats()`.
        """
        merged: Dict[str, Any] = {}
        prepends: List[str] = []
        errors: List[str] = []
        for reg in self._selected(hook, plugin):
            try:
                result = self._run_one(reg, event, ctx, inline, counted)
            except HookError as exc:
                errors.append(str(exc))
                continue
            if not isinstance(result, dict):
                continue
            if self.prompt_policy is not None and not self.prompt_policy(reg.plugin_id):
                result = {k: v for k, v in result.items() if k not in PROMPT_FIELDS}
            for key, value in result.items():
                if key == "prependSystemContext":
                    if isinstance(value, str) and value:
                        prepends.append(value)
                elif value is not None:
                    merged[key] = value
        if prepends:
            merged["prependSystemContext"] = "\n\n".join(prepends)
        return merged, errors

    def run_void(self, hook: str, event: Dict[str, Any], ctx: Dict[str, Any],
                 plugin: Optional[str] = None, counted: bool = True) -> List[str]:
        """Run handlers in priority order, ignoring results; returns the errors (also logged).
        `plugin` and `counted` as for `run_modifying`."""
        errors: List[str] = []
        for reg in self._selected(hook, plugin):
            try:
                self._run_one(reg, event, ctx, False, counted)
            except HookError as exc:
                errors.append(str(exc))
        return errors

    def _call_inline(self, reg: _Registration, event: Dict[str, Any],
                     ctx: Dict[str, Any]) -> Any:
        try:
            return reg.handler(dict(event), dict(ctx))
        except BaseException as exc:  # as in _call: the handler's failure, not the caller's
            raise self._failed(reg, exc) from None

    def _failed(self, reg: _Registration, exc: BaseException) -> HookError:
        msg = f"[{reg.plugin_id}] {reg.hook} handler failed: {type(exc).__name__}: {exc}"
        log.error("%s", msg, exc_info=exc)
        return HookError(msg)

    def _call(self, reg: _Registration, event: Dict[str, Any], ctx: Dict[str, Any]) -> Any:
        box: Dict[str, Any] = {}

        def target() -> None:
            try:
                box["result"] = reg.handler(dict(event), dict(ctx))
            except BaseException as exc:  # a plugin must not kill the worker silently
                box["error"] = exc

        limit = reg.timeout_s if reg.timeout_s is not None else self.timeout_s
        worker = threading.Thread(
            target=target, name=f"hook-{reg.plugin_id}-{reg.hook}", daemon=True
        )
        worker.start()
        worker.join(limit)
        if worker.is_alive():
            msg = f"[{reg.plugin_id}] {reg.hook} handler timed out after {limit:g}s"
            log.error("%s", msg)
            raise HookError(msg, timed_out=True)
        if "error" in box:
            raise self._failed(reg, box["error"])
        return box.get("result")


def absorb(target: HookBus, staged: HookBus) -> None:
    """Move a plugin's staged registrations into the live bus (after its register() succeeded)."""
    regs = sorted(
        (r for rs in staged._regs.values() for r in rs), key=lambda r: r.order
    )
    for r in regs:
        target.register(r.hook, r.handler, r.priority, r.plugin_id, r.timeout_s)
