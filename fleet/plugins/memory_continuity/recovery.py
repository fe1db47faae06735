"""`subagent_ended`: a finished child's result becomes a note in its parent's state.

The result is the one the child's announce carried (handoff.py records it when the child's run
ends; both gateways fire `subagent_ended` only once the announce has been delivered or skipped,
never while it waits for a paused child): a silent answer, a child still waiting or one that
left no answer merges nothing, and a timeout merges the partial progress the announce reported.

Only `targetKind == "subagent"` ends are children (OpenClaw also fires this hook with
`targetKind: "acp"` when a main session is reset). The ctx has no `workspaceDir` and no
`agentId`: the child is `event.targetSessionKey`, the parent is `ctx.requesterSessionKey` (else
the record `subagent_spawned` left, else the key's parent chain), and both workspaces come from
the OpenClaw config. Fixed from the original plugin: the child's state is its own per-child file,
only `ok` (completed) and `timeout` (partial) are merged, each child is merged exactly once, and
the whole read-modify-write holds the parent file's lock and replaces it atomically.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from fleet.continuity import paths, store
from fleet.continuity.document import StateDocument, template, to_iso

from . import clock, handoff, lineage, notes, settings
from .locate import Locator

MERGED_OUTCOMES = {"ok": False, "timeout": True}  # outcome -> partial?
OUTCOME_BY_REASON = {
    "subagent-complete": "ok",
    "subagent-error": "error",
    "subagent-killed": "killed",
    "session-reset": "reset",
    "session-delete": "deleted",
}
CHILD_READ_LIMIT = 4 * 1024 * 1024
LEDGER_NAME = ".recovered_children.json"
LEDGER_MAX = 2000


def _ledger_path(parent_file: Path) -> Path:
    return parent_file.parent / LEDGER_NAME


def _load_ledger(path: Path) -> List[str]:
    text = store.read_text(path)
    if not text:
        return []
    try:
        data = json.loads(text)
    except ValueError:
        return []
    items = data.get("children") if isinstance(data, dict) else None
    return [i for i in items if isinstance(i, str)] if isinstance(items, list) else []


def _save_ledger(path: Path, items: List[str]) -> None:
    store.atomic_write(path, json.dumps({"children": items[-LEDGER_MAX:]}, indent=0) + "\n")


def _parent_key(
    child: paths.SessionKey, ctx: Mapping[str, Any], locator: Locator, log: Any
) -> Optional[paths.SessionKey]:
    raw = ctx.get("requesterSessionKey") or lineage.requester_of(
        locator.state_dir, child.normalized)
    if raw:
        return paths.check_session_key(raw)
    derived = child.parent_key
    if derived is None:
        return None
    log.info(f"subagent_ended: no requesterSessionKey; assuming parent session {derived}")
    return paths.check_session_key(derived)


def recover(api: Any, locator: Locator, event: Mapping[str, Any], ctx: Mapping[str, Any]) -> None:
    """The hook body (see module docstring); logs why it did nothing when it does nothing."""
    log = api.logger
    config = settings.plugin_config(api)
    if not config["subagentRecovery"]:
        return
    kind = event.get("targetKind")
    if kind != "subagent":
        log.info(f"subagent_ended: targetKind={kind!r} is not a subagent; nothing to recover")
        return
    raw_child = event.get("targetSessionKey") or ctx.get("childSessionKey")
    if not raw_child:
        log.info("subagent_ended: no child session key, skipping")
        return
    try:
        child = paths.check_session_key(raw_child)
    except ValueError as exc:
        log.warn(f"subagent_ended: refusing child session key: {exc}")
        return
    outcome = event.get("outcome") or OUTCOME_BY_REASON.get(str(event.get("reason") or ""))
    if outcome not in MERGED_OUTCOMES:
        log.info(
            f"subagent_ended: {child.normalized} ended with outcome={outcome!r} "
            f"reason={event.get('reason')!r}; not merged"
        )
        return
    try:
        parent = _parent_key(child, ctx, locator, log)
    except ValueError as exc:
        log.warn(f"subagent_ended: refusing requester session key: {exc}")
        return
    if parent is None:
        log.info(f"subagent_ended: no parent session for {child.normalized}, skipping")
        return
    parent_file = locator.session_file_for_key(parent)
    child_ws = locator.agent_workspace(child.agent_id)
    child_file = paths.session_state_file(child_ws, child)
    if child_file.resolve() == parent_file.resolve():
        log.info(f"subagent_ended: {child.normalized} shares its parent's state file; skipping")
        return
    record = handoff.read(child_file.parent)
    if record is None:
        log.info(f"subagent_ended: {child.normalized} finished no run; nothing to merge")
        return
    choice = handoff.pick(record, outcome)
    result = choice["text"]
    if choice["state"] != "text" or not result or not result.strip():
        why = {"silent": "answered with a silent token", "waiting": "is still waiting"}.get(
            choice["state"], "left no answer")
        log.info(f"subagent_ended: {child.normalized} {why}; not merged")
        return
    # The task is the child's first user message (a continuation's "go on" is not the task);
    # the checkpoint's objective only when the record has none.
    objective = str(record.get("task") or "").strip()
    if not objective:
        text = store.read_text(child_file, max_bytes=CHILD_READ_LIMIT)
        objective = StateDocument.parse(text).get("Objective") if text is not None else ""
    moment = clock.now()
    stamp = to_iso(moment)
    note = notes.format_note(
        stamp,
        child.agent_id,
        child.normalized,
        objective,
        result,
        partial=MERGED_OUTCOMES[outcome],
        child_file=str(handoff.path(child_file.parent)),
    )
    ident = child.normalized
    merged_now = _merge_grouped(parent_file, ident, note, stamp, log)
    if merged_now is None:
        log.info(f"subagent_ended: {ident} already merged; ignoring the repeat")
        return
    log.info(
        f"subagent_ended: merged {ident} ({outcome}) into {parent_file}"
        + (f"; moved {merged_now} older note(s) to {notes.ARCHIVE_NAME}" if merged_now else "")
    )


# Group commit: children ending together queue their notes per parent file; whoever holds the
# parent's lock merges every queued note in one read-modify-write (one parent write, one archive
# append, one ledger write), instead of one locked write with ~6 fsyncs per child. A thread
# returns only once a write containing its note is on disk (its item is done before it can
# take the lock itself, or it does the write).
_queue_lock = threading.Lock()
_queued: Dict[str, List[Dict[str, Any]]] = {}
_gates: Dict[str, threading.Lock] = {}  # one writer per parent file in this process


def _merge_grouped(parent_file: Path, ident: str, note: str, stamp: str,
                   log: Any) -> Optional[int]:
    """Merge `note` (exactly once, by `ident`); None if it was merged before, else the number
    of older notes this write moved to the archive."""
    key = str(parent_file.absolute())
    item: Dict[str, Any] = {"ident": ident, "note": note, "done": False, "result": None,
                            "error": None}
    with _queue_lock:
        _queued.setdefault(key, []).append(item)
        gate = _gates.setdefault(key, threading.Lock())
    # Threads of this process queue on a plain lock (woken at once, no polling); the file lock
    # below still serialises with other processes. A thread whose note another thread already
    # wrote only passes through the gate.
    if not gate.acquire(timeout=store.DEFAULT_LOCK_TIMEOUT):
        raise store.LockTimeout(f"recovery of {ident}: another writer of {parent_file} is stuck")
    batch: List[Dict[str, Any]] = []
    try:
        if not item["done"]:
            with store.locked(parent_file):
                with _queue_lock:
                    batch = _queued.pop(key, [])
                try:
                    _write_batch(parent_file, batch, stamp)
                except BaseException as exc:
                    for it in batch:
                        it["error"] = exc
                    raise
                finally:
                    for it in batch:
                        it["done"] = True
    finally:
        gate.release()
    if item["error"] is not None and item not in batch:
        raise item["error"]
    return item["result"]


def _write_batch(parent_file: Path, batch: List[Dict[str, Any]], stamp: str) -> None:
    ledger_file = _ledger_path(parent_file)
    seen = _load_ledger(ledger_file)
    current = store.read_text(parent_file)
    doc = StateDocument.parse(current if current is not None else template(stamp))
    section = doc.get("Unsurfaced Results")
    archived: List[str] = []
    new_ids: List[str] = []
    for it in batch:
        if it["ident"] in seen or it["ident"] in new_ids:
            it["result"] = None
            continue
        section, moved = notes.cap(notes.merge(section, it["note"]), stamp)
        archived.extend(moved)
        new_ids.append(it["ident"])
        it["result"] = len(moved)
    if not new_ids:
        return
    # Archive first: a crash after this duplicates a note, it never loses one.
    notes.append_archive(parent_file.parent, archived)
    doc.set("Unsurfaced Results", section)
    doc.touch(stamp)
    store.atomic_write(parent_file, doc.render())
    _save_ledger(ledger_file, seen + new_ids)
