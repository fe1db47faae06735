"""The plan of one release: every file change, the commit, the tag and the push, before any of it
happens. `--dry-run` prints it; the real run writes it into the progress record and carries it out.

A release holds one or more components (`ComponentRelease`), released in one commit with one tag;
the commit message names every one of them (`release: memory-continuity v5.0.0, mc v2.1.0`), and
that message, kept as the annotated tag's message, is how a later release finds the tag that last
released a component whose own tag format the shared tag does not follow.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from fleet.continuity.atomicfile import atomic_write
from fleet.release import changelog
from fleet.release.changelog import commit_message
from fleet.release.component import Project


@dataclass
class ComponentRelease:
    """One component of a release: its id, versions before and after, and its previous tag."""

    id: str
    previous: str
    version: str
    previous_tag: Optional[str] = None


@dataclass
class FileChange:
    """One file's text before (None: new file) and after the release edit."""

    path: str
    old: Optional[str]
    new: str

    def diff(self) -> str:
        old = (self.old or "").splitlines(keepends=True)
        new = self.new.splitlines(keepends=True)
        fromfile = f"a/{self.path}" if self.old is not None else "/dev/null"
        lines = difflib.unified_diff(old, new, fromfile=fromfile, tofile=f"b/{self.path}")
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                       for line in lines)


@dataclass
class Plan:
    """Everything a release will do; `describe()` is what a dry run prints."""

    releases: list  # ComponentRelease, in the project's declared order
    tag: str
    branch: str
    base: str
    remote: Optional[str]
    push: bool
    changelog_section: str
    changes: list = field(default_factory=list)
    proof: str = ""  # what the release says about its OpenClaw proof (cut._proof)

    @property
    def versions(self) -> dict:
        return {r.id: r.version for r in self.releases}

    @property
    def commit_message(self) -> str:
        return commit_message(self.versions)

    @property
    def paths(self) -> list:
        return [c.path for c in self.changes]

    def push_command(self) -> Optional[str]:
        if not (self.push and self.remote):
            return None
        return (f"git push --atomic {self.remote} refs/heads/{self.branch}:refs/heads/{self.branch}"
                f" refs/tags/{self.tag}:refs/tags/{self.tag}")

    def describe(self) -> str:
        out = [f"release {r.id}: {r.previous} -> {r.version} (branch {self.branch}, since "
               f"{r.previous_tag or 'the first commit'})" for r in self.releases]
        if self.proof:
            out.append(self.proof)
        out.append("")
        out += [c.diff() for c in self.changes]
        out.append(f"commit: {self.commit_message!r} on {self.branch} "
                   f"(files: {', '.join(self.paths)})")
        out.append(f"tag: {self.tag} (annotated, message {self.commit_message!r}) "
                   "on that commit")
        cmd = self.push_command()
        if cmd:
            out.append(f"push: {cmd}")
        elif not self.remote:
            out.append("push: skipped (no remote configured)")
        else:
            out.append(f"push: skipped (--no-push); later: git push --atomic {self.remote} "
                       f"{self.branch} {self.tag}")
        return "\n".join(out)


def read_optional(path: Path) -> Optional[str]:
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None


def file_changes(project: Project, versions: dict, section: str) -> list:
    """New texts of the version files of every component in `versions` ({id: new version}) and
    of the changelog (idempotent: applying it to already-edited files gives the same texts,
    which is what `--resume` relies on)."""
    texts: dict[str, str] = {}
    originals: dict[str, Optional[str]] = {}
    for cid, version in versions.items():
        for vf in project.component(cid).files:
            if vf.path not in texts:
                texts[vf.path] = vf.text(project.root)
                originals[vf.path] = texts[vf.path]
            texts[vf.path] = vf.replace(texts[vf.path], version)
    log_path = project.changelog
    old_log = read_optional(Path(project.root) / log_path)
    originals[log_path] = old_log
    if all(changelog.has_section(old_log, cid, ver) for cid, ver in versions.items()):
        texts[log_path] = old_log or ""
    else:
        texts[log_path] = changelog.prepend(old_log, section)
    return [FileChange(p, originals[p], texts[p]) for p in texts]


def write_text(path: Path, text: str) -> None:
    """Replace a file atomically (temp + fsync + rename), keeping its permission bits."""
    atomic_write(path, text.encode("utf-8"))
