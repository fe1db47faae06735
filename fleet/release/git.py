"""A thin git wrapper: every call has a timeout, never prompts, and fails with a readable error.

Read-only calls run with GIT_OPTIONAL_LOCKS=0 so that, e.g., `git status` never rewrites the index:
a dry run must leave the repository byte for byte the same.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Optional

from fleet.release.error import ReleaseError

LOCAL_TIMEOUT = 30.0
NETWORK_TIMEOUT = 60.0


class GitError(ReleaseError):
    """A git command failed or timed out."""


class Git:
    """Runs git in one repository."""

    def __init__(self, root: Path, network_timeout: float = NETWORK_TIMEOUT) -> None:
        self.root = Path(root)
        self.network_timeout = network_timeout

    def run(self, *args: str, timeout: float = LOCAL_TIMEOUT, check: bool = True,
            strip: bool = True) -> str:
        """Run `git <args>` and return stdout (stripped); raise GitError on failure."""
        env = dict(os.environ)
        env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C",
                   GIT_SSH_COMMAND=env.get("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"))
        cmd = ["git", *args]
        try:
            proc = subprocess.run(cmd, cwd=self.root, env=env, capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise GitError(f"`{' '.join(cmd)}` timed out after {timeout:g}s") from exc
        except FileNotFoundError as exc:
            raise GitError("git is not installed (needed for releases)") from exc
        if check and proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip()
            raise GitError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {detail}")
        if proc.returncode != 0:
            return ""
        return proc.stdout.strip() if strip else proc.stdout

    def ok(self, *args: str, timeout: float = LOCAL_TIMEOUT) -> bool:
        """True when `git <args>` exits 0."""
        try:
            self.run(*args, timeout=timeout)
        except GitError:
            return False
        return True

    # --- state of the repository ---------------------------------------------------------
    def git_dir(self) -> Path:
        out = self.run("rev-parse", "--absolute-git-dir")
        return Path(out)

    def branch(self) -> Optional[str]:
        """The current branch name, or None on a detached HEAD."""
        out = self.run("symbolic-ref", "-q", "--short", "HEAD", check=False)
        return out or None

    def head(self) -> str:
        return self.run("rev-parse", "HEAD")

    def identity_problem(self) -> Optional[str]:
        """Why git would have no configured identity to author the release commit and tag (its
        own message), None when it has one. Configured means git config or GIT_AUTHOR_* /
        GIT_COMMITTER_* (user.useConfigOnly: no identity guessed from the host's name)."""
        for who in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
            try:
                self.run("-c", "user.useConfigOnly=true", "var", who)
            except GitError as exc:
                return str(exc)
        return None

    def dirty_paths(self) -> list[str]:
        """Tracked files with staged or unstaged changes (untracked files never get committed)."""
        out = self.run("status", "--porcelain=v1", "-z", "--untracked-files=no", strip=False)
        records = out.split("\0")
        paths, skip = [], False
        for rec in records:
            if skip or len(rec) < 4:  # the second name of a rename, or the trailing empty record
                skip = False
                continue
            paths.append(rec[3:])
            skip = rec[0] in "RC"
        return paths

    def untracked_under(self, under: list[str]) -> list[str]:
        """Untracked files git does not ignore under the `under` paths: new files of a shipped
        component that no commit holds (its tag would lack them)."""
        if not under:
            return []
        out = self.run("status", "--porcelain=v1", "-z", "--untracked-files=all", "--",
                       *under, strip=False)
        return sorted(rec[3:] for rec in out.split("\0") if rec.startswith("?? "))

    def untracked(self, paths: list[str]) -> list[str]:
        """Those of `paths` (files, relative to the root) that git does not track, ignored ones
        included: a build that packs them packs bytes no commit holds."""
        if not paths:
            return []
        out = self.run("--literal-pathspecs", "ls-files", "-z", "--", *paths, strip=False)
        tracked = set(out.split("\0"))
        return sorted(p for p in paths if p not in tracked)

    def tag_target(self, tag: str) -> Optional[str]:
        """The commit a local tag points to, or None."""
        out = self.run("rev-parse", "-q", "--verify", f"refs/tags/{tag}^{{commit}}", check=False)
        return out or None

    def tags(self, pattern: str) -> list[str]:
        """Local tags matching a glob that are reachable from HEAD."""
        out = self.run("tag", "--list", pattern, "--merged", "HEAD")
        return [t for t in out.splitlines() if t]

    def tag_subjects(self) -> list[tuple[str, str]]:
        """(tag, subject of its message) of every tag reachable from HEAD, in one call (a
        lightweight tag gives its commit's subject)."""
        out = self.run("tag", "--list", "--merged", "HEAD",
                       "--format=%(refname:strip=2)%09%(contents:subject)")
        return [tuple(line.split("\t", 1)) if "\t" in line else (line, "")
                for line in out.splitlines() if line]

    def remotes(self) -> list[str]:
        return [r for r in self.run("remote").splitlines() if r]

    def upstream_remote(self, branch: str) -> Optional[str]:
        out = self.run("config", "--get", f"branch.{branch}.remote", check=False)
        return out or None

    def remote_refs(self, remote: str, *refs: str) -> dict:
        """{ref: object id} of the given full ref names on the remote (absent ones left out), in
        one `git ls-remote` call with a timeout; raises GitError if the remote is unreachable."""
        out = self.run("ls-remote", remote, *refs, timeout=self.network_timeout)
        found = {}
        for line in out.splitlines():
            sha, _, ref = line.partition("\t")
            if ref in refs:
                found[ref] = sha
        return found

    def is_ancestor(self, rev: str, of: str) -> bool:
        """True when `rev` is known locally and reachable from `of`."""
        return self.ok("merge-base", "--is-ancestor", rev, of)

    def log_subjects(self, since: Optional[str],
                     paths: Optional[list[str]] = None) -> list[tuple[str, str]]:
        """(short sha, subject) of the commits after `since` (all commits if None), oldest first;
        with `paths`, only the commits that change something under one of them."""
        rev = f"{since}..HEAD" if since else "HEAD"
        limit = ["--", *paths] if paths else []
        out = self.run("log", "--reverse", "--no-merges", "--format=%h%x09%s", rev, *limit)
        rows = []
        for line in out.splitlines():
            sha, _, subject = line.partition("\t")
            rows.append((sha, subject))
        return rows

    def commit_subject(self, rev: str) -> str:
        return self.run("log", "-1", "--format=%s", rev)

    def parent(self, rev: str) -> Optional[str]:
        out = self.run("rev-parse", "-q", "--verify", f"{rev}^", check=False)
        return out or None

    # --- changes ---------------------------------------------------------------------------
    def commit_paths(self, message: str, paths: list[str]) -> str:
        """Commit exactly `paths` (nothing else that may be staged) and return the new sha."""
        self.run("add", "--", *paths)
        self.run("commit", "-q", "-m", message, "--", *paths)
        return self.head()

    def annotated_tag(self, tag: str, message: str, rev: str) -> None:
        self.run("tag", "-a", tag, "-m", message, rev)

    def push(self, remote: str, branch: str, tag: str) -> None:
        """Push the branch and the tag in one atomic push: both land or neither does."""
        self.run("push", "--atomic", remote, f"refs/heads/{branch}:refs/heads/{branch}",
                 f"refs/tags/{tag}:refs/tags/{tag}", timeout=self.network_timeout)
