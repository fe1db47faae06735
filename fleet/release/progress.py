"""The progress record: where a release stopped, so `invoke release --resume` can finish it.

Kept in `.git/fleet-release.json` (never committed, never in the work tree). Written before the
first change and after every step, atomically; removed when the release completes. Its presence
blocks a new release, so a rerun can never make a second commit or tag.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Optional

from fleet.continuity.atomicfile import atomic_write
from fleet.release.error import ReleaseError

PROGRESS_FILE = "fleet-release.json"
STEPS = ("files", "commit", "tag", "packages", "push")
RESUME_COMMAND = "invoke release --resume"


@dataclass
class Progress:
    """One in-flight release: its plan and the steps already done."""

    versions: dict  # component -> new version, in the project's declared order
    previous: dict  # component -> version before the release
    tag: str
    branch: str
    base: str  # HEAD before the release commit
    files: list
    changelog_section: str
    push: bool
    remote: Optional[str] = None
    proof: Optional[str] = None  # the OpenClaw proof decision made at the start, kept on resume
    commit: Optional[str] = None
    done: list = field(default_factory=list)
    failed_step: Optional[str] = None
    error: Optional[str] = None
    path: Optional[Path] = field(default=None, repr=False, compare=False)

    @classmethod
    def load(cls, path: Path) -> Optional[Progress]:
        """The progress record at `path`, or None when no release is in flight."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except ValueError as exc:
            raise ReleaseError(f"{path}: the progress record is corrupt ({exc}); inspect it, "
                               "finish the release by hand, then delete the file") from exc
        if isinstance(data, dict) and "component" in data and "versions" not in data:
            # written by a single-component fleet: {component, version, previous: str}
            cid = data.pop("component")
            data["versions"] = {cid: data.pop("version", None)}
            data["previous"] = {cid: data.get("previous")}
        names = {f.name for f in fields(cls)} - {"path"}
        try:
            progress = cls(**{k: v for k, v in data.items() if k in names})
        except TypeError as exc:
            raise ReleaseError(f"{path}: the progress record lacks fields ({exc}); inspect it, "
                               "finish the release by hand, then delete the file") from exc
        progress.path = Path(path)
        return progress

    def claim(self) -> None:
        """Create the record exclusively: two releases started at once cannot both proceed."""
        assert self.path is not None
        try:
            os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError as exc:
            raise ReleaseError(f"another release is in progress or unfinished ({self.path} "
                               f"exists); fix: wait for it, or finish it with "
                               f"`{RESUME_COMMAND}`") from exc
        self.save()

    def save(self) -> None:
        """Write atomically (temp file + fsync + rename) so a crash never leaves half a record."""
        assert self.path is not None
        data = {k: v for k, v in asdict(self).items() if k != "path"}
        atomic_write(self.path, json.dumps(data, indent=2, sort_keys=True) + "\n", 0o600)

    @property
    def label(self) -> str:
        """`mc v2.1.0`, or `memory-continuity v5.0.0 + mc v2.1.0` for a joint release."""
        return " + ".join(f"{cid} v{ver}" for cid, ver in self.versions.items())

    def mark(self, step: str) -> None:
        if step not in self.done:
            self.done.append(step)
        self.failed_step = self.error = None
        self.save()

    def fail(self, step: str, error: str) -> None:
        self.failed_step, self.error = step, error
        self.save()

    def delete(self) -> None:
        if self.path is not None and self.path.exists():
            self.path.unlink()

    def pending(self) -> list:
        return [s for s in STEPS if s not in self.done]
