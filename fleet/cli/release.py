"""Tasks for fleet.release: `verify`, `release`, `build`. Thin: parse flags, call the API, print.

What they print quotes files of the checkout (a version file's value, a diff of it, a problem
naming it), which any contributor can write: it reaches the terminal through fleet.terminal.text
(escaped, never markup), and `--json` keeps it exact.
"""

from __future__ import annotations

from pathlib import Path

from invoke import Exit

from fleet.cli import extension
from fleet.cli.flags import task
from fleet.cli.taskrun import Run
from fleet.release.error import ReleaseError
from fleet.terminal.text import visible


def _root() -> Path:
    from fleet.release.component import find_root  # noqa: PLC0415

    return find_root(Path.cwd())


def _echo(line: str) -> None:
    """One progress line of a release (a plan with the version files' diffs, a commit message):
    escaped, its line breaks kept."""
    print(visible(line, multiline=True))


@task(help={"json": "one JSON document on stdout (docs/operations.md): versions, files, "
                    "problems, notes"})
def verify(c, json=False):
    """Check every version file, the plugins' OpenClaw range and OpenClaw entries.

    Every version-bearing file of every component must agree and be valid where it is written,
    the plugins must declare the same OpenClaw versions, and each plugin's OpenClaw entry must
    import under Node >= 24 when one is available. Exit 1 naming each problem. A note says
    whether the OpenClaw matrix proved the plugin sources (current, stale or never proven).
    """
    from rich.console import Console  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    from fleet.release.component import load_project  # noqa: PLC0415
    from fleet.release.verify import render  # noqa: PLC0415
    from fleet.release.verify import verify as run_verify  # noqa: PLC0415

    run = Run("verify", json)
    with run.guard():
        try:
            report = run_verify(load_project(_root()), js=True,
                                pinned_node=extension.pinned_node(c), proof=True)
        except ReleaseError as exc:
            raise Exit(f"verify: {exc}", code=1) from exc
    if json:
        found = report.to_json()
        run.document(report.ok, {k: found[k] for k in ("versions", "files", "problems",
                                                      "notes")})
    else:
        console = Console()
        console.print(render(report))
        for note in report.notes:
            console.print(Text("note: " + visible(note, multiline=True)))
        for problem in report.problems:
            console.print(Text.assemble(("problem:", "red"),
                                        " " + visible(problem, multiline=True)))
    if not report.ok:
        raise Exit(code=1)


@task(
    iterable=["component", "version"],
    help={
        "component": "component to release (default: the main one, memory-continuity); "
                     "repeat to release several in one commit with one tag",
        "part": "bump major|minor|patch|pre (default patch), for every component without "
                "an explicit --version",
        "version": "explicit new version (must be greater than the current one); with several "
                   "components: <component>=<version>, repeatable",
        "dry_run": "print every change (diffs, commit, tag, push) and change nothing",
        "no_push": "commit and tag locally only",
        "resume": "finish a release that stopped midway (no second commit or tag)",
        "allow_unproven": "release plugin sources the OpenClaw matrix has not proven (`invoke "
                          "openclaw.compat --versions all`); the changelog says so",
        "publish": "then publish the OpenClaw packages the release built with npm: a dry run "
                   "(`npm publish --dry-run`) unless --yes",
        "yes": "with --publish: really publish",
        "registry": "with --publish: the npm registry URL (default: `npm config get registry`)",
    }
)
def release(c, component=None, part=None, version=None, dry_run=False, no_push=False,
            resume=False, allow_unproven=False, publish=False, yes=False, registry=None):
    """Bump components' versions in every file, changelog, one commit, annotated tag, push.

    The release also builds each plugin's OpenClaw package (`dist/<name>-<version>.tgz`);
    `--publish` hands them to npm (a dry run unless `--yes`).
    """
    from fleet.release.cut import Publish, run_release  # noqa: PLC0415

    if (yes or registry) and not publish:
        raise Exit("release: --yes and --registry go with --publish; add --publish", code=2)
    try:
        run_release(_root(), component=component, part=part, version=version, dry_run=dry_run,
                    push=not no_push, resume=resume, echo=_echo, allow_unproven=allow_unproven,
                    publish=Publish(registry, yes) if publish else None)
    except ReleaseError as exc:  # Invoke prints the message as it is: it may quote a file
        raise Exit(visible(f"release: {exc}", multiline=True), code=1) from exc


@task(
    help={
        "out": "output directory (default dist/ of the checkout; installed: ~/.cache/fleet/dist)",
        "check": "only report whether the existing build is current (exit 1 if not)",
        "npm": "also write each plugin's OpenClaw package, <name>-<version>.tgz as npm pack "
               "makes it (for `openclaw plugins install`)",
        "json": "print the result as JSON",
    }
)
def build(c, out=None, check=False, npm=False, json=False):
    """Build the reproducible host artifact dist/fleet-<version>.pyz and print its SHA-256."""
    from fleet.release.artifact import (  # noqa: PLC0415
        build_artifact,
        current_artifact,
        default_source,
    )
    from fleet.release.npmpackage import build_packages  # noqa: PLC0415

    run = Run("build", json)
    with run.guard():
        if check and npm:
            raise Exit("build: --check reads the artifact only; drop --npm (a package build "
                       "is byte for byte the same every time: build it again)", code=2)
        try:
            root, default_out = default_source()
            out_dir = Path(out) if out else default_out
            artifact = current_artifact(root, out_dir) if check else build_artifact(root, out_dir)
            packages = build_packages(root, out_dir) if npm else []
        except ReleaseError as exc:
            raise Exit(visible(f"build: {exc}", multiline=True), code=1) from exc
        if artifact is None:
            raise Exit(f"build: no current build in {out_dir}; run `invoke build`", code=1)
    if json:
        data = {"artifact": {"path": str(artifact.path), "sha256": artifact.sha256,
                             "version": artifact.version, "components": artifact.components},
                "check": check}
        if npm:
            data["packages"] = [{"component": p.component, "path": str(p.path), "name": p.name,
                                 "version": p.version, "sha256": p.sha256} for p in packages]
        run.document(True, data)
    else:
        state = "current" if check else "built"
        print(visible(f"{state} {artifact.path}"))
        print(f"sha256 {artifact.sha256}")
        print(visible("components " + ", ".join(f"{k} {v}"
                                                for k, v in artifact.components.items())))
        for pkg in packages:
            print(visible(f"npm package {pkg.path} ({pkg.name} {pkg.version})"))
            print(f"sha256 {pkg.sha256}")


TASKS = [verify, release, build]
