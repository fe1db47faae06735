"""The session's own checkpoint: `agent_end` (extract + archive + journal), `before_reset`
(archive), `session_end` (template when missing) and `before_compaction` (snapshot file).

A subagent session only ever touches its own per-child directory
(`memory/subagents/<child>/`), so a same-agent child can never overwrite, archive or journal
over its parent's checkpoint.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, FrozenSet, List, Mapping, Optional, Tuple

from fleet.continuity import origin, paths, store
from fleet.continuity.document import StateDocument, is_meaningful, template, to_iso
from fleet.continuity.snapshot import build_snapshot

from . import clock, extraction, handoff, lineage, notes, runorigin, settings, shownnotes
from .locate import Locator


def _subagent_key(locator: Locator, ctx: Mapping[str, Any]) -> Optional[str]:
    """The session's normalised key when it is a subagent's, else None."""
    try:
        _ws, key = locator.session(ctx)
    except ValueError:
        return None
    return key.normalized if key is not None and key.is_subagent else None


def _checkpoints(run: origin.Origin, subagent: bool) -> bool:
    """Whether a run with this origin may become its session's checkpoint: the user's run, a
    child's run on its task, and in a child a message its requester routed to it."""
    return run.kind in (origin.USER, origin.SUBAGENT_TASK) or (
        subagent and run.kind == origin.INTER_SESSION)


def _own(
    locator: Locator, ctx: Mapping[str, Any], hook: str, log: Any
) -> Tuple[Optional[Path], Optional[Path]]:
    """(own state file, workspace its archives and journal go to) or (None, None)."""
    try:
        workspace, key = locator.session(ctx)
    except ValueError as exc:
        log.warn(f"{hook}: refusing session: {exc}")
        return None, None
    if workspace is None:
        return None, None
    own = paths.session_state_file(workspace, key)
    if key is not None and key.is_subagent:
        # <ws>/memory/subagents/<child>: the child's own archive/journal root (paths.memory_dir);
        # a journal an older release left in <child>/memory/ moves here on first use.
        if (own.parent / paths.MEMORY_DIR).is_dir():
            from fleet.continuity import journal  # noqa: PLC0415

            with store.locked(own):
                moved = journal.adopt_legacy_child_journal(own.parent)
            if moved:
                log.info(f"{hook}: moved {len(moved)} journal file(s) of {key.normalized} "
                         f"from {own.parent / paths.MEMORY_DIR} to {own.parent}")
        return own, own.parent
    return own, workspace


def _archive(journal_ws: Path, text: str, max_count: Any, moment: Any) -> Path:
    from fleet.continuity.archive import archive_state  # noqa: PLC0415

    return archive_state(journal_ws, text, int(max_count), moment)


def _record_handoff(
    locator: Locator, ctx: Mapping[str, Any], messages: List[Any], log: Any, role_task: str
) -> None:
    """A subagent's run ended: record what its announce will carry (handoff.py)."""
    own, child_dir = _own(locator, ctx, "agent_end", log)
    if own is None or child_dir is None:
        return
    tasks = extraction.task_texts(messages, subagent=True, role_task=role_task)
    record = handoff.build(messages, tasks[0] if tasks else "", to_iso(clock.now()))
    path = handoff.write(child_dir, record)
    log.info(f"agent_end: child result recorded in {path} (ok: {record['ok']['state']})")


def agent_end(api: Any, locator: Locator, event: Mapping[str, Any], ctx: Mapping[str, Any]) -> None:
    log = api.logger
    config = settings.plugin_config(api)
    messages = event.get("messages")
    if not isinstance(messages, list) or not messages:
        return
    run = runorigin.at_end(ctx, messages)
    shown = shownnotes.take(ctx)
    who = ctx.get("sessionKey")  # outcome lines name the session (the compat matrix counts them)
    child = _subagent_key(locator, ctx)
    role_task = lineage.task_of(locator.state_dir, child) if child else ""
    if config["subagentRecovery"] and child:
        # A child's announce turn (its own child ended) may be where it answers: recorded too.
        _record_handoff(locator, ctx, messages, log, role_task)
    if not _checkpoints(run, child is not None):
        # A turn OpenClaw made on its own (delivering a child's result, a routed message) is
        # not the user's work: Objective, Unsurfaced Results (where that child's note lands
        # next) and the journal stay as they are.
        log.info(f"agent_end: {who}: {run.kind} turn ({run.evidence}); checkpoint kept")
        return
    if not config["autoExtract"]:
        return
    own, journal_ws = _own(locator, ctx, "agent_end", log)
    if own is None or journal_ws is None:
        return
    from fleet.continuity import journal  # noqa: PLC0415

    subagent = child is not None
    real = extraction.task_texts(messages, subagent, role_task)
    patterns = extraction.compile_ignore_patterns(config["ignorePatterns"], log.warn)
    if real and any(p.search(real[0]) for p in patterns):
        log.info(f"agent_end: {who}: first user message matches ignorePatterns; run not "
                 "recorded")
        return
    moment = clock.now()
    try:
        journal.record_run(journal_ws, messages, config, moment)
    except (OSError, ValueError) as exc:
        log.warn(f"agent_end: journal step failed (non-fatal): {exc}")
    new_text = extraction.extract_state(messages, to_iso(moment), subagent, role_task)
    if new_text is None:
        log.info(f"agent_end: {who}: no real user message or a poisoned exchange; checkpoint "
                 "kept")
        return
    with store.locked(own):
        old = store.read_text(own)
        if old is not None and is_meaningful(StateDocument.parse(old).get("Objective")):
            _archive(journal_ws, old, config["maxArchiveCount"], moment)
        if old is not None:
            new_text = _carry_unseen_notes(own, old, new_text, shown, moment)
        store.atomic_write(own, new_text)
    log.info(f"agent_end: {who}: checkpoint written to {own}")


def _carry_unseen_notes(
    own: Path, old: str, new_text: str, shown: FrozenSet[str], moment: datetime
) -> str:
    """Keep the recovery notes this run's model was not shown (shownnotes.py): one that arrived
    after its prompt was built, or that the recovery block's budget left out, must not leave
    Unsurfaced Results unseen."""
    pending = [n for n in notes.note_blocks(StateDocument.parse(old).get("Unsurfaced Results"))
               if n not in shown]
    if not pending:
        return new_text
    doc = StateDocument.parse(new_text)
    merged = doc.get("Unsurfaced Results")
    for note in pending:
        merged = notes.merge(merged, note)
    kept, moved = notes.cap(merged, to_iso(moment))
    notes.append_archive(own.parent, moved)
    doc.set("Unsurfaced Results", kept)
    return doc.render()


def before_reset(
    api: Any, locator: Locator, event: Mapping[str, Any], ctx: Mapping[str, Any]
) -> None:
    log = api.logger
    config = settings.plugin_config(api)
    if not config["archiveOnNew"]:
        return
    own, journal_ws = _own(locator, ctx, "before_reset", log)
    if own is None or journal_ws is None:
        return
    with store.locked(own):
        text = store.read_text(own)
        if text is None or not is_meaningful(StateDocument.parse(text).get("Objective")):
            return
        path = _archive(journal_ws, text, config["maxArchiveCount"], clock.now())
    log.info(f"before_reset: state archived to {path}")


def session_end(
    api: Any, locator: Locator, event: Mapping[str, Any], ctx: Mapping[str, Any]
) -> None:
    own, _ws = _own(locator, ctx, "session_end", api.logger)
    if own is None:
        return
    stamp = to_iso(clock.now())
    store.update(own, lambda current: template(stamp) if current is None else None)


SNAPSHOT_NAME = "COMPACTION_SNAPSHOT.md"


def compaction_snapshot_file(own: Path) -> Path:
    """`COMPACTION_SNAPSHOT.md` beside the session's own state file."""
    return own.parent / SNAPSHOT_NAME


def _count(value: Any) -> Optional[int]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return int(value)


def before_compaction(
    api: Any, locator: Locator, event: Mapping[str, Any], ctx: Mapping[str, Any]
) -> None:
    """Write the compaction snapshot: the state snapshot, plus the protected tail when the event
    carries messages.

    In OpenClaw 2026.9.6 `before_compaction` is an observation hook (a returned value is
    ignored) and its main path sends only `{messageCount, tokenCount}`; so the snapshot is a
    file the next run (and a person) can read, not an injection. The state itself reaches the
    model after compaction anyway: `before_prompt_build` injects it into the system context on
    every run.
    """
    config = settings.plugin_config(api)
    own, _ws = _own(locator, ctx, "before_compaction", api.logger)
    if own is None:
        return
    text = store.read_text(own)
    snapshot = build_snapshot(StateDocument.parse(text)) if text is not None else None
    if snapshot is None:
        return
    messages = event.get("messages")
    tail = None
    if isinstance(messages, list):
        tail = extraction.protected_tail(messages, int(config["tailProtectCount"]))
    counts = ", ".join(
        f"{name}={value}" for name in ("messageCount", "tokenCount")
        for value in [_count(event.get(name))] if value is not None
    )
    header = f"# Compaction Snapshot\n> Written: {to_iso(clock.now())}"
    header += f" ({counts})" if counts else ""
    body = header + "\n\n" + snapshot + ("\n\n" + tail if tail else "") + "\n"
    path = compaction_snapshot_file(own)
    with store.locked(path):
        store.atomic_write(path, body)
    api.logger.info(f"before_compaction: snapshot written to {path}")
