"""A release named by the operator (`deploy --release 5.0.1`, a tag, any git ref) as an artifact.

Kamal deploys a named version with `kamal deploy --version`; here a name is, in this order:

1. a kept build: `dist/fleet-<name>.pyz` (a leading `v` dropped), whose `.sha256` it matches;
2. the main component's release tag for that version (`v5.0.1`), or the name
   itself as a tag, branch or commit of the checkout: its tree is checked out into a temporary
   git worktree (clean, so never `+dirty`) and built there. Builds are reproducible, so the
   build of a release's tag is byte for byte the artifact that release made.

A name that is none of these is an error listing the kept builds and the newest release tags.
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from fleet.release.artifact import Artifact, artifact_name, ensure_artifact
from fleet.release.component import load_project
from fleet.release.error import ReleaseError
from fleet.release.git import Git, GitError

SHOWN = 8  # kept builds and tags named in the error


def _kept(out_dir: Path, name: str) -> Path | None:
    """`dist/fleet-<name>.pyz` when it is there and matches its `.sha256`."""
    for version in dict.fromkeys((name, name[1:] if name[:1] in "vV" else name)):
        path = out_dir / artifact_name(version)
        try:
            recorded = path.with_name(path.name + ".sha256").read_text(encoding="ascii").split()
            data = path.read_bytes()
        except OSError:
            continue
        if not recorded or hashlib.sha256(data).hexdigest() != recorded[0]:
            raise ReleaseError(f"{path} does not match {path.name}.sha256: a damaged or "
                               f"hand-edited build; remove both and deploy --release {name} "
                               "again (it builds the release from its tag)")
        return path
    return None


def _commit(git: Git, root: Path, name: str) -> tuple[str, str]:
    """(the ref that named it, its commit) for a release version or a git ref."""
    main = load_project(root).component()
    candidates = [main.tag(name[1:] if name[:1] in "vV" else name), name]
    for ref in dict.fromkeys(candidates):
        if ref.startswith("-"):
            continue
        commit = git.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        if commit:
            return ref, commit
    raise ReleaseError(_unknown(git, root, name, main.tag("*")))


def _unknown(git: Git, root: Path, name: str, pattern: str) -> str:
    kept = sorted(p.name for p in (root / "dist").glob("fleet-*.pyz"))[-SHOWN:]
    try:
        tags = git.run("tag", "--list", pattern, "--sort=-v:refname").splitlines()[:SHOWN]
    except GitError:
        tags = []
    return (f"no release {name!r}: not a kept build in {root / 'dist'} "
            f"({', '.join(kept) or 'none'}), nor a release tag, branch or commit of {root} "
            f"(newest tags: {', '.join(tags) or 'none'})")


@contextlib.contextmanager
def _worktree(git: Git, commit: str) -> Iterator[Path]:
    """A clean checkout of `commit` in a temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="fleet-release-") as tmp:
        where = Path(tmp) / "tree"
        git.run("worktree", "add", "--detach", "--quiet", str(where), commit, timeout=120)
        try:
            yield where
        finally:
            git.run("worktree", "remove", "--force", str(where), check=False)
            git.run("worktree", "prune", check=False)


def resolve(root: Path, out_dir: Path, name: str) -> tuple[Artifact | Path, str]:
    """(the artifact, where it came from) for `name` (see the module doc): a kept build's path,
    or an Artifact built into `out_dir` from the commit the name resolves to."""
    name = name.strip()
    if not name:
        raise ReleaseError("--release needs a version, a tag or a git ref")
    kept = _kept(Path(root) / "dist", name)
    if kept is not None:
        return kept, f"kept build {kept}"
    git = Git(root)
    ref, commit = _commit(git, Path(root), name)
    with _worktree(git, commit) as tree:
        art, _ = ensure_artifact(tree, out_dir)
    return art, f"built from {ref} ({commit[:12]})"
