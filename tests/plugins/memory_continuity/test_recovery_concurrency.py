"""200 concurrent recoveries into one parent, from threads and processes: nothing lost or torn."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path

from continuity_fakes import FakeApi, write_child, write_state

from fleet.continuity.document import SECTIONS, StateDocument

THREADS = 100
PROCESSES = 4
PER_PROCESS = 25
CONFIG = {"agents": {"list": [{"id": "main", "default": True}]}}


def _recover(state_dir: str, cids: list) -> None:
    from fleet.plugins.memory_continuity import plugin

    api = FakeApi(Path(state_dir), CONFIG)
    plugin.register(api)
    for cid in cids:
        key = f"agent:main:subagent:{cid}"
        api.fire("subagent_ended", {"targetSessionKey": key, "targetKind": "subagent",
                                    "outcome": "ok", "runId": cid},
                 {"childSessionKey": key, "requesterSessionKey": "agent:main:main"})
    errors = api.logger.text("error") + api.logger.text("warn")
    if errors:
        raise AssertionError(errors)


def test_200_concurrent_recoveries(state_dir):
    ws = state_dir / "workspace"
    parent = ws / "memory" / "CURRENT_STATE.md"
    write_state(parent, objective="Parent objective")
    cids = [f"c{i}" for i in range(THREADS + PROCESSES * PER_PROCESS)]
    for cid in cids:
        write_child(ws / "memory" / "subagents" / cid / "CURRENT_STATE.md",
                    objective=f"task {cid}", unsurfaced=f"result of {cid}\nsecond line")

    torn = []
    stop = threading.Event()

    def watch() -> None:  # every state ever visible must parse into the six sections
        while not stop.is_set():
            doc = StateDocument.parse(parent.read_text())
            if doc.section_names() != list(SECTIONS) or doc.get("Objective") != "Parent objective":
                torn.append(parent.read_text())

    watcher = threading.Thread(target=watch)
    watcher.start()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_recover,
                         args=(str(state_dir), cids[THREADS + i * PER_PROCESS:
                                                    THREADS + (i + 1) * PER_PROCESS]))
             for i in range(PROCESSES)]
    threads = [threading.Thread(target=_recover, args=(str(state_dir), [cid]))
               for cid in cids[:THREADS]]
    try:
        for w in procs + threads:
            w.start()
        for w in procs + threads:
            w.join(240)
    finally:
        stop.set()
        watcher.join(10)
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    assert torn == []

    section = StateDocument.parse(parent.read_text()).get("Unsurfaced Results")
    archive = (ws / "memory" / "unsurfaced_archive.md").read_text()
    for cid in cids:
        found = section.count(f"Result: result of {cid}\n") + archive.count(
            f"Result: result of {cid}\n")
        assert found == 1, (cid, found)
    ledger = json.loads((ws / "memory" / ".recovered_children.json").read_text())
    assert len(ledger["children"]) == len(cids)
    leftovers = [p.name for p in (ws / "memory").iterdir()
                 if ".fleet-tmp." in p.name or p.name.endswith(".tmp")]
    assert leftovers == []
