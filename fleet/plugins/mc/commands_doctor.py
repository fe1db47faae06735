"""`/mc doctor [agent|--all]`: the continuity doctor from chat (diagnoses, never repairs).

Why here: the checks live once in `fleet.continuity.doctor` (the installer's `doctor` uses the
same ones for `invoke doctor` across a fleet); this module only picks the agents and renders.
Under OpenClaw it also shows whether the release was proven on the OpenClaw it runs in, the
verdict the plugins' worker logged at its start (fleet.continuity.openclawrange).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from fleet.continuity import doctor, paths
from fleet.continuity.openclawrange import PROVEN, WORDS
from fleet.plugins.mc.agents import AgentNotFound, Agents
from fleet.plugins.mc.textfmt import RULE


def cmd_doctor(agents: Agents, args: str,
               openclaw: Optional[Mapping[str, Any]] = None) -> str:
    """One agent (default agent if none named) or every agent (`--all`), children included;
    under OpenClaw (`openclaw`: the worker's verdict on the OpenClaw it serves, see
    fleet/gateway/worker.py) first whether the release was proven on it."""
    words = args.split()
    verbose = "-v" in words or "--verbose" in words
    words = [w for w in words if w not in ("-v", "--verbose")]
    every = words[:1] == ["--all"]
    name = None if every else (words[0] if words else agents.default_id)
    try:
        report = doctor.diagnose(agents.state_dir, agents.config, name)
    except (LookupError, paths.InvalidAgentId):
        raise AgentNotFound(name or "") from None
    scope = "all agents" if every else name
    lines = [f"Continuity doctor: {scope}", RULE]
    if openclaw:
        state = str(openclaw.get("state"))
        lines.append(f"OpenClaw {openclaw.get('version')}: {WORDS.get(state, state)}")
        if state != PROVEN:
            lines.append(f"  {openclaw.get('message')}")
            lines.append("  fix: run `invoke deploy`: it re-checks and converges, or pass "
                         "--allow-unproven-openclaw")
    lines += doctor.render_text(report, verbose)
    lines.append(f"(exit {report.exit_code}: 0 healthy, 1 warnings, 2 critical)")
    return "\n".join(lines)
