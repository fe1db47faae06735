"""Helpers for the release tests: a temp git repo (a copy of the project's release-relevant files)
with a bare remote, plus helpers to snapshot everything a dry run must leave untouched."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from fleet.release.compatproof import PROOF_FILE, sources_digest

MAIN = Path(__file__).resolve().parents[2]
RELEASE_FILES = (
    "pyproject.toml",
    "fleet/__init__.py",
    "fleet/plugins/memory_continuity/openclaw.plugin.json",
    "fleet/plugins/memory_continuity/package.json",
    "fleet/plugins/mc/openclaw.plugin.json",
    "fleet/plugins/mc/package.json",
    "fleet/plugins/memory_continuity/index.js",
    "fleet/plugins/mc/index.js",
    "fleet/plugins/bridge.mjs",
    "fleet/plugins/memory_continuity/bridge.mjs",  # links to the one above
    "fleet/plugins/mc/bridge.mjs",
    "CHANGELOG.md",
    ".gitignore",  # a release writes its packages into the ignored dist/
)
# What a release builds each plugin's OpenClaw package from (fleet.release.npmpackage).
PACKAGE_TREES = ("fleet/continuity", "fleet/plugins", "fleet/gateway")


def task_env() -> dict:
    """Environment for `python -m invoke -r <checkout>` run inside a temp repo: the temp repo
    holds a partial copy of the `fleet` package, so the cwd must not go first on sys.path
    (PYTHONSAFEPATH), or the tasks would import a mix of that copy and another install."""
    return dict(os.environ, PYTHONSAFEPATH="1", PYTHONPATH=str(MAIN))


def git(cwd: Path, *args: str, check: bool = True) -> str:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip()


def commit_file(repo: Path, rel: str, text: str, message: str) -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    git(repo, "add", rel)
    git(repo, "commit", "-q", "-m", message)


def tree_bytes(root: Path) -> dict:
    """Every file under root (including .git) -> sha256 of its bytes."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def snapshot(repo: Path, remote: Path) -> dict:
    """Files (work tree and .git, index included), refs of both repos, bytes of the remote."""
    return {
        "repo": tree_bytes(repo),
        "refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "head": git(repo, "rev-parse", "HEAD"),
        "remote": tree_bytes(remote),
        "remote_refs": git(remote, "for-each-ref", "--format=%(refname) %(objectname)"),
    }


class Repo:
    """A temp project checkout with a bare `origin`."""

    def __init__(self, path: Path, remote: Path) -> None:
        self.path = path
        self.remote = remote

    def git(self, *args: str, check: bool = True) -> str:
        return git(self.path, *args, check=check)

    def remote_git(self, *args: str) -> str:
        return git(self.remote, *args)

    def snapshot(self) -> dict:
        return snapshot(self.path, self.remote)

    def read(self, rel: str) -> str:
        return (self.path / rel).read_bytes().decode("utf-8")

    def write(self, rel: str, text: str) -> None:
        (self.path / rel).write_bytes(text.encode("utf-8"))


def proof_text(root: Path, **fields: object) -> str:
    """A proof record that the OpenClaw matrix proved the sources under `root` as they are
    now; `fields` override its keys (`sources=""`: never proven)."""
    record = {"proven": ["2026.4.24", "2026.9.6"], "excluded": {},
              "sources": sources_digest(root), "commit": "0123456789abcdef0123",
              "date": "2026-01-01"}
    record.update(fields)
    return json.dumps(record, indent=2) + "\n"


def prove(repo: Repo) -> None:
    """What renewing the proof does: the matrix stamps the current sources, and that is
    committed (and pushed), so the next release of them may go ahead."""
    commit_file(repo.path, PROOF_FILE, proof_text(repo.path), "chore: OpenClaw proof")
    repo.git("push", "-q")


def make_repo(tmp_path: Path, files=RELEASE_FILES, extra_trees=PACKAGE_TREES,
              proven=True) -> Repo:
    """A temp checkout of `files` (and `extra_trees`) with a bare `origin`; `proven`: its
    plugin sources carry a current OpenClaw proof."""
    repo = tmp_path / "work"
    remote = tmp_path / "remote.git"
    repo.mkdir()
    for rel in files:
        src = MAIN / rel
        dst = repo / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():  # the plugins' bridge.mjs: a link to the one source of the bridge
            dst.symlink_to(os.readlink(src))
        elif src.exists():
            shutil.copyfile(src, dst)
    for rel in extra_trees:
        shutil.copytree(MAIN / rel, repo / rel, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if proven:
        (repo / PROOF_FILE).write_text(proof_text(repo), encoding="utf-8")
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Release Tester")
    git(repo, "config", "user.email", "tester@example.invalid")
    git(repo, "config", "commit.gpgsign", "false")
    git(repo, "config", "tag.gpgsign", "false")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "chore: initial import")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "-u", "origin", "main")
    return Repo(repo, remote)
