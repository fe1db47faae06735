"""The continuity doctor: diagnoses every state file of a state dir, never repairs anything.

Per state file (each agent's `memory/CURRENT_STATE.md` and each child's
`memory/subagents/<child>/CURRENT_STATE.md`) it checks that the file exists, is not stale
against the agent's newest session transcript, has all six sections, holds no leftover template
placeholder (`[...]`), whether Unsurfaced Results waits for review (subagent results not yet
surfaced: warning; the last answer every checkpoint keeps there: info), and whether the newest
archive's Objective differs from the current one (a task switch). Severities are ok < info <
warning < critical; `exit_code` maps the worst to 0 (ok, info), 1 (warning), 2 (critical), the
codes of the doctor users know from the original plugin.

Used by `/mc doctor` (text) and by the installer's `doctor` subcommand (JSON, per host).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, NamedTuple, Optional

from fleet.continuity import archive, document, paths, store
from fleet.continuity.statelayout import StateLayout

SEVERITIES = ("ok", "info", "warning", "critical")
STALE_GRACE_S = 300.0  # a state file this much older than the newest transcript is stale
IDLE_INFO_S = 24 * 3600.0  # older than this (and not stale): reported as info
_BRACKETED = re.compile(r"^\[[^\]\n]*\]$")
# The head line of a subagent's recovery note (memory_continuity/notes.py `format_note`).
_CHILD_NOTE = re.compile(r'^\[[^\]\n]+\] Subagent "', re.M)


def worst(severities: List[str]) -> str:
    """The highest severity of a list (`ok` for an empty one)."""
    return max(severities, key=SEVERITIES.index, default="ok")


def exit_code(severity: str) -> int:
    """0 healthy (ok, info), 1 warnings, 2 critical."""
    return {"warning": 1, "critical": 2}.get(severity, 0)


class Finding(NamedTuple):
    """One check's verdict on one state file."""

    check: str
    severity: str
    message: str

    def as_dict(self) -> Dict[str, str]:
        return {"check": self.check, "severity": self.severity, "message": self.message}


class Target:
    """One state file: whose it is and what the checks found."""

    __slots__ = ("agent", "child", "path", "findings")

    def __init__(self, agent: str, child: Optional[str], path: Path,
                 findings: Optional[List[Finding]] = None) -> None:
        self.agent = agent
        self.child = child
        self.path = path
        self.findings: List[Finding] = [] if findings is None else findings

    @property
    def label(self) -> str:
        return f"{self.agent}/{self.child}" if self.child else self.agent

    @property
    def severity(self) -> str:
        return worst([f.severity for f in self.findings])

    def as_dict(self) -> Dict[str, Any]:
        return {"agent": self.agent, "child": self.child, "path": str(self.path),
                "severity": self.severity, "findings": [f.as_dict() for f in self.findings]}


class Report:
    """Every target checked in one state dir."""

    __slots__ = ("state_dir", "targets")

    def __init__(self, state_dir: Path, targets: Optional[List[Target]] = None) -> None:
        self.state_dir = state_dir
        self.targets: List[Target] = [] if targets is None else targets

    @property
    def severity(self) -> str:
        return worst([t.severity for t in self.targets])

    @property
    def exit_code(self) -> int:
        return exit_code(self.severity)

    def as_dict(self) -> Dict[str, Any]:
        return {"state_dir": str(self.state_dir), "severity": self.severity,
                "exit": self.exit_code, "targets": [t.as_dict() for t in self.targets]}


def newest_transcript(state_dir: Path, agent_id: str) -> Optional[float]:
    """mtime of the agent's newest session transcript (`agents/<id>/sessions/*.jsonl`)."""
    newest = None
    try:
        entries = list(os.scandir(StateLayout(state_dir).agents_dir / agent_id / "sessions"))
    except OSError:
        return None
    for entry in entries:
        if entry.name.endswith(".jsonl"):
            try:
                mtime = entry.stat().st_mtime
            except OSError:
                continue
            newest = mtime if newest is None or mtime > newest else newest
    return newest


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{int(seconds)}s"
    if seconds < 7200:
        return f"{int(seconds // 60)} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def check_state(path: Path, transcript_mtime: Optional[float] = None,
                archive_root: Optional[Path] = None, now: Optional[float] = None,
                ran: bool = True) -> List[Finding]:
    """Every check on one state file. `transcript_mtime`: newest transcript of its agent (None:
    no staleness check); `archive_root`: the workspace whose archives hold its earlier states;
    `ran`: whether its agent has sessions (a missing file is then critical, else only info)."""
    now = time.time() if now is None else now
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = None
    try:
        text = store.read_text(path) if mtime is not None else None
    except OSError as exc:  # a FIFO, a device, a link or a huge file where the state belongs
        return [Finding("exists", "critical", f"{exc}; the plugins neither read nor write it "
                                              "while it is there: move it away (the next "
                                              "checkpoint writes a new one)")]
    if text is None:
        if ran:
            return [Finding("exists", "critical",
                            f"{path} is missing although the agent has sessions; "
                            "is the memory-continuity plugin loaded?")]
        return [Finding("exists", "info", f"{path} does not exist yet (the agent has no "
                                          "sessions)")]
    out = [Finding("exists", "ok", f"{path.name} present ({len(text.encode())} bytes)")]
    if transcript_mtime is not None and transcript_mtime - mtime > STALE_GRACE_S:
        out.append(Finding("stale", "warning",
                           f"last written {_ago(transcript_mtime - mtime)} before the newest "
                           "session transcript: checkpoints are not being saved"))
    elif now - mtime > IDLE_INFO_S:
        out.append(Finding("stale", "info", f"last written {_ago(now - mtime)} ago (no newer "
                                            "session)"))
    else:
        out.append(Finding("stale", "ok", f"last written {_ago(now - mtime)} ago"))
    doc = document.StateDocument.parse(text)
    missing = [s for s in document.SECTIONS if not doc.has(s)]
    if missing:
        out.append(Finding("sections", "warning", "missing sections: " + ", ".join(missing)))
    else:
        out.append(Finding("sections", "ok", "all six sections present"))
    left = [s for s in document.SECTIONS if _BRACKETED.match(doc.get(s) or "")]
    if left:
        out.append(Finding("placeholders", "warning",
                           "template placeholder left in: " + ", ".join(left)))
    unsurfaced = doc.get("Unsurfaced Results") or ""
    if document.is_meaningful(unsurfaced):
        notes = len(_CHILD_NOTE.findall(unsurfaced))
        if notes:
            out.append(Finding("unsurfaced", "warning",
                               f"Unsurfaced Results waits for review: {notes} subagent "
                               "result(s) not yet surfaced to the user"))
        else:  # the last answer, as every checkpoint records it
            first = unsurfaced.strip().splitlines()[0][:80]
            out.append(Finding("unsurfaced", "info", f"Unsurfaced Results holds: {first}"))
    if archive_root is not None:
        out.extend(_task_switch(doc, archive_root))
    return out


def _task_switch(doc: document.StateDocument, archive_root: Path) -> List[Finding]:
    archives = archive.list_archives(archive_root)
    if not archives:
        return []
    try:
        old = store.read_text(archives[0]) or ""
    except OSError:  # not a regular file, or huge: nothing to compare with
        return []
    before = " ".join(document.StateDocument.parse(old).get("Objective").split())
    now_obj = " ".join(doc.get("Objective").split())
    if document.is_meaningful(before) and before != now_obj:
        return [Finding("task_switch", "info",
                        f"objective changed since the newest archive {archives[0].name} "
                        f"(was: {before[:60]})")]
    return []


def diagnose(state_dir: Path, config: Optional[Mapping[str, Any]] = None,
             agent: Optional[str] = None, now: Optional[float] = None) -> Report:
    """Check one agent (default: every known agent) and each of its children's state files.

    Raises `paths.InvalidAgentId` for a bad agent name and LookupError for an unknown one.
    """
    state_dir = Path(state_dir)
    if config is None:
        config = paths.load_config(state_dir / StateLayout.CONFIG)
    known = paths.list_agents(config, state_dir)
    if agent is not None:
        aid = paths.validate_agent_id(agent)
        if aid not in known:
            raise LookupError(f'Agent "{agent}" not found.')
        ids = [aid]
    else:
        ids = known
    report = Report(state_dir)
    for aid in ids:
        try:
            ws = paths.resolve_agent_workspace(aid, config, state_dir)
        except paths.InvalidAgentId:
            continue
        newest = newest_transcript(state_dir, aid)
        main = paths.state_file(ws)
        report.targets.append(Target(aid, None, main, check_state(
            main, newest, ws, now, ran=newest is not None)))
        for path in paths.child_state_files(ws):
            cdir = path.parent
            # A child's transcript is not tied to its id on disk: no staleness check.
            report.targets.append(Target(aid, cdir.name, path,
                                         check_state(path, None, cdir, now)))
    return report


def render_text(report: Report, verbose: bool = False) -> List[str]:
    """The anchor's layout: `[SEVERITY]` padded to 12, the message; then the overall status.
    Without `verbose`, ok findings are summed up in one line per target."""
    lines: List[str] = []
    for target in report.targets:
        lines.append(f"{target.label}: {target.path}")
        shown = [f for f in target.findings if verbose or f.severity != "ok"]
        oks = len(target.findings) - len(shown)
        for f in shown:
            lines.append(f"  {'[' + f.severity.upper() + ']':<12}{f.message}")
        if oks and not verbose:
            lines.append(f"  {'[OK]':<12}{oks} check(s) passed")
    lines.append(f"Overall status: {report.severity.upper()}")
    return lines
