"""`release`: refusals, dry run, the real thing, and recovery from a failed step."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from release_fixtures import (
    MAIN,
    PACKAGE_TREES,
    Repo,
    commit_file,
    make_repo,
    proof_text,
    prove,
    task_env,
)

from fleet.release import compatproof
from fleet.release.compatproof import PROOF_FILE
from fleet.release.component import load_project
from fleet.release.cut import run_release
from fleet.release.error import ReleaseError
from fleet.release.progress import PROGRESS_FILE, Progress
from fleet.release.verify import verify

MC_FILES = {"fleet/plugins/mc/openclaw.plugin.json", "fleet/plugins/mc/package.json"}
MC_DIR = "fleet/plugins/mc"
MCONT_DIR = "fleet/plugins/memory_continuity"
MCONT_FILES = {"fleet/plugins/memory_continuity/openclaw.plugin.json",
               "fleet/plugins/memory_continuity/package.json"}


def release(repo: Repo, **kw):
    lines: list[str] = []
    kw.setdefault("today", "2026-01-02")
    result = run_release(repo.path, echo=lines.append, **kw)
    return result, "\n".join(lines)


def versions(repo: Repo) -> dict:
    return verify(load_project(repo.path)).versions


def refuse(repo: Repo, match: str, **kw) -> str:
    """Assert a refusal whose message matches, and that nothing at all changed."""
    before = repo.snapshot()
    with pytest.raises(ReleaseError, match=match) as err:
        release(repo, **kw)
    assert repo.snapshot() == before
    assert "fix" in str(err.value)
    return str(err.value)


def release_commits_on_remote(repo: Repo) -> list:
    log = repo.remote_git("log", "--format=%s", "main")
    return [line for line in log.splitlines() if line.startswith("release: ")]


# --- refusals ----------------------------------------------------------------------------------
def test_refuses_dirty_tree(repo):
    path = "fleet/plugins/mc/package.json"
    repo.write(path, repo.read(path) + "\n")
    msg = refuse(repo, "uncommitted changes", component="mc")
    assert path in msg


def test_untracked_files_do_not_block(repo):
    (repo.path / "notes.txt").write_text("scratch")
    result, _ = release(repo, component="mc", push=False)
    assert "notes.txt" not in repo.git("show", "--name-only", "--format=", "HEAD")
    assert result.commit == repo.git("rev-parse", "HEAD")


@pytest.mark.parametrize("path", ["fleet/plugins/mc/extra.py", "fleet/gateway/new_module.py",
                                  "fleet/plugins/memory_continuity/data/notes.json"])
@pytest.mark.parametrize("ignored", [False, True])
def test_refuses_files_a_build_packs_that_git_does_not_track(repo, path, ignored):
    if ignored:  # .gitignore hides a file from `git status`, not from the build
        commit_file(repo.path, ".gitignore", repo.read(".gitignore") + f"/{path}\n", "ignore")
        repo.git("push", "-q")
    (repo.path / path).parent.mkdir(parents=True, exist_ok=True)
    (repo.path / path).write_text("# not committed\n")
    msg = refuse(repo, "not tracked by git", component="mc")
    assert path in msg and "commit them" in msg and "delete them" in msg
    assert ".gitignore" not in msg


def test_ignored_clutter_the_build_leaves_out_may_stay(repo):
    clutter = ["fleet/plugins/mc/__pycache__/plugin.cpython-311.pyc", "fleet/plugins/mc/x.pyc"]
    for rel in clutter:
        (repo.path / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo.path / rel).write_text("x = 1\n")
    assert repo.git("status", "--porcelain", "--untracked-files=all") == ""  # ignored
    result, _ = release(repo, component="mc", push=False)
    assert result.commit == repo.git("rev-parse", "HEAD")


@pytest.mark.parametrize("path", ["fleet/plugins/mc/tests/test_mc.py", "fleet/gateway/.scratch.py",
                                  "fleet/plugins/mc/notes.tmp", "fleet/release/control_side.py"])
def test_refuses_untracked_files_inside_what_a_component_ships(repo, path):
    """Not packed by the artifact's build, yet inside a component's shipped paths: the tag would
    lack a file that sits beside its sources."""
    (repo.path / path).parent.mkdir(parents=True, exist_ok=True)
    (repo.path / path).write_text("x = 1\n")
    msg = refuse(repo, "inside what a component ships", component="mc")
    assert path in msg and "commit them or delete them" in msg


def test_a_long_list_of_untracked_files_names_a_few_and_counts_the_rest(repo):
    for i in range(8):
        (repo.path / f"fleet/plugins/mc/extra_{i}.py").write_text("x = 1\n")
    msg = refuse(repo, "8 file", component="mc")
    assert "extra_0.py" in msg and "extra_7.py" not in msg and "and 3 more" in msg


def test_refuses_detached_head(repo):
    repo.git("checkout", "-q", "--detach")
    refuse(repo, "HEAD is detached")


def test_refuses_without_a_git_identity_before_changing_anything(repo, tmp_path, monkeypatch):
    repo.git("config", "--unset", "user.name")
    repo.git("config", "--unset", "user.email")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.gitconfig either
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
                 "GIT_COMMITTER_EMAIL", "GIT_CONFIG_GLOBAL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    message = refuse(repo, "git has no identity to author the release commit")
    assert 'git config user.name "Your Name"' in message


def test_refuses_an_explicit_version_npm_would_reject(repo):
    message = refuse(repo, "refusing --version 6", version="6")
    assert "memory_continuity/openclaw.plugin.json `version` would hold it, and it is not " \
           "semver 2.0" in message


def test_refuses_disagreeing_versions(repo):
    path = "fleet/plugins/mc/package.json"
    data = json.loads(repo.read(path))
    data["version"] = "2.0.9"
    commit_file(repo.path, path, json.dumps(data, indent=2) + "\n", "chore: drift")
    repo.git("push", "-q")
    msg = refuse(repo, "disagree", component="mc")
    assert path in msg and "2.0.9" in msg


def test_refuses_version_not_greater(repo):
    current = versions(repo)["memory-continuity"]
    refuse(repo, "not greater", version=current)


def test_refuses_unknown_component(repo):
    with pytest.raises(ReleaseError, match="unknown component 'nope'.*mc"):
        release(repo, component="nope")


def test_refuses_tag_existing_locally(repo):
    new = "9.0.0"
    repo.git("tag", f"mc-v{new}")
    refuse(repo, f"tag mc-v{new} already exists locally", component="mc", version=new)


def test_refuses_tag_existing_only_on_remote(repo):
    repo.git("tag", "v9.0.0")
    repo.git("push", "-q", "origin", "v9.0.0")
    repo.git("tag", "-d", "v9.0.0")
    refuse(repo, "tag v9.0.0 already exists on remote origin", version="9.0.0")


def test_refuses_unreachable_remote_unless_no_push(repo, tmp_path):
    repo.git("remote", "set-url", "origin", str(tmp_path / "missing.git"))
    refuse(repo, "cannot check tag .* on remote origin", component="mc")
    result, out = release(repo, component="mc", push=False)
    assert "warning: cannot check tag" in out and result.commit and not result.pushed


def test_refuses_a_bump_that_breaks_a_dependency_rule(repo):
    path = "fleet/plugins/mc/openclaw.plugin.json"
    text = repo.read(path).replace('"memory-continuity"', '"memory-continuity<6"')
    commit_file(repo.path, path, text, "chore: pin")
    refuse(repo, "break a dependency rule", part="major")


# --- dry run -----------------------------------------------------------------------------------
def test_dry_run_prints_everything_and_changes_nothing(repo):
    current = versions(repo)["mc"]
    before = repo.snapshot()
    result, out = release(repo, component="mc", part="minor", dry_run=True)
    assert repo.snapshot() == before
    assert result.dry_run and result.commit is None
    for path in MC_FILES | {"CHANGELOG.md"}:
        assert f"+++ b/{path}" in out
    assert f'-  "version": "{current}",' in out
    assert f'+  "version": "{result.version}",' in out
    assert f"commit: 'release: mc v{result.version}'" in out
    assert f"tag: mc-v{result.version} (annotated" in out
    assert f"push: git push --atomic origin refs/heads/main:refs/heads/main " \
           f"refs/tags/mc-v{result.version}" in out


# --- the release -------------------------------------------------------------------------------
def test_release_bumps_every_file_of_the_component_and_nothing_else(repo):
    base = repo.git("rev-parse", "HEAD")
    old = {p: repo.read(p) for p in MCONT_FILES}
    current = versions(repo)["memory-continuity"]
    result, _ = release(repo, part="minor")
    assert result.version != current and result.tag == f"v{result.version}"
    changed = set(repo.git("diff", "--name-only", base, "HEAD").splitlines())
    assert changed == MCONT_FILES | {"CHANGELOG.md"}
    for path in MCONT_FILES:
        assert repo.read(path) == old[path].replace(f'"version": "{current}"',
                                                    f'"version": "{result.version}"', 1)
    new_versions = versions(repo)
    assert new_versions["memory-continuity"] == result.version
    assert repo.git("log", "-1", "--format=%s") == f"release: memory-continuity v{result.version}"
    assert repo.git("cat-file", "-t", result.tag) == "tag"  # annotated
    assert repo.git("rev-parse", f"{result.tag}^{{commit}}") == result.commit
    assert repo.remote_git("rev-parse", "main") == result.commit
    assert repo.remote_git("rev-parse", f"{result.tag}^{{commit}}") == result.commit
    assert repo.git("status", "--porcelain") == ""
    assert not (repo.path / ".git" / PROGRESS_FILE).exists()


def test_other_components_tag_with_their_name(repo):
    result, _ = release(repo, component="fleet", part="patch", push=False)
    assert result.tag == f"fleet-v{result.version}"
    changed = set(repo.git("show", "--name-only", "--format=", "HEAD").splitlines())
    assert changed == {"pyproject.toml", "fleet/__init__.py", "CHANGELOG.md"}
    assert f'__version__ = "{result.version}"' in repo.read("fleet/__init__.py")
    assert repo.remote_git("tag", "--list") == ""  # --no-push


def test_changelog_holds_commits_since_the_previous_tag_only(repo):
    commit_file(repo.path, f"{MC_DIR}/a.txt", "a", "feat: before the first release")
    prove(repo)
    first, _ = release(repo, component="mc")
    commit_file(repo.path, f"{MC_DIR}/b.txt", "b", "feat(mc): new command")
    commit_file(repo.path, f"{MC_DIR}/c.txt", "c", "fix: a bug")
    commit_file(repo.path, f"{MC_DIR}/d.txt", "d", "docs: words")
    prove(repo)
    second, _ = release(repo, component="mc")
    log = repo.read("CHANGELOG.md")
    top = log[log.index(f"## mc {second.version}"):log.index(f"## mc {first.version}")]
    assert f"Changes since mc-v{first.version}." in top
    assert "### Features" in top and "**mc:** new command" in top
    assert top.index("### Fixes") < top.index("a bug") < top.index("### Other") < top.index("docs")
    assert "before the first release" not in top
    assert "before the first release" in log[log.index(f"## mc {first.version}"):]
    assert log.startswith("# Changelog\n")


def section_of(log: str, heading: str) -> str:
    """The text of one changelog section, from its heading to the next `## `."""
    start = log.index(heading)
    end = log.find("\n## ", start + 1)
    return log[start:] if end < 0 else log[start:end]


def test_each_component_lists_only_the_commits_touching_what_it_ships(repo):
    commit_file(repo.path, f"{MC_DIR}/cmd.py", "x", "feat(mc): /mc doctor")
    commit_file(repo.path, f"{MCONT_DIR}/hook.py", "y", "fix: keep child output as data")
    commit_file(repo.path, "README.md", "z", "docs: readme only")
    repo.git("add", f"{MC_DIR}/cmd.py")
    (repo.path / MC_DIR / "cmd.py").write_text("x2")
    (repo.path / MCONT_DIR / "hook.py").write_text("y2")
    repo.git("commit", "-qam", "feat: touches both plugins")
    prove(repo)
    mc, _ = release(repo, component="mc")
    log = repo.read("CHANGELOG.md")
    mc_section = section_of(log, f"## mc {mc.version}")
    assert "/mc doctor" in mc_section and "touches both plugins" in mc_section
    assert "keep child output" not in mc_section and "readme only" not in mc_section
    assert "initial import" in mc_section  # the first release lists the import of its files
    mcont, _ = release(repo, component="memory-continuity")
    mcont_section = section_of(repo.read("CHANGELOG.md"), f"## memory-continuity {mcont.version}")
    assert "keep child output" in mcont_section and "touches both plugins" in mcont_section
    assert "/mc doctor" not in mcont_section and "readme only" not in mcont_section


def test_components_released_together_get_one_commit_and_one_tag(repo):
    base = repo.git("rev-parse", "HEAD")
    before = versions(repo)
    commit_file(repo.path, f"{MC_DIR}/cmd.py", "x", "feat(mc): /mc doctor")
    commit_file(repo.path, f"{MCONT_DIR}/hook.py", "y", "fix: recovery")
    prove(repo)
    result, out = release(repo, component=["mc", "memory-continuity"], part="minor")
    after = versions(repo)
    assert result.versions == {"memory-continuity": after["memory-continuity"],
                               "mc": after["mc"]}
    assert after["fleet"] == before["fleet"]
    assert after["mc"] != before["mc"] and after["memory-continuity"] != before["memory-continuity"]
    subject = f"release: memory-continuity v{after['memory-continuity']}, mc v{after['mc']}"
    assert repo.git("log", "-1", "--format=%s") == subject
    # two work commits, the proof, the release
    assert repo.git("rev-list", "--count", f"{base}..HEAD") == "4"
    assert result.tag == f"v{after['memory-continuity']}"  # the main component's tag
    assert repo.git("tag", "--list") == result.tag
    assert repo.remote_git("tag", "--list") == result.tag
    assert repo.git("for-each-ref", "--format=%(contents:subject)", f"refs/tags/{result.tag}") \
        == subject
    changed = set(repo.git("show", "--name-only", "--format=", "HEAD").splitlines())
    assert changed == MC_FILES | MCONT_FILES | {"CHANGELOG.md"}
    log = repo.read("CHANGELOG.md")
    mcont_section = section_of(log, f"## memory-continuity {after['memory-continuity']}")
    mc_section = section_of(log, f"## mc {after['mc']}")
    assert "recovery" in mcont_section and "/mc doctor" not in mcont_section
    assert "/mc doctor" in mc_section and "recovery" not in mc_section
    assert log.index("## memory-continuity") < log.index("## mc ")
    # the next mc release finds the joint tag as its previous release
    commit_file(repo.path, f"{MC_DIR}/later.py", "z", "fix(mc): later")
    prove(repo)
    nxt, _ = release(repo, component="mc")
    top = section_of(repo.read("CHANGELOG.md"), f"## mc {nxt.version}")
    assert f"Changes since {result.tag}." in top
    assert "later" in top and "/mc doctor" not in top


def before_major(repo: Repo) -> str:
    return versions(repo)["memory-continuity"].split(".")[0]


def test_joint_dry_run_and_explicit_versions(repo):
    before = repo.snapshot()
    result, out = release(repo, component=["memory-continuity", "mc"],
                          version=["memory-continuity=6.0.0", "mc=3.0.0"], dry_run=True)
    assert repo.snapshot() == before
    assert result.versions == {"memory-continuity": "6.0.0", "mc": "3.0.0"}
    for path in MC_FILES | MCONT_FILES | {"CHANGELOG.md"}:
        assert f"+++ b/{path}" in out
    assert "commit: 'release: memory-continuity v6.0.0, mc v3.0.0'" in out
    assert "tag: v6.0.0 (annotated" in out
    # --part bumps the components without an explicit version
    result, _ = release(repo, component=["memory-continuity", "mc"], part="major",
                        version=["mc=3.0.0"], dry_run=True)
    assert result.versions["mc"] == "3.0.0"
    assert result.versions["memory-continuity"] == f"{int(before_major(repo)) + 1}.0.0"
    # --version id=X alone selects the component
    result, _ = release(repo, version=["mc=3.0.0"], dry_run=True)
    assert result.versions == {"mc": "3.0.0"} and result.tag == "mc-v3.0.0"


def test_joint_release_refusals_change_nothing(repo):
    mc = versions(repo)["mc"]
    refuse(repo, "--version <component>=<version>", component=["mc", "memory-continuity"],
           version="9.0.0")
    refuse(repo, "not among the components", component=["mc"], version=["memory-continuity=9.0"])
    refuse(repo, "not greater", component=["mc", "memory-continuity"],
           version=[f"mc={mc}", "memory-continuity=9.0.0"])
    repo.git("tag", "mc-v2.9.0")  # a component's own tag for the new version already exists
    refuse(repo, "tag mc-v2.9.0 already exists locally", component=["memory-continuity", "mc"],
           version=["mc=2.9.0", "memory-continuity=9.0.0"])


def test_joint_release_resumes_after_a_failed_push(repo):
    reject_pushes(repo)
    with pytest.raises(ReleaseError, match=r"release of memory-continuity v\S+ \+ mc v\S+ "
                                           r"stopped at step 'push'"):
        release(repo, component=["memory-continuity", "mc"])
    with pytest.raises(ReleaseError, match="unfinished release of memory-continuity"):
        release(repo, component="mc")
    (repo.remote / "hooks" / "pre-receive").unlink()
    result, _ = release(repo, resume=True)
    assert result.pushed and set(result.versions) == {"memory-continuity", "mc"}
    assert len(release_commits_on_remote(repo)) == 1
    assert repo.remote_git("tag", "--list") == result.tag


def test_an_old_single_component_progress_record_still_resumes(repo):
    reject_pushes(repo)
    with pytest.raises(ReleaseError):
        release(repo, component="mc")
    path = repo.path / ".git" / PROGRESS_FILE
    data = json.loads(path.read_text())
    versions_ = data.pop("versions")
    (cid, ver), = versions_.items()
    data.update(component=cid, version=ver, previous=data.pop("previous")[cid])
    path.write_text(json.dumps(data))
    (repo.remote / "hooks" / "pre-receive").unlink()
    result, _ = release(repo, resume=True)
    assert result.pushed and result.versions == {"mc": ver}


# --- failures and --resume ---------------------------------------------------------------------
def reject_pushes(repo: Repo) -> None:
    hook = repo.remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'rejected by test hook' >&2\nexit 1\n")
    hook.chmod(0o755)


def test_failed_push_then_resume_gives_one_commit_and_one_tag(repo):
    reject_pushes(repo)
    with pytest.raises(ReleaseError) as err:
        release(repo, component="mc")
    msg = str(err.value)
    assert "stopped at step 'push'" in msg and "invoke release --resume" in msg
    assert "rejected by test hook" in msg
    progress = Progress.load(repo.path / ".git" / PROGRESS_FILE)
    assert progress.failed_step == "push" and progress.done == ["files", "commit", "tag",
                                                                      "packages"]
    assert release_commits_on_remote(repo) == []
    # a plain rerun must refuse instead of making a second commit or tag
    before = repo.snapshot()
    with pytest.raises(ReleaseError, match=r"(?s)unfinished release of mc .*--resume"):
        release(repo, component="mc")
    assert repo.snapshot() == before
    (repo.remote / "hooks" / "pre-receive").unlink()
    result, out = release(repo, resume=True)
    assert result.pushed and "resuming" in out
    assert release_commits_on_remote(repo) == [f"release: mc v{result.version}"]
    assert repo.remote_git("tag", "--list") == f"mc-v{result.version}"
    assert repo.remote_git("rev-parse", "main") == repo.git("rev-parse", "HEAD") == result.commit
    assert len([s for s in repo.git("log", "--format=%s").splitlines()
                if s.startswith("release:")]) == 1
    assert not (repo.path / ".git" / PROGRESS_FILE).exists()
    with pytest.raises(ReleaseError, match="nothing to resume"):
        release(repo, resume=True)


def test_crash_after_commit_is_adopted_on_resume(repo, monkeypatch):
    real_mark = Progress.mark

    def crash_on_commit(self, step):
        if step == "commit":
            raise OSError("disk full (simulated)")
        real_mark(self, step)

    monkeypatch.setattr(Progress, "mark", crash_on_commit)
    with pytest.raises(ReleaseError, match=r"(?s)stopped at step 'commit'.*disk full"):
        release(repo, component="mc")
    monkeypatch.setattr(Progress, "mark", real_mark)
    head = repo.git("rev-parse", "HEAD")
    result, _ = release(repo, resume=True)
    assert result.commit == head
    assert repo.git("rev-parse", "HEAD~1") == repo.remote_git("rev-parse", "main~1")
    assert release_commits_on_remote(repo) == [f"release: mc v{result.version}"]


def test_resume_refuses_extra_options_and_other_branches(repo):
    reject_pushes(repo)
    with pytest.raises(ReleaseError):
        release(repo, component="mc")
    with pytest.raises(ReleaseError, match="drop --component/--part/--version"):
        release(repo, resume=True, part="minor")
    repo.git("checkout", "-q", "-b", "other")
    with pytest.raises(ReleaseError, match="git switch main"):
        release(repo, resume=True)


# --- the task ----------------------------------------------------------------------------------
def run_task(repo: Repo, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", "-r", str(MAIN), "release", *args],
                          cwd=repo.path, capture_output=True, text=True, timeout=120,
                          env=task_env())


def test_task_dry_run_and_refusal_exit_codes(repo):
    before = repo.snapshot()
    proc = run_task(repo, "--component", "mc", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "DRY RUN" in proc.stdout and "+++ b/CHANGELOG.md" in proc.stdout
    assert repo.snapshot() == before
    current = versions(repo)["mc"]
    proc = run_task(repo, "--component", "mc", "--version", current)
    assert proc.returncode == 1
    assert "not greater" in proc.stderr


def test_task_refuses_a_lower_semver_pre_release_in_the_files_form(repo):
    for name in ("package.json", "openclaw.plugin.json"):
        rel = f"{MC_DIR}/{name}"
        data = json.loads(repo.read(rel))
        data["version"] = "5.1.0-dev.1"
        commit_file(repo.path, rel, json.dumps(data, indent=2) + "\n", f"mc {name} dev")
    repo.git("push", "-q")
    before = repo.snapshot()
    proc = run_task(repo, "-c", "mc", "--version", "5.1.0-alpha.1")
    assert proc.returncode == 1, proc.stdout
    assert "new version 5.1.0-alpha.1 is not greater than the current 5.1.0-dev.1" in proc.stderr
    assert "('alpha' < 'dev')" in proc.stderr and "build metadata" not in proc.stderr
    assert repo.snapshot() == before


def test_task_refuses_an_ignored_file_a_build_would_pack_then_builds_clean(tmp_path):
    repo = make_repo(tmp_path, extra_trees=(*PACKAGE_TREES, "fleet/installer"))
    commit_file(repo.path, ".gitignore", repo.read(".gitignore") + "*.local.json\n",
                "chore: ignore local settings")
    repo.git("push", "-q")
    local = f"{MC_DIR}/settings.local.json"
    (repo.path / local).write_text('{"token": "mine"}\n')
    assert repo.git("status", "--porcelain") == ""  # invisible to git status
    before = repo.snapshot()
    proc = run_task(repo, "-c", "mc", "--no-push")
    assert proc.returncode == 1, proc.stdout
    assert local in proc.stderr and "not tracked by git" in proc.stderr
    assert "delete them" in proc.stderr and ".gitignore" not in proc.stderr
    assert repo.snapshot() == before
    (repo.path / local).unlink()
    proc = run_task(repo, "-c", "mc", "--no-push")
    assert proc.returncode == 0, proc.stderr
    build = subprocess.run([sys.executable, "-m", "invoke", "-r", str(MAIN), "build", "--json"],
                           cwd=repo.path, capture_output=True, text=True, timeout=120,
                           env=task_env())
    assert build.returncode == 0, build.stderr
    version = json.loads(build.stdout)["artifact"]["version"]
    assert "+" not in version and version == versions(repo)["memory-continuity"]


def test_task_releases_several_components_with_repeated_c(repo):
    proc = run_task(repo, "-c", "memory-continuity", "-c", "mc", "--part", "minor", "--no-push")
    assert proc.returncode == 0, proc.stderr
    after = versions(repo)
    assert f"released memory-continuity v{after['memory-continuity']} + mc v{after['mc']}" \
        in proc.stdout
    assert repo.git("tag", "--list") == f"v{after['memory-continuity']}"


def test_task_failure_prints_the_resume_command(repo):
    reject_pushes(repo)
    proc = run_task(repo, "--component", "mc")
    assert proc.returncode == 1
    assert "invoke release --resume" in proc.stderr
    (repo.remote / "hooks" / "pre-receive").unlink()
    proc = run_task(repo, "--resume")
    assert proc.returncode == 0, proc.stderr
    assert len(release_commits_on_remote(repo)) == 1


def test_refuses_when_the_remote_branch_is_ahead(repo, tmp_path):
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(repo.remote), str(other)], check=True, timeout=60)
    for args in (("config", "user.email", "o@example.invalid"), ("config", "user.name", "O")):
        subprocess.run(["git", *args], cwd=other, check=True, timeout=30)
    commit_file(other, "x.txt", "x", "feat: elsewhere")
    subprocess.run(["git", "push", "-q"], cwd=other, check=True, timeout=60)
    refuse(repo, "has commits that main lacks", component="mc")
    result, _ = release(repo, component="mc", push=False)  # a local-only release is still fine
    assert result.commit and not result.pushed


def test_a_concurrent_release_cannot_start(repo, monkeypatch):
    """Another process creating the progress record between our preflight and our start wins."""
    from fleet.release import cut

    real_preflight = cut.preflight

    def racing_preflight(*args, **kw):
        plan = real_preflight(*args, **kw)
        (repo.path / ".git" / PROGRESS_FILE).write_text("{}")
        return plan

    monkeypatch.setattr(cut, "preflight", racing_preflight)
    with pytest.raises(ReleaseError, match="another release is in progress"):
        release(repo, component="mc")
    assert repo.git("log", "-1", "--format=%s") == "chore: initial import"
    assert repo.git("status", "--porcelain") == ""


# --- the OpenClaw proof --------------------------------------------------------------------------
STALE_LINE = ("OpenClaw compatibility: not proven for these sources (last proven on 0123456789ab, "
              "2026-01-01); released with --allow-unproven")


def change_plugin_code(repo: Repo) -> None:
    """A commit (pushed) that changes plugin code after the OpenClaw matrix proved it."""
    commit_file(repo.path, f"{MC_DIR}/commands_new.py", "X = 1\n", "feat(mc): a new command")
    repo.git("push", "-q")


@pytest.mark.parametrize("component", ["mc", "memory-continuity", "fleet"])
def test_refuses_plugin_sources_changed_since_the_proof(repo, component):
    change_plugin_code(repo)
    message = refuse(repo, "its OpenClaw compatibility is not proven: stale since "
                     r"0123456789ab \(2026-01-01\)", component=component)
    assert "the plugins or the continuity core changed" in message
    assert ("`git diff --stat 0123456789ab -- fleet/continuity fleet/plugins "
            "fleet/gateway/worker.py") in message
    assert "fix: `invoke openclaw.compat --versions all` (it writes docs/compat.md and " \
           "fleet/plugins/openclaw-proven.json), commit both, release again; or release with " \
           "--allow-unproven" in message


def test_refuses_sources_never_proven(repo):
    commit_file(repo.path, PROOF_FILE, proof_text(repo.path, sources="", commit="", date=""),
                "chore: no proof yet")
    refuse(repo, r"not proven: never proven \(fleet/plugins/openclaw-proven.json has no "
           "`sources`\\)", component=["memory-continuity", "mc"])
    repo.git("rm", "-q", PROOF_FILE)
    repo.git("commit", "-qm", "chore: the proof is gone")
    refuse(repo, r"never proven \(no fleet/plugins/openclaw-proven.json\)")


def test_refuses_a_malformed_proof_naming_the_key(repo):
    commit_file(repo.path, PROOF_FILE, proof_text(repo.path, date="yesterday"), "chore: bad")
    refuse(repo, f"{PROOF_FILE}: `date` 'yesterday' is not a day", component="mc")


def test_a_proven_release_goes_ahead_and_stays_proven(repo):
    result, out = release(repo, component=["memory-continuity", "mc"], part="minor")
    assert "OpenClaw proof: current: proven on OpenClaw 2026.4.24, 2026.9.6 at 0123456789ab " \
           "(2026-01-01)" in out
    assert result.commit == repo.git("rev-parse", "HEAD")
    assert "OpenClaw compatibility" not in repo.read("CHANGELOG.md")
    # the release bumped every plugin version: the same sources are still the proven ones
    assert compatproof.verdict(repo.path).current


def test_allow_unproven_releases_and_says_so_in_the_changelog(repo):
    change_plugin_code(repo)
    result, out = release(repo, component=["memory-continuity", "mc"], allow_unproven=True)
    assert result.pushed and repo.remote_git("tag", "--list") == result.tag
    assert "going ahead with --allow-unproven, the changelog of memory-continuity, mc says so" \
        in out
    log = repo.git("show", "HEAD:CHANGELOG.md")
    for cid, ver in result.versions.items():
        section = section_of(log, f"## {cid} {ver}")
        assert section.count(STALE_LINE) == 1, section
    # with a current proof the flag changes nothing
    prove(repo)
    again, _ = release(repo, component="mc", allow_unproven=True)
    assert "OpenClaw compatibility" not in section_of(repo.read("CHANGELOG.md"),
                                                      f"## mc {again.version}")


def test_dry_run_reports_the_proof(repo):
    before = repo.snapshot()
    _, out = release(repo, component="mc", dry_run=True)
    assert repo.snapshot() == before
    assert "OpenClaw proof: current: proven on OpenClaw 2026.4.24, 2026.9.6" in out
    change_plugin_code(repo)
    before = repo.snapshot()
    _, out = release(repo, component="mc", dry_run=True, allow_unproven=True)
    assert repo.snapshot() == before
    assert "OpenClaw proof: stale since 0123456789ab (2026-01-01)" in out
    assert "going ahead with --allow-unproven" in out
    assert f"+{STALE_LINE}" in out  # in the changelog diff
    refuse(repo, "not proven: stale since", component="mc", dry_run=True)


def test_resume_keeps_the_decision_made_at_the_start(repo):
    change_plugin_code(repo)
    reject_pushes(repo)
    with pytest.raises(ReleaseError, match="stopped at step 'push'"):
        release(repo, component="mc", allow_unproven=True)
    (repo.remote / "hooks" / "pre-receive").unlink()
    _, out = release(repo, resume=True, dry_run=True)
    assert "going ahead with --allow-unproven" in out and "decided when the release started" \
        in out
    result, out = release(repo, resume=True)  # no --allow-unproven: the start decided
    assert result.pushed and "decided when the release started" in out
    assert STALE_LINE in repo.remote_git("show", "main:CHANGELOG.md")
    assert len(release_commits_on_remote(repo)) == 1


def test_the_proof_does_not_concern_a_component_without_plugin_code(repo):
    text = repo.read("pyproject.toml") + (
        '\n[tool.fleet.components.docs]\nfiles = ["docs/version.json:version"]\n'
        'ships = ["docs"]\n')
    commit_file(repo.path, "docs/version.json", '{"version": "1.0.0"}\n', "docs: versioned")
    commit_file(repo.path, "pyproject.toml", text, "chore: a docs component")
    change_plugin_code(repo)
    result, out = release(repo, component="docs")
    assert result.tag == "docs-v1.0.1"
    assert "OpenClaw proof: does not apply (docs ship no plugin or continuity code)" in out
    refuse(repo, "not proven", component=["docs", "mc"])


def test_task_refuses_unproven_sources_unless_allowed(repo):
    change_plugin_code(repo)
    proc = run_task(repo, "-c", "mc", "--no-push")
    assert proc.returncode == 1
    assert "not proven: stale since" in proc.stderr and "--allow-unproven" in proc.stderr
    proc = run_task(repo, "-c", "mc", "--no-push", "--allow-unproven")
    assert proc.returncode == 0, proc.stderr
    assert STALE_LINE in repo.read("CHANGELOG.md")


HOSTILE = "[link=http://evil.example]x[/link]\x1b]0;pwned\x07\x1b[2J\u202e"
SHOWN = r"[link=http://evil.example]x[/link]\x1b]0;pwned\x07\x1b[2J\u202e"


def test_task_shows_the_checkouts_text_escaped(repo):
    """The files a release rewrites are anyone's text: a dry run's diff quoting a changelog
    line, and a refusal quoting a version file, reach the terminal escaped."""
    text = repo.read("CHANGELOG.md")
    cut = text.index("\n## ") + 1 if "\n## " in text else len(text)
    commit_file(repo.path, "CHANGELOG.md", f"{text[:cut]}{HOSTILE}\n{text[cut:]}",
                "a contributor's changelog line")
    proc = run_task(repo, "--component", "mc", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert not any(char in proc.stdout + proc.stderr for char in "\x1b\x07\u202e"), proc.stdout
    assert f" {SHOWN}\n" in proc.stdout  # a context line of the changelog's diff

    rel = "fleet/plugins/mc/package.json"
    data = json.loads(repo.read(rel))
    commit_file(repo.path, rel, json.dumps({**data, "version": HOSTILE}, indent=2) + "\n",
                "a contributor's version")
    proc = run_task(repo, "--component", "mc", "--dry-run")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not any(char in proc.stdout + proc.stderr for char in "\x1b\x07\u202e"), proc.stderr
    assert SHOWN in proc.stderr
