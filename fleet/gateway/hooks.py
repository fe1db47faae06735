"""The hook bus: OpenClaw's hook semantics for Python plugins
(https://docs.openclaw.ai/plugins/hooks/reference).

Handlers run one after another, higher priority first. A modifying hook's results merge
(`prependSystemContext` strings joined by a blank line, other keys last-wins); a void hook's return
value is ignored. Every handler runs in a worker thread with a time limit, and its exceptions are
caught and logged, so one broken or hung plugin cannot take an agent run down with it. A caller
with its own deadline may run a modifying hook inline instead (the OpenClaw worker: its bridge
kills and restarts a worker that misses the deadline).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

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
    """A handler raised or ran out of time; carries the plugin id for the log and the caller."""


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

    def run_modifying(
        self, hook: str, event: Dict[str, Any], ctx: Dict[str, Any], inline: bool = False
    ) -> Tuple[Dict[str, Any], List[str]]:
        """Run handlers in priority order and merge their results; returns (merged, errors).

        `inline`: in the caller's thread, without the per-handler thread and time limit, for a
        caller that enforces its own deadline (the OpenClaw bridge kills a worker that misses
        it): a thread start and join per handler is most of this hook's cost on a busy host.
        """
        merged: Dict[str, Any] = {}
        prepends: List[str] = []
        errors: List[str] = []
        for reg in list(self._regs.get(hook, [])):
            try:
                result = self._call_inline(reg, event, ctx) if inline else self._call(reg, event,
                                                                                       ctx)
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

    def run_void(self, hook: str, event: Dict[str, Any], ctx: Dict[str, Any]) -> List[str]:
        """Run handlers in priority order, ignoring results; returns the errors (also logged)."""
        errors: List[str] = []
        for reg in list(self._regs.get(hook, [])):
            try:
                self._call(reg, event, ctx)
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
            raise HookError(msg)
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
