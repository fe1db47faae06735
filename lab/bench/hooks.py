"""(6) Continuity hooks, through the gateway's own plugin host and hook bus (in process).

- `before_prompt_build` for the main agent whose workspace holds a year of history: 365 daily
  summaries and 365 session logs (4 sessions a day), and a CURRENT_STATE.md whose objective shares
  keywords with that history, so the hook builds the snapshot and scores the related history.
  Repeated calls; p50 and p99.
- 200 children ending at once into one parent: 200 threads fire `subagent_ended` together (as
  200 concurrent `subagent.end` requests would), each child with an unsurfaced result carrying a
  unique marker; total time, and markers missing from the parent's state and its archive.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from fleet.continuity import sessionlog, summary
from fleet.continuity.document import StateDocument
from lab.bench.report import Section

TOPICS = ["deploy pipeline for the gateway fleet", "memory continuity recovery notes",
          "raspberry pi kernel upgrade", "quarterly budget spreadsheet", "release changelog",
          "subagent announce compaction", "ssh host key rotation", "garden irrigation timer"]
OBJECTIVE = "Finish the deploy pipeline for the gateway fleet with verified restarts"
CHILDREN = 200
_ROUND = 0


def _state(doc_path: Path, objective: str, unsurfaced: str = "None") -> None:
    doc = StateDocument.new("2026-03-31T07:51:52.123Z")
    doc.set("Objective", objective)
    doc.set("Current Step", "Benchmarking the continuity hooks")
    doc.set("Key Decisions", "- keep the original formats\n- fix their flaws")
    doc.set("Unsurfaced Results", unsurfaced)
    doc_path.parent.mkdir(parents=True, exist_ok=True)
    doc_path.write_text(doc.render(), encoding="utf-8")


def write_year(workspace: Path, days: int = 365, per_day: int = 4,
               today: datetime | None = None) -> None:
    """Session logs and daily summaries for the `days` days before `today`."""
    today = today or datetime.now(timezone.utc)
    for back in range(days, 0, -1):
        day = (today - timedelta(days=back)).replace(hour=9, minute=0, second=0, microsecond=0)
        for i in range(per_day):
            when = day + timedelta(hours=2 * i, minutes=back % 60)
            topic = f"{TOPICS[(back + i) % len(TOPICS)]} (day {back}, session {i})"
            sessionlog.append_entry(workspace, when,
                                    sessionlog.format_entry(when, topic, 6 + i, 6 + i, 1200))
        summary.write_daily(workspace, day.date())


def _gateway(state: Path):
    from fleet.gateway.layout import Layout  # noqa: PLC0415
    from fleet.gateway.scaffold import init  # noqa: PLC0415
    from fleet.gateway.service import Gateway  # noqa: PLC0415

    layout = Layout(state)
    init(layout)
    gateway = Gateway(layout)
    gateway.load_plugins()
    health = gateway.health()
    if not health["ready"]:
        raise RuntimeError(f"hooks bench: plugins did not load: {health['error']}")
    return gateway


def fresh_gateway(workdir: Path, name: str):
    """(gateway, workspace): a gateway with the plugins loaded on a new state dir under
    `workdir/name` (a previous run's removed), in this process."""
    state = (workdir / name / "state").absolute()
    if state.exists():
        shutil.rmtree(state)
    logging.getLogger("fleet").setLevel(logging.WARNING)
    return _gateway(state), state / "workspace"


def bench(workdir: Path, calls: int = 1000, reps: int = 3, log=print) -> Section:
    sec = Section("hooks", "6. continuity hooks (gateway hook bus, in process)")
    gateway, workspace = fresh_gateway(workdir, "hooks")
    t0 = time.perf_counter()
    write_year(workspace)
    log(f"  hooks: wrote a year of history in {time.perf_counter() - t0:.1f} s")
    parent_file = workspace / "memory" / "CURRENT_STATE.md"
    _state(parent_file, OBJECTIVE)
    ctx = {"agentId": "main", "sessionKey": "agent:main:main", "sessionId": "s-bench",
           "workspaceDir": str(workspace), "trigger": "user"}
    event = {"prompt": "continue", "messages": []}
    merged, errors = gateway.hooks.run_modifying("before_prompt_build", event, ctx)
    text = merged.get("prependSystemContext") or ""
    if errors or "RELATED HISTORY" not in text:
        raise RuntimeError(f"before_prompt_build gave no related history: {errors} {text[:200]}")
    for _ in range(calls):
        t = time.perf_counter()
        gateway.hooks.run_modifying("before_prompt_build", event, ctx)
        sec.add("before_prompt_build", time.perf_counter() - t)
    s = sec.summary("before_prompt_build")
    sec.figures["history files"] = (
        f"{len(list((workspace / 'memory' / 'summaries' / 'daily').glob('*.md')))} daily "
        f"summaries, {len(list((workspace / 'memory' / 'sessions').glob('*.md')))} session logs")
    sec.figures["injected context"] = f"{len(text)} chars"
    sec.goal("before_prompt_build p50", s["median"], 0.005, "s")
    log(f"  hooks: before_prompt_build p50 {s['median'] * 1000:.2f} ms, p99 "
        f"{s.get('p99', 0) * 1000:.2f} ms")

    lost_total = 0
    for rep in range(reps):
        total, lost = children_end(gateway, workspace)
        sec.add("200 children end at once", total)
        lost_total += lost
        log(f"  hooks rep {rep + 1}: 200 children ended in {total:.2f} s, {lost} notes lost")
    sec.figures["notes lost (200 children, all reps)"] = lost_total
    sec.goal("200 children: total time (median)",
             sec.summary("200 children end at once")["median"], 1.0, "s")
    sec.goal("200 children: notes lost", float(lost_total), 0.0)
    return sec


def children_end(gateway, workspace: Path, count: int = CHILDREN,
                 spread_s: float = 0.0) -> tuple[float, int]:
    """Fire `subagent_ended` for `count` children at once, or child i at i/count of `spread_s`
    after the first; (seconds until every end returned, markers missing)."""
    memory = workspace / "memory"
    for leftover in ("unsurfaced_archive.md", ".recovered_children.json"):
        (memory / leftover).unlink(missing_ok=True)
    _state(memory / "CURRENT_STATE.md", OBJECTIVE)
    global _ROUND
    _ROUND += 1
    cids = [f"r{_ROUND}c{i:03d}" for i in range(count)]
    for cid in cids:  # each child's run ends first (untimed): it records the result to merge
        key = f"agent:main:subagent:{cid}"
        said = [{"role": "user", "content": [{"type": "text", "text": f"child task {cid}"}]},
                {"role": "assistant",
                 "content": [{"type": "text", "text": f"result marker-{cid}-end\nsecond line"}]}]
        failed = gateway.hooks.run_void(
            "agent_end", {"messages": said, "success": True, "durationMs": 1},
            {"runId": cid, "agentId": "main", "sessionKey": key, "sessionId": cid,
             "workspaceDir": str(workspace), "trigger": "user"})
        if failed:
            raise RuntimeError(f"agent_end errors: {failed[:3]}")
    barrier = threading.Barrier(count + 1)
    errors: list[str] = []
    start = [0.0]

    def end(cid: str, delay: float) -> None:
        key = f"agent:main:subagent:{cid}"
        ctx = {"runId": cid, "childSessionKey": key, "requesterSessionKey": "agent:main:main"}
        ev = {"targetSessionKey": key, "targetKind": "subagent", "reason": "completed",
              "outcome": "ok", "endedAt": time.time(), "runId": cid}
        barrier.wait()
        if delay:
            time.sleep(max(0.0, start[0] + delay - time.perf_counter()))
        errors.extend(gateway.hooks.run_void("subagent_ended", ev, ctx))

    threads = [threading.Thread(target=end, args=(cid, spread_s * i / count))
               for i, cid in enumerate(cids)]
    for t in threads:
        t.start()
    start[0] = time.perf_counter()
    barrier.wait()
    t0 = start[0]
    for t in threads:
        t.join(120)
    total = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"subagent_ended errors: {errors[:3]}")
    text = (memory / "CURRENT_STATE.md").read_text(encoding="utf-8")
    archive = memory / "unsurfaced_archive.md"
    text += archive.read_text(encoding="utf-8") if archive.exists() else ""
    lost = sum(1 for cid in cids if text.count(f"marker-{cid}-end") != 1)
    return total, lost
