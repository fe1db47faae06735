"""The `/mc` command plugin (id `mc`): read and manage memory-continuity state from chat.

Entry file named by package.json `main`. The gateway imports it as a standalone module with the
release root on `sys.path`, so everything is imported absolutely from `fleet.plugins.mc`.
Replies are fenced monospace text as the original `/mc` sends them; failures are
`MC error: <message>`.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, Mapping, Tuple

from fleet.plugins.mc import selftest as scenario
from fleet.plugins.mc.agents import AgentNotFound, Agents
from fleet.plugins.mc.textfmt import RULE, fence

DESCRIPTION = "Memory Continuity commands \u2014 state, history, search, settings, etc."

HELP = "\n".join([
    "MC Commands (Memory Continuity)",
    RULE,
    "/mc state [agent]       View current state (default agent)",
    "/mc state --all         Overview of all agents",
    "/mc sessions [date]     Session logs: days, or one day's log",
    "/mc summary [daily|weekly]  Daily / weekly summaries",
    "/mc tags [agent]        Tags from session topics",
    "/mc history [agent]     List archived sessions",
    "/mc restore <N> [agent] Restore archive #N",
    "/mc clear [agent]       Clear state (archives first)",
    "/mc search <keyword>    Search across all memory",
    "/mc settings            View MC settings",
    "/mc settings <k> <v>    Update a setting",
    "/mc compact [agent]     Compress state file",
    "/mc export [agent|all]  Export memory to file (--from/--to/--tag)",
    "/mc recall <topic>      Find past work on a topic",
    "/mc subagents           Subagent state overview across workspaces",
    "/mc doctor [agent|--all]  Diagnose state files (never repairs)",
])

# subcommand -> (its module in fleet.plugins.mc, its function). A module is imported when one
# of its commands is first asked, not when the gateway loads the plugin: a gateway start needs
# none of them, and a deploy's self-test asks only `state` and `doctor`.
COMMANDS: Dict[str, Tuple[str, str]] = {
    "state": ("commands_state", "cmd_state"),  # `--all`: cmd_state_all
    "history": ("commands_history", "cmd_history"),
    "restore": ("commands_history", "cmd_restore"),
    "clear": ("commands_history", "cmd_clear"),
    "search": ("commands_search", "cmd_search"),
    "recall": ("commands_search", "cmd_recall"),
    "settings": ("commands_settings", "cmd_settings"),
    "compact": ("commands_state", "cmd_compact"),
    "export": ("commands_export", "cmd_export"),
    "sessions": ("commands_journal", "cmd_sessions"),
    "tags": ("commands_journal", "cmd_tags"),
    "summary": ("commands_journal", "cmd_summary"),
    "subagents": ("commands_state", "cmd_subagents"),
    "doctor": ("commands_doctor", "cmd_doctor"),  # also given the OpenClaw this runs in
}


def command(sub: str, args: str) -> Callable[..., str]:
    """The function of subcommand `sub` (given its arguments `args`), its module imported."""
    module, name = COMMANDS[sub]
    if sub == "state" and args.split()[:1] == ["--all"]:
        name = "cmd_state_all"
    return getattr(importlib.import_module(f"fleet.plugins.mc.{module}"), name)


# The self-test a deploy runs after readiness, through `/mc` on a scratch workspace (the
# gateway's fleet/gateway/selftest.py calls `selftest(run)`; the scenario is in selftest.py).
selftest = scenario.run


class UnknownSubcommand(ValueError):
    """`/mc <name>` with a name that is no subcommand: an error whose reply is the help."""

    def __init__(self, sub: str) -> None:
        super().__init__(f"Unknown subcommand: {sub}\n\n{HELP}")


def run(ctx: Mapping[str, Any]) -> str:
    """The reply body (unfenced) for one `/mc` invocation; `UnknownSubcommand` for a bad name."""
    raw = str(ctx.get("args") or "").strip()
    sub, _, rest = raw.partition(" ")
    rest = rest.strip()
    if sub in ("", "help", "--help", "-h"):
        return HELP
    if sub not in COMMANDS:
        raise UnknownSubcommand(sub)
    agents = Agents.from_ctx(ctx)
    try:
        if sub == "doctor":  # it also shows the OpenClaw this runs in
            return command(sub, rest)(agents, rest, ctx.get("openclawSupport"))
        return command(sub, rest)(agents, rest)
    except AgentNotFound as exc:
        return exc.reply()


def handle(ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """Command handler: `{"text": fenced reply}`; a failure is `{"text", "isError": True}` (the
    field OpenClaw's reply payload has for it): the help for an unknown subcommand, else
    `MC error: ...`."""
    try:
        return {"text": fence(run(ctx))}
    except UnknownSubcommand as exc:
        return {"text": fence(str(exc)), "isError": True}
    except Exception as exc:  # every failure becomes a readable reply, as in the original
        return {"text": f"MC error: {exc}", "isError": True}


def register(api: Any) -> None:
    """Register `/mc` with the gateway."""
    api.register_command("mc", handle, DESCRIPTION)
    logger = getattr(api, "logger", None)
    if logger is not None:
        logger.info("MC plugin loaded, /mc registered")
