"""`invoke release` as a Python API: preflight, plan, then resumable steps.

Steps: files, commit, tag, packages (each plugin's OpenClaw package,
`dist/<name>-<version>.tgz`, built from the release commit: `npmpackage.py`), push; then, with
`publish`, `npm publish` of those packages (a dry run unless asked for real: `npmpublish.py`).
One release may hold several components (`-c a -c b`): one
commit and one tag for all of them (the tag of the main component when it is among them, else of
the first in declared order), a changelog section per component.

Every refusal happens before the first change, among them plugin sources the OpenClaw matrix
has not proven (`compatproof.py`), unless `allow_unproven` (then the changelog says so). Once
changes start, each step is recorded in the progress record (`.git/fleet-release.json`); a
failure says where it stopped and prints the one command that finishes the job
(`invoke release --resume`), which never makes a second commit or tag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

from fleet.release import changelog, compatproof, ecosystem, hostside, npmpackage, npmpublish
from fleet.release.bump import next_version
from fleet.release.changelog import commit_message, parse_commit_message
from fleet.release.component import Component, Project, load_project
from fleet.release.error import ReleaseError
from fleet.release.git import Git, GitError
from fleet.release.plan import (
    ComponentRelease,
    Plan,
    file_changes,
    write_text,
)
from fleet.release.progress import PROGRESS_FILE, RESUME_COMMAND, Progress
from fleet.release.verify import dependency_problems, verify

Echo = Callable[[str], None]
Names = Union[str, Sequence[str], None]


@dataclass
class ReleaseResult:
    """What a release did (or, with dry_run, would do); `component`/`version` are those of the
    component whose tag the release carries, `versions` holds every component released."""

    component: str
    version: str
    tag: str
    commit: Optional[str]
    pushed: bool
    dry_run: bool
    plan: Optional[Plan] = None
    versions: Optional[dict] = None
    packages: list = field(default_factory=list)  # npmpackage.NpmPackage built by the release


@dataclass(frozen=True)
class Publish:
    """`invoke release --publish`: where to, and whether for real (else `npm publish
    --dry-run`)."""

    registry: Optional[str] = None
    for_real: bool = False


def _result(project: Project, versions: dict, tag: str, commit: Optional[str], pushed: bool,
            dry_run: bool, plan: Optional[Plan]) -> ReleaseResult:
    owner = tag_owner(project, list(versions)).id
    return ReleaseResult(owner, versions[owner], tag, commit, pushed, dry_run, plan, versions)


def _names(value: Names) -> list:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [v for v in value if v]


def requested_versions(project: Project, components: Names, versions: Names) -> dict:
    """{component id: explicit version or None} from `-c` names and `--version` values.

    `--version X` sets the version of the only component; `--version id=X` (repeatable) sets
    one component's, and with no `-c` also selects it. No component named: the main one.
    """
    wanted = [project.component(c).id for c in _names(components)]
    explicit: dict = {}
    bare = []
    for item in _names(versions):
        cid, sep, ver = item.partition("=")
        if sep:
            explicit[project.component(cid.strip()).id] = ver.strip()
        else:
            bare.append(item)
    if not wanted:
        wanted = list(explicit) or [project.main]
    stray = [cid for cid in explicit if cid not in wanted]
    if stray:
        raise ReleaseError(f"--version names {', '.join(stray)}, which is not among the "
                           f"components released ({', '.join(wanted)}); fix: add "
                           f"{' '.join('-c ' + c for c in stray)} or drop that --version")
    if bare:
        if len(bare) > 1 or len(set(wanted)) > 1:
            raise ReleaseError("one bare --version cannot name several components' versions; "
                               "fix: give each one as --version <component>=<version> "
                               "(e.g. --version mc=2.2.0)")
        explicit.setdefault(wanted[0], bare[0])
    order = list(project.components)
    return {cid: explicit.get(cid) for cid in sorted(set(wanted), key=order.index)}


def run_release(root: Path, component: Names = None, part: Optional[str] = None,
                version: Names = None, dry_run: bool = False, push: bool = True,
                resume: bool = False, echo: Echo = print,
                today: Optional[str] = None, allow_unproven: bool = False,
                publish: Optional[Publish] = None) -> ReleaseResult:
    """Release one or more components (default: the main one) in one commit with one tag;
    raises ReleaseError with reason and fix. `allow_unproven` lets plugin sources the OpenClaw
    matrix has not proven go out (the changelog says so); `--resume` keeps the decision made
    when the release started. `publish`: then `npm publish` the packages it built."""
    result = _release(Path(root), component, part, version, dry_run, push, resume, echo, today,
                      allow_unproven)
    if publish is not None:
        if result.dry_run:
            how = "for real" if publish.for_real else "as `npm publish --dry-run`"
            echo(f"would publish the npm packages {how} to "
                 f"{publish.registry or 'the registry npm is configured for'}")
        else:
            npmpublish.publish(released_packages(result), publish.registry,
                               dry_run=not publish.for_real, echo=echo)
    return result


def released_packages(result: ReleaseResult) -> list:
    """The npm packages of the components this release released: a plugin left at its version
    was published by its own release, and npm refuses the same version twice."""
    return [p for p in result.packages if p.component in (result.versions or {})]


def _release(root: Path, component: Names, part: Optional[str], version: Names,
             dry_run: bool, push: bool, resume: bool, echo: Echo, today: Optional[str],
             allow_unproven: bool) -> ReleaseResult:
    project = load_project(root)
    git = Git(root)
    progress_path = git.git_dir() / PROGRESS_FILE
    progress = Progress.load(progress_path)
    if progress is not None:  # saved with sorted keys: back to declared order
        order = {cid: i for i, cid in enumerate(project.components)}
        progress.versions = dict(sorted(progress.versions.items(),
                                        key=lambda kv: order.get(kv[0], len(order))))
    if resume:
        if progress is None:
            raise ReleaseError(f"nothing to resume: no unfinished release is recorded in "
                               f"{progress_path}")
        named = _names(component)
        if part or _names(version) or (named and set(named) != set(progress.versions)):
            raise ReleaseError(f"--resume finishes the recorded release of {progress.label}; "
                               "drop --component/--part/--version")
        if not push:
            progress.push = False
        return _resume(git, project, progress, dry_run, echo)
    if progress is not None:
        where = f"stopped at step '{progress.failed_step}': {progress.error}" \
            if progress.failed_step else f"steps done: {', '.join(progress.done) or 'none'}"
        raise ReleaseError(f"an unfinished release of {progress.label} is "
                           f"recorded in {progress_path} ({where}); fix: finish it with "
                           f"`{RESUME_COMMAND}` before starting another")
    requested = requested_versions(project, component, version)
    plan = preflight(git, project, requested, part, push, echo, today, allow_unproven)
    if dry_run:
        echo("DRY RUN: nothing is changed")
        echo(plan.describe())
        echo("would build the OpenClaw packages " + ", ".join(
            f"dist/{name}" for name in npmpackage.planned_names(project, plan.versions)))
        return _result(project, plan.versions, plan.tag, None, False, True, plan)
    progress = Progress(versions=plan.versions,
                        previous={r.id: r.previous for r in plan.releases}, tag=plan.tag,
                        branch=plan.branch, base=plan.base, files=plan.paths,
                        changelog_section=plan.changelog_section, push=plan.push,
                        remote=plan.remote, proof=plan.proof, path=progress_path)
    progress.claim()
    echo(plan.proof)
    return _execute(git, project, progress, echo, plan)


def built_files(project: Project) -> list:
    """Every file of the checkout that the builds pack, sorted: the artifact's host side
    (`invoke build`) and the plugins' npm packages (the release's own `packages` step), by the
    same walk that packs them (so what they leave out, e.g. __pycache__, is left out here)."""
    root = Path(project.root)
    return sorted({*hostside.packed_files(root), *npmpackage.source_files(root, project)})


MAX_NAMED = 5


def _some(paths: list) -> str:
    """A few of `paths`, then how many more."""
    more = len(paths) - MAX_NAMED
    return ", ".join(paths[:MAX_NAMED]) + (f" and {more} more" if more > 0 else "")


def pick_remote(git: Git, branch: str) -> Optional[str]:
    """The branch's upstream remote, else `origin`, else the only remote, else None."""
    remotes = git.remotes()
    upstream = git.upstream_remote(branch)
    if upstream and upstream in remotes:
        return upstream
    if "origin" in remotes:
        return "origin"
    return remotes[0] if len(remotes) == 1 else None


def previous_tag(git: Git, comp: Component,
                 tags: Optional[list] = None) -> Optional[str]:
    """The tag reachable from HEAD that released the highest version of this component: one of
    its own tags (`mc-v2.1.0`), or a joint release's tag whose message names it."""
    best: Optional[tuple[tuple, str]] = None
    eco = ecosystem.component_ecosystem(vf.ecosystem for vf in comp.files)
    for tag, subject in (git.tag_subjects() if tags is None else tags):
        raw = comp.tag_version(tag) or parse_commit_message(subject).get(comp.id)
        key = ecosystem.order_key(raw, eco) if raw else None
        if key is not None and (best is None or key > best[0]):
            best = (key, tag)
    return best[1] if best else None


def tag_owner(project: Project, ids: list) -> Component:
    """The component whose tag a release carries: the main one if released, else the first."""
    return project.component(project.main if project.main in ids else ids[0])


def preflight(git: Git, project: Project, requested: Union[dict, str, None],
              part: Optional[str] = None, push: bool = True, echo: Echo = print,
              today: Optional[str] = None, allow_unproven: bool = False) -> Plan:
    """Every refusal (with reason and fix), then the plan; changes nothing. `requested` is
    {component: explicit version or None} (see `requested_versions`)."""
    if not isinstance(requested, dict):
        requested = requested_versions(project, requested, None)
    branch = git.branch()
    if branch is None:
        raise ReleaseError("refusing to release: HEAD is detached; fix: `git switch <branch>` "
                           "to the branch the release belongs on")
    unknown = git.identity_problem()
    if unknown:
        raise ReleaseError("refusing to release: git has no identity to author the release "
                           f"commit and tag ({unknown.strip().splitlines()[-1]}); fix: git config "
                           'user.name "Your Name" && git config user.email you@example.com')
    dirty = git.dirty_paths()
    if dirty:
        raise ReleaseError("refusing to release: the working tree has uncommitted changes in "
                           f"{', '.join(dirty)}; fix: commit or stash them first")
    report = verify(project)
    report.raise_for_problems("refusing to release")
    stray = git.untracked(built_files(project))
    if stray:
        raise ReleaseError(f"refusing to release: {len(stray)} file(s) that a build packs are "
                           f"not tracked by git (ignored or untracked): {_some(stray)}; the "
                           "release commit would not hold them, and the next `invoke build` "
                           "would pack them into a +dirty artifact; fix: commit them (`git add "
                           "-f` for an ignored one) or delete them")
    shipped = [path for comp in project.components.values() for path in comp.ships]
    stray = git.untracked_under(list(dict.fromkeys(shipped)))
    if stray:
        raise ReleaseError(f"refusing to release: {len(stray)} untracked file(s) inside what "
                           f"a component ships: {_some(stray)}; the release's tag would not "
                           "hold them, though they sit beside its files; fix: commit them or "
                           "delete them")
    # With several components, --part bumps those without an explicit --version C=X.
    several = len(requested) > 1
    new = {cid: next_version(report.versions[cid], None if several and ver else part, ver,
                             project.component(cid).files)
           for cid, ver in requested.items()}
    after = dependency_problems(project, {**report.versions, **new})
    if after:
        what = ", ".join(f"{cid} {ver}" for cid, ver in new.items())
        raise ReleaseError(f"refusing to release {what}: it would break a dependency "
                           "rule:\n" + "\n".join(f"  - {p}" for p in after)
                           + "\nfix: release the components it depends on together "
                           "(-c A -c B) or adjust the rule")
    owner = tag_owner(project, list(new))
    tag = owner.tag(new[owner.id])
    own_tags = [project.component(cid).tag(ver) for cid, ver in new.items()]
    checked = list(dict.fromkeys([tag, *own_tags]))
    for name in checked:
        local = git.tag_target(name)
        if local:
            raise ReleaseError(f"refusing to release: tag {name} already exists locally (on "
                               f"{local[:12]}); fix: pick a higher version, or delete a stale "
                               f"tag with `git tag -d {name}`")
    proof, unproven, concerned = _proof(project, new, allow_unproven)
    remote = pick_remote(git, branch)
    if remote:
        _check_remote(git, remote, branch, checked, push, echo)
    tags = git.tag_subjects()
    date = today or datetime.now(timezone.utc).date().isoformat()
    releases, sections = [], []
    for cid, ver in new.items():
        comp = project.component(cid)
        prev_tag = previous_tag(git, comp, tags)
        commits = git.log_subjects(prev_tag, comp.changelog_paths())
        note = unproven if cid in concerned else None
        sections.append(changelog.section(cid, ver, commits, date, prev_tag, note))
        releases.append(ComponentRelease(cid, report.versions[cid], ver, prev_tag))
    section = "\n".join(sections)
    changes = file_changes(project, new, section)
    return Plan(releases=releases, tag=tag, branch=branch, base=git.head(), remote=remote,
                push=push, changelog_section=section, changes=changes, proof=proof)


def _proof(project: Project, new: dict, allow_unproven: bool) -> tuple:
    """(what the release says about its OpenClaw proof, the changelog line when it goes out
    unproven or None, the components that ship plugin or continuity code); refuses plugin
    sources the OpenClaw matrix has not proven, unless `allow_unproven`."""
    concerned = compatproof.concerned(project, list(new))
    if not concerned:
        return (f"OpenClaw proof: does not apply ({', '.join(new)} ship no plugin or continuity "
                "code)", None, concerned)
    found = compatproof.verdict(project.root)
    if found.current:
        return f"OpenClaw proof: {found.describe()}", None, concerned
    if not allow_unproven:
        what = ", ".join(f"{cid} {ver}" for cid, ver in new.items())
        changes = ""
        if found.proof is not None and found.state == compatproof.STALE:
            changes = (f" (`git diff --stat {found.proof.commit[:12]} -- "
                       f"{' '.join(compatproof.PROVEN_PATHS)}` lists the changes)")
        raise ReleaseError(f"refusing to release {what}: its OpenClaw compatibility is not "
                           f"proven: {found.describe()}{changes}; fix: "
                           f"{compatproof.renew_hint()}")
    return (f"OpenClaw proof: {found.describe()}; going ahead with --allow-unproven, the "
            f"changelog of {', '.join(concerned)} says so", found.changelog_line(), concerned)


def _check_remote(git: Git, remote: str, branch: str, tags: list, push: bool,
                  echo: Echo) -> None:
    """Refuse when a tag is already on the remote, or (when pushing) the remote branch has
    commits we lack, which would make the push fail after the commit and tag are made."""
    tag = tags[0]
    tag_refs, branch_ref = [f"refs/tags/{t}" for t in tags], f"refs/heads/{branch}"
    try:
        refs = git.remote_refs(remote, *tag_refs, branch_ref)
    except GitError as exc:
        if push:
            raise ReleaseError(f"refusing to release: cannot check tag {tag} on remote "
                               f"{remote}: {exc}; fix: check the remote and the network, or "
                               "release with --no-push and push later") from exc
        echo(f"warning: cannot check tag {tag} on remote {remote} ({exc}); continuing "
             "because of --no-push")
        return
    for tag_ref in tag_refs:
        if tag_ref in refs:
            raise ReleaseError(f"refusing to release: tag {tag_ref[len('refs/tags/'):]} "
                               f"already exists on remote {remote} ({refs[tag_ref][:12]}); "
                               "fix: pick a higher version")
    ahead = refs.get(branch_ref)
    if push and ahead and not git.is_ancestor(ahead, "HEAD"):
        raise ReleaseError(f"refusing to release: {remote}/{branch} ({ahead[:12]}) has commits "
                           f"that {branch} lacks, so the push would be rejected; fix: "
                           f"`git pull --rebase {remote} {branch}`, then release")


def _resume(git: Git, project: Project, progress: Progress, dry_run: bool,
            echo: Echo) -> ReleaseResult:
    branch = git.branch()
    if branch != progress.branch:
        raise ReleaseError(f"cannot resume: the release of {progress.label}"
                           f" was started on branch {progress.branch}, HEAD is on "
                           f"{branch or 'a detached HEAD'}; fix: `git switch {progress.branch}`")
    stray = [p for p in git.dirty_paths() if p not in progress.files]
    if stray:
        raise ReleaseError(f"cannot resume: uncommitted changes outside the release files: "
                           f"{', '.join(stray)}; fix: commit or stash them first")
    decided = f"{progress.proof} (decided when the release started)" if progress.proof else None
    if dry_run:
        echo(f"DRY RUN: resume the release of {progress.label}; "
             f"steps left: {', '.join(progress.pending()) or 'none'}")
        if decided:
            echo(decided)
        return _result(project, progress.versions, progress.tag, progress.commit, False, True, None)
    echo(f"resuming the release of {progress.label} "
         f"(done: {', '.join(progress.done) or 'nothing'})")
    if decided:
        echo(decided)
    return _execute(git, project, progress, echo, None)


def _execute(git: Git, project: Project, progress: Progress, echo: Echo,
             plan: Optional[Plan]) -> ReleaseResult:
    message = commit_message(progress.versions)
    step = "files"
    try:
        if "files" not in progress.done:
            changes = plan.changes if plan else file_changes(
                project, progress.versions, progress.changelog_section)
            for change in changes:
                if change.new != change.old:
                    write_text(Path(project.root) / change.path, change.new)
            progress.mark("files")
            echo(f"wrote {progress.label} into {', '.join(progress.files)}")
        step = "commit"
        if "commit" not in progress.done:
            progress.commit = _commit(git, progress, message)
            progress.mark("commit")
            echo(f"committed {progress.commit[:12]} {message!r}")
        step = "tag"
        if "tag" not in progress.done:
            existing = git.tag_target(progress.tag)
            if existing is None:
                git.annotated_tag(progress.tag, message, progress.commit)
            elif existing != progress.commit:
                raise ReleaseError(f"tag {progress.tag} already exists on {existing[:12]}, not on "
                                   f"the release commit {progress.commit[:12]}; delete it with "
                                   f"`git tag -d {progress.tag}` if it is stale")
            progress.mark("tag")
            echo(f"tagged {progress.tag}")
        step = "packages"
        # Built again on a resume too (the same bytes): a publish needs them at hand.
        packages = npmpackage.build_packages(project.root, Path(project.root) / "dist")
        if "packages" not in progress.done:
            progress.mark("packages")
            echo("built the OpenClaw packages "
                 + ", ".join(str(p.path.relative_to(project.root)) for p in packages))
        step = "push"
        pushed = False
        if "push" not in progress.done:
            if progress.push and progress.remote:
                git.push(progress.remote, progress.branch, progress.tag)
                pushed = True
                echo(f"pushed {progress.branch} and {progress.tag} to {progress.remote}")
            elif not progress.remote:
                echo("no remote configured: nothing pushed")
            else:
                echo(f"not pushed (--no-push); later: git push --atomic {progress.remote} "
                     f"{progress.branch} {progress.tag}")
            progress.mark("push")
    except (ReleaseError, OSError) as exc:
        progress.fail(step, str(exc))
        done = ", ".join(progress.done) or "nothing"
        raise ReleaseError(f"release of {progress.label} stopped at step "
                           f"'{step}': {exc}\ndone so far: {done} (recorded in {progress.path})\n"
                           f"fix the cause, then finish it with: {RESUME_COMMAND}") from exc
    progress.delete()
    echo(f"released {progress.label} ({progress.tag})")
    result = _result(project, progress.versions, progress.tag, progress.commit, pushed, False,
                     plan)
    result.packages = packages
    return result


def _commit(git: Git, progress: Progress, message: str) -> str:
    """Make the release commit, or adopt it if a crash struck after git committed."""
    head = git.head()
    if head != progress.base:
        if git.commit_subject(head) == message and git.parent(head) == progress.base:
            return head
        raise ReleaseError(f"HEAD moved from {progress.base[:12]} to {head[:12]} since the release "
                           "started and is not its commit; move the branch back or finish by hand")
    return git.commit_paths(message, progress.files)
