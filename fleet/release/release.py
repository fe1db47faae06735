"""`invoke release` as a Python API: preflight, plan, then resumable steps.

Steps: files, commit, tag, push.

Every refusal happens before the first change. Once changes start, each step is recorded in the
journal (`.git/fleet-release.json`); a failure says where it stopped and prints the one command that
finishes the job (`invoke release --resume`), which never makes a second commit or tag.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from packaging.version import Version

from fleet.release import changelog
from fleet.release.bump import next_version
from fleet.release.component import Component, Project, load_project
from fleet.release.error import ReleaseError
from fleet.release.git import Git, GitError
from fleet.release.plan import Plan, commit_message, file_changes, write_text
from fleet.release.state import JOURNAL_NAME, RESUME_COMMAND, Journal
from fleet.release.verify import dependency_problems, verify

Echo = Callable[[str], None]


@dataclass
class ReleaseResult:
    """What a release did (or, with dry_run, would do)."""

    component: str
    version: str
    tag: str
    commit: Optional[str]
    pushed: bool
    dry_run: bool
    plan: Optional[Plan] = None


def run_release(root: Path, component: Optional[str] = None, part: Optional[str] = None,
                version: Optional[str] = None, dry_run: bool = False, push: bool = True,
                resume: bool = False, echo: Echo = print,
                today: Optional[str] = None) -> ReleaseResult:
    """Release `component` (default: the main one); raises ReleaseError with reason and fix."""
    root = Path(root)
    project = load_project(root)
    git = Git(root)
    journal_path = git.git_dir() / JOURNAL_NAME
    journal = Journal.load(journal_path)
    if resume:
        if journal is None:
            raise ReleaseError(f"nothing to resume: no unfinished release is recorded in "
                               f"{journal_path}")
        if part or version or (component and component != journal.component):
            raise ReleaseError(f"--resume finishes the recorded release of {journal.component} "
                               f"v{journal.version}; drop --component/--part/--version")
        if not push:
            journal.push = False
        return _resume(git, project, journal, dry_run, echo)
    if journal is not None:
        where = f"stopped at step '{journal.failed_step}': {journal.error}" \
            if journal.failed_step else f"steps done: {', '.join(journal.done) or 'none'}"
        raise ReleaseError(f"an unfinished release of {journal.component} v{journal.version} is "
                           f"recorded in {journal_path} ({where}); fix: finish it with "
                           f"`{RESUME_COMMAND}` before starting another")
    plan = preflight(git, project, component, part, version, push, echo, today)
    if dry_run:
        echo("DRY RUN: nothing is changed")
        echo(plan.describe())
        return ReleaseResult(plan.component, plan.version, plan.tag, None, False, True, plan)
    journal = Journal(component=plan.component, version=plan.version, previous=plan.previous,
                      tag=plan.tag, branch=plan.branch, base=plan.base, files=plan.paths,
                      changelog_section=plan.changelog_section, push=plan.push,
                      remote=plan.remote, path=journal_path)
    journal.claim()
    return _execute(git, project, journal, echo, plan)


def pick_remote(git: Git, branch: str) -> Optional[str]:
    """The branch's upstream remote, else `origin`, else the only remote, else None."""
    remotes = git.remotes()
    upstream = git.upstream_remote(branch)
    if upstream and upstream in remotes:
        return upstream
    if "origin" in remotes:
        return "origin"
    return remotes[0] if len(remotes) == 1 else None


def previous_tag(git: Git, comp: Component) -> Optional[str]:
    """The highest-versioned tag of this component reachable from HEAD."""
    best: Optional[tuple[Version, str]] = None
    for tag in git.tags(comp.tag_glob()):
        raw = comp.tag_version(tag)
        try:
            ver = Version(raw) if raw else None
        except ValueError:
            ver = None
        if ver is not None and (best is None or ver > best[0]):
            best = (ver, tag)
    return best[1] if best else None


def preflight(git: Git, project: Project, component: Optional[str], part: Optional[str],
              version: Optional[str], push: bool, echo: Echo,
              today: Optional[str] = None) -> Plan:
    """Every refusal (with reason and fix), then the plan; changes nothing."""
    comp = project.component(component)
    branch = git.branch()
    if branch is None:
        raise ReleaseError("refusing to release: HEAD is detached; fix: `git switch <branch>` "
                           "to the branch the release belongs on")
    dirty = git.dirty_paths()
    if dirty:
        raise ReleaseError("refusing to release: the working tree has uncommitted changes in "
                           f"{', '.join(dirty)}; fix: commit or stash them first")
    report = verify(project)
    report.raise_for_problems("refusing to release")
    current = report.versions[comp.id]
    new = next_version(current, part, version)
    after = dependency_problems(project, {**report.versions, comp.id: new})
    if after:
        raise ReleaseError(f"refusing to release {comp.id} {new}: it would break a dependency "
                           "rule:\n" + "\n".join(f"  - {p}" for p in after))
    tag = comp.tag(new)
    local = git.tag_target(tag)
    if local:
        raise ReleaseError(f"refusing to release: tag {tag} already exists locally (on "
                           f"{local[:12]}); fix: pick a higher version, or delete a stale tag "
                           f"with `git tag -d {tag}`")
    remote = pick_remote(git, branch)
    if remote:
        _check_remote(git, remote, branch, tag, push, echo)
    prev_tag = previous_tag(git, comp)
    date = today or datetime.now(timezone.utc).date().isoformat()
    section = changelog.section(comp.id, new, git.log_subjects(prev_tag), date, prev_tag)
    changes = file_changes(project, comp, new, section)
    return Plan(component=comp.id, previous=current, version=new, tag=tag, branch=branch,
                base=git.head(), remote=remote, push=push, previous_tag=prev_tag,
                changelog_section=section, changes=changes)


def _check_remote(git: Git, remote: str, branch: str, tag: str, push: bool, echo: Echo) -> None:
    """Refuse when the tag is already on the remote, or (when pushing) the remote branch has
    commits we lack, which would make the push fail after the commit and tag are made."""
    tag_ref, branch_ref = f"refs/tags/{tag}", f"refs/heads/{branch}"
    try:
        refs = git.remote_refs(remote, tag_ref, branch_ref)
    except GitError as exc:
        if push:
            raise ReleaseError(f"refusing to release: cannot check tag {tag} on remote "
                               f"{remote}: {exc}; fix: check the remote and the network, or "
                               "release with --no-push and push later") from exc
        echo(f"warning: cannot check tag {tag} on remote {remote} ({exc}); continuing "
             "because of --no-push")
        return
    if tag_ref in refs:
        raise ReleaseError(f"refusing to release: tag {tag} already exists on remote "
                           f"{remote} ({refs[tag_ref][:12]}); fix: pick a higher version")
    ahead = refs.get(branch_ref)
    if push and ahead and not git.is_ancestor(ahead, "HEAD"):
        raise ReleaseError(f"refusing to release: {remote}/{branch} ({ahead[:12]}) has commits "
                           f"that {branch} lacks, so the push would be rejected; fix: "
                           f"`git pull --rebase {remote} {branch}`, then release")


def _resume(git: Git, project: Project, journal: Journal, dry_run: bool,
            echo: Echo) -> ReleaseResult:
    branch = git.branch()
    if branch != journal.branch:
        raise ReleaseError(f"cannot resume: the release of {journal.component} v{journal.version}"
                           f" was started on branch {journal.branch}, HEAD is on "
                           f"{branch or 'a detached HEAD'}; fix: `git switch {journal.branch}`")
    stray = [p for p in git.dirty_paths() if p not in journal.files]
    if stray:
        raise ReleaseError(f"cannot resume: uncommitted changes outside the release files: "
                           f"{', '.join(stray)}; fix: commit or stash them first")
    if dry_run:
        echo(f"DRY RUN: resume the release of {journal.component} v{journal.version}; "
             f"steps left: {', '.join(journal.pending()) or 'none'}")
        return ReleaseResult(journal.component, journal.version, journal.tag, journal.commit,
                             False, True)
    echo(f"resuming the release of {journal.component} v{journal.version} "
         f"(done: {', '.join(journal.done) or 'nothing'})")
    return _execute(git, project, journal, echo, None)


def _execute(git: Git, project: Project, journal: Journal, echo: Echo,
             plan: Optional[Plan]) -> ReleaseResult:
    comp = project.component(journal.component)
    message = commit_message(journal.component, journal.version)
    step = "files"
    try:
        if "files" not in journal.done:
            changes = plan.changes if plan else file_changes(
                project, comp, journal.version, journal.changelog_section)
            for change in changes:
                if change.new != change.old:
                    write_text(Path(project.root) / change.path, change.new)
            journal.mark("files")
            echo(f"wrote version {journal.version} into {', '.join(journal.files)}")
        step = "commit"
        if "commit" not in journal.done:
            journal.commit = _commit(git, journal, message)
            journal.mark("commit")
            echo(f"committed {journal.commit[:12]} {message!r}")
        step = "tag"
        if "tag" not in journal.done:
            existing = git.tag_target(journal.tag)
            if existing is None:
                git.annotated_tag(journal.tag, message, journal.commit)
            elif existing != journal.commit:
                raise ReleaseError(f"tag {journal.tag} already exists on {existing[:12]}, not on "
                                   f"the release commit {journal.commit[:12]}; delete it with "
                                   f"`git tag -d {journal.tag}` if it is stale")
            journal.mark("tag")
            echo(f"tagged {journal.tag}")
        step = "push"
        pushed = False
        if "push" not in journal.done:
            if journal.push and journal.remote:
                git.push(journal.remote, journal.branch, journal.tag)
                pushed = True
                echo(f"pushed {journal.branch} and {journal.tag} to {journal.remote}")
            elif not journal.remote:
                echo("no remote configured: nothing pushed")
            else:
                echo(f"not pushed (--no-push); later: git push --atomic {journal.remote} "
                     f"{journal.branch} {journal.tag}")
            journal.mark("push")
    except (ReleaseError, OSError) as exc:
        journal.fail(step, str(exc))
        done = ", ".join(journal.done) or "nothing"
        raise ReleaseError(f"release of {journal.component} v{journal.version} stopped at step "
                           f"'{step}': {exc}\ndone so far: {done} (recorded in {journal.path})\n"
                           f"fix the cause, then finish it with: {RESUME_COMMAND}") from exc
    journal.delete()
    echo(f"released {journal.component} v{journal.version} ({journal.tag})")
    return ReleaseResult(journal.component, journal.version, journal.tag, journal.commit,
                         pushed, False, plan)


def _commit(git: Git, journal: Journal, message: str) -> str:
    """Make the release commit, or adopt it if a crash struck after git committed."""
    head = git.head()
    if head != journal.base:
        if git.commit_subject(head) == message and git.parent(head) == journal.base:
            return head
        raise ReleaseError(f"HEAD moved from {journal.base[:12]} to {head[:12]} since the release "
                           "started and is not its commit; move the branch back or finish by hand")
    return git.commit_paths(message, journal.files)
