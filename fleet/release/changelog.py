"""The CHANGELOG.md section of a release, built from commit subjects grouped by conventional type.

`feat: ...` goes under Features, `fix: ...` under Fixes, everything else under Other; our own
release commits (`release: mc v2.1.0`, `release: memory-continuity v5.0.0, mc v2.1.0`, the one
format `commit_message` writes) are left out, while other subjects that merely begin with
`release:` (work on the release tooling) are listed. New sections go above older ones, below
the file's title.
"""

from __future__ import annotations

import re
from typing import Optional

GROUPS = (("feat", "Features"), ("fix", "Fixes"), ("other", "Other"))
TITLE = "# Changelog\n"
_MESSAGE = re.compile(r"^release: (?P<body>.+)$")
_ITEM = re.compile(r"^(?P<id>\S+) v(?P<version>\S+)$")
_CONVENTIONAL = re.compile(
    r"^(?P<type>[A-Za-z]+)(?:\((?P<scope>[^)]*)\))?(?P<bang>!)?:\s+(?P<desc>.+)$")


def commit_message(versions: dict) -> str:
    """`release: a v1.0.0, b v2.0.0` for {a: 1.0.0, b: 2.0.0} (in the order given): the subject
    of a release commit and the message of its annotated tag."""
    return "release: " + ", ".join(f"{cid} v{ver}" for cid, ver in versions.items())


def parse_commit_message(subject: str) -> dict:
    """{component: version} a release commit (or tag) message names; {} for any other text."""
    m = _MESSAGE.match(subject.strip())
    if not m:
        return {}
    found = {}
    for item in m.group("body").split(", "):
        im = _ITEM.match(item.strip())
        if not im:
            return {}
        found[im.group("id")] = im.group("version")
    return found


def classify(subject: str) -> tuple[str, str]:
    """(group, text) of one commit subject; group is feat, fix, other or release (skipped)."""
    if parse_commit_message(subject):
        return "release", subject.strip()
    m = _CONVENTIONAL.match(subject.strip())
    if not m:
        return "other", subject.strip()
    kind = m.group("type").lower()
    if kind not in ("feat", "fix"):
        return "other", subject.strip()
    text = m.group("desc").strip()
    if m.group("scope"):
        text = f"**{m.group('scope')}:** {text}"
    if m.group("bang"):
        text = f"**breaking:** {text}"
    return kind, text


def heading(component: str, version: str) -> str:
    return f"## {component} {version}"


def section(component: str, version: str, commits: list, date: str,
            previous_tag: Optional[str] = None, note: Optional[str] = None) -> str:
    """The markdown section for one release; `commits` are (short sha, subject), oldest first;
    `note`, a line said about the whole release (such as an unproven OpenClaw compatibility),
    goes above the commits."""
    grouped: dict[str, list[str]] = {key: [] for key, _ in GROUPS}
    for sha, subject in commits:
        group, text = classify(subject)
        if group != "release":
            grouped[group].append(f"- {text} ({sha})")
    since = f"Changes since {previous_tag}." if previous_tag else "First release."
    out = [f"{heading(component, version)} ({date})", "", since, ""]
    if note:
        out += [note, ""]
    if not any(grouped.values()):
        out += ["No commits since the previous release.", ""]
    for key, title in GROUPS:
        if grouped[key]:
            out += [f"### {title}", "", *grouped[key], ""]
    return "\n".join(out)


def prepend(existing: Optional[str], new_section: str) -> str:
    """`existing` changelog text with `new_section` inserted above every older section."""
    if not existing:
        return f"{TITLE}\n{new_section}"
    match = re.search(r"^## ", existing, re.M)
    if match:
        return existing[:match.start()] + new_section + "\n" + existing[match.start():]
    body = existing if existing.endswith("\n") else existing + "\n"
    return f"{body}\n{new_section}"


def has_section(text: Optional[str], component: str, version: str) -> bool:
    """True when the changelog already holds this release's section (resume is idempotent)."""
    if not text:
        return False
    return re.search(rf"^{re.escape(heading(component, version))} \(", text, re.M) is not None
