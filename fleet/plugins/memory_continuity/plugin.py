"""memory-continuity: keeps each agent's working state across sessions and subagents.

Entry point named by package.json `main`; the gateway calls `register(api)` (contract in
docs/architecture.md). The logic lives in the sibling modules; this file only wires hooks.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

from . import checkpoint, lineage, recovery, settings, startup
from . import selftest as scenario
from .locate import Locator

PLUGIN_ID = settings.PLUGIN_ID

# (hook, priority, body): OpenClaw 2026.9.6's hook names (docs/architecture.md lists their
# fields); higher priority runs first. index.js registers the same list under OpenClaw.
HOOKS = (
    ("before_prompt_build", 10, startup.inject),
    ("before_compaction", 10, checkpoint.before_compaction),
    ("before_reset", 10, checkpoint.before_reset),
    ("subagent_spawned", 50, lineage.remember),
    ("llm_input", 50, lineage.learn_task),
    ("subagent_ended", 50, recovery.recover),
    ("agent_end", 90, checkpoint.agent_end),
    ("session_end", 90, checkpoint.session_end),
)

# Event fields a hook body never reads. The OpenClaw entry (index.js) leaves them out of the
# bridge's JSON line: OpenClaw hands `before_prompt_build` the session's whole transcript, which
# would be serialised, piped and parsed on every prompt for nothing. A test keeps this true.
UNREAD_EVENT_FIELDS = {"before_prompt_build": ("messages",), "llm_input": ("historyMessages",)}

# The self-test a deploy runs after readiness, through these hooks on a scratch workspace (the
# gateway's fleet/gateway/selftest.py calls `selftest(run)`; the scenario is in selftest.py).
selftest = scenario.run


def _handler(api: Any, locator: Locator, hook: str, body: Callable) -> Callable:
    @functools.wraps(body)
    def handle(event: Any, ctx: Any) -> Optional[Any]:
        try:
            return body(api, locator, event if isinstance(event, dict) else {},
                        ctx if isinstance(ctx, dict) else {})
        except Exception as exc:
            # Log here (the plugin's own prefix) and re-raise: the hook bus contains the failure
            # (the run goes on) and reports it in the run's `hookErrors`; swallowing it here hid
            # a plugin that had silently stopped checkpointing.
            api.logger.error(f"{hook} failed: {type(exc).__name__}: {exc}")
            raise

    return handle


def register(api: Any) -> None:
    """Register the lifecycle hooks; the last log line is what deploy checks look for."""
    settings.config_schema()  # a broken manifest fails loudly at load, not on the first hook
    locator = Locator(api)
    for hook, priority, body in HOOKS:
        api.on(hook, _handler(api, locator, hook, body), priority)
    api.logger.info("Plugin registered successfully")
