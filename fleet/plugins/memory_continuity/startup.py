"""`before_prompt_build`: inject the session's own snapshot, related history and a parent seed.

OpenClaw 2026.9.6 has no `before_agent_start`; `before_prompt_build` returning
`prependSystemContext` is its system-context hook. Fixed from the original plugin: a subagent reads
its own per-child file; its parent is the requester session (recorded at `subagent_spawned`, see
`lineage`; else the key's parent chain), not the agent named in its own key; the seed is given
even when the child's own state is empty; a child never gets its own file back as "parent";
and the seed carries the request its parent's running turn asks (`runorigin.in_flight`), which
that turn's checkpoint holds only once it ends, after the child started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from fleet.continuity import paths, store
from fleet.continuity.document import StateDocument, to_iso
from fleet.continuity.history import related_history
from fleet.continuity.snapshot import build_snapshot
from fleet.continuity.tokens import truncate_tokens

from . import clock, lineage, runorigin, settings, shownnotes
from .extraction import OBJECTIVE_BUDGET
from .locate import Locator

IMPORTANT_LINE = (
    "IMPORTANT: The above is recovered working state from a previous session. If the user "
    "appears to be resuming work, surface this state immediately before any generic greeting. "
    "This is a continuity requirement, not optional."
)
SEED_BEGIN = "=== PARENT AGENT CONTEXT ==="
SEED_INTRO = (
    "The following is the parent agent's working state. "
    "Use this to understand the broader task context."
)
SEED_END = "=== END PARENT CONTEXT ==="
READ_LIMIT = 4 * 1024 * 1024


def read_doc(path: Path) -> Optional[StateDocument]:
    text = store.read_text(path, max_bytes=READ_LIMIT)
    return StateDocument.parse(text) if text is not None else None


def parent_seed(
    locator: Locator,
    key: paths.SessionKey,
    ctx: Mapping[str, Any],
    own_workspace: Path,
    own_file: Path,
) -> Optional[str]:
    """The `=== PARENT AGENT CONTEXT ===` block for a subagent session, or None."""
    raw = lineage.requester_of(locator.state_dir, key.normalized)
    parent_raw = raw if raw else key.parent_key
    if not parent_raw:
        return None
    parent = paths.check_session_key(parent_raw)
    own_agent = ctx.get("agentId") if isinstance(ctx.get("agentId"), str) else key.agent_id
    parent_file = locator.session_file_for_key(
        parent, workspace_hint=own_workspace, hint_agent=paths.validate_agent_id(own_agent)
    )
    if parent_file.resolve() == own_file.resolve():
        return None
    doc = read_doc(parent_file)
    asked = runorigin.in_flight(parent.normalized)
    if asked:  # the parent's turn that spawned this child has not checkpointed it yet
        doc = doc or StateDocument.new(to_iso(clock.now()))
        doc.set("Objective", truncate_tokens(asked, OBJECTIVE_BUDGET))
    snapshot = build_snapshot(doc) if doc is not None else None
    if snapshot is None:
        return None
    return "\n".join([SEED_BEGIN, SEED_INTRO, snapshot, SEED_END])


def inject(
    api: Any, locator: Locator, event: Mapping[str, Any], ctx: Mapping[str, Any]
) -> Optional[Dict[str, str]]:
    """The hook body: `{"prependSystemContext": ...}` or None when there is nothing to recover."""
    log = api.logger
    config = settings.plugin_config(api)
    runorigin.note(ctx, event.get("prompt"))  # what its agent_end may checkpoint (runorigin.py)
    try:
        workspace, key = locator.session(ctx)
    except ValueError as exc:
        log.warn(f"before_prompt_build: refusing session: {exc}")
        return None
    if workspace is None:
        return None
    own_file = paths.session_state_file(workspace, key)
    parts = []
    doc = read_doc(own_file)
    snapshot = build_snapshot(doc) if doc is not None else None
    if snapshot and doc is not None:
        parts.append(snapshot)
        # which children's notes this run's model sees: only those may leave at its agent_end
        shownnotes.note(ctx, doc.get("Unsurfaced Results"), snapshot)
        if config["relevanceInjection"]:
            history = related_history(
                workspace, doc.get("Objective"), int(config["maxRelevanceItems"])
            )
            if history:
                parts.append(history)
    if config["subagentSeed"] and key is not None and key.is_subagent:
        try:
            seed = parent_seed(locator, key, ctx, workspace, own_file)
        except (OSError, ValueError) as exc:
            log.warn(f"Parent seed failed (non-fatal): {exc}")
            seed = None
        if seed:
            parts.append(seed)
            log.info("Injected parent state seed for subagent")
    if not parts:
        return None
    return {"prependSystemContext": "\n\n".join(parts) + "\n\n" + IMPORTANT_LINE}
