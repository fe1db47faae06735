"""Tasks for real OpenClaw on this machine: `invoke openclaw.install`. Thin: call, print."""

from __future__ import annotations

import sys
import time

from invoke import Collection, Exit

from fleet.cli.deploy import select_hosts
from fleet.cli.flags import number, task
from fleet.cli.taskrun import Run
from lab.openclaw import compat, registry, sandbox, toolchain


@task(help={"json": "one JSON document (the tasks' shape; one entry per version in "
                    "`installs`)",
            "version": "one OpenClaw version (default: every one fleet is tested on: "
                       + ", ".join(toolchain.OPENCLAW_VERSIONS) + ", the release below "
                       "the floor, " + toolchain.BELOW_FLOOR_VERSION + ", and the test npm "
                       "registry, Verdaccio " + registry.VERDACCIO_VERSION + ")"})
def install(c, json_=False, version=""):
    """Install the pinned Node and each tested OpenClaw from the npm registry, once each.

    Each install also gets its bundled plugins' runtime dependencies staged once (OpenClaw
    2026.4.x would fetch them with npm at every new gateway's first start); the release below
    the plugins' floor (it only refuses their package) and Verdaccio, the npm registry the
    package tests publish to, are installed too unless one version is named.
    """
    run = Run("openclaw.install", json_)
    results = []
    with run.guard():
        wanted_all = [version] if version else [*toolchain.OPENCLAW_VERSIONS,
                                                 toolchain.BELOW_FLOOR_VERSION]
        for wanted in wanted_all:
            started = time.monotonic()
            existing = toolchain.find(version=wanted)
            try:
                tool = toolchain.install(version=wanted, log=_progress)
                if wanted != toolchain.BELOW_FLOOR_VERSION or version:
                    toolchain.stage_runtime_deps(tool, log=_progress)
            except toolchain.ToolchainError as exc:
                raise Exit(f"openclaw.install: {exc}", code=1) from None
            result = {**tool.as_dict(), "installed": existing is None,
                      "seconds": round(time.monotonic() - started, 1)}
            results.append(result)
            if not json_:
                what = "installed" if existing is None else "already installed"
                print(f"openclaw {tool.openclaw_version} on node {tool.node_version} {what} in "
                      f"{tool.root} ({result['seconds']}s)")
        if not version:
            try:
                registry.install(log=_progress)
            except registry.RegistryError as exc:
                raise Exit(f"openclaw.install: {exc}", code=1) from None
            if not json_:
                print(f"verdaccio {registry.VERDACCIO_VERSION} in {registry.install_dir()}")
    if json_:
        run.document(True, {"installs": results})


def _progress(line: str) -> None:
    print(f"openclaw: {line}", file=sys.stderr, flush=True)


@task(help={"hosts": "sandbox OpenClaw hosts or groups (default: sandbox-openclaw)",
            "inventory": "inventory file (default: ./inventory.yaml)"})
def down(c, hosts="sandbox-openclaw", inventory=""):
    """Stop the sandbox OpenClaw hosts' gateways and scripted models (their state stays)."""
    _, selected = select_hosts(c, hosts, inventory)
    for line in sandbox.down(selected):
        print(line)


@task(help={"versions": "all (every stable release of the declared range, from the npm "
                        "registry), ci (the releases CI tests) or a comma-separated list",
            "jobs": f"releases run at once (at most {compat.MAX_JOBS}: a gateway holds ~900 MB)",
            "force": "run releases whose row is green and current for these sources again",
            "keep": "keep every install (default: only the CI set's; each is ~570 MB)",
            "json": "one JSON document (the tasks' shape) instead of progress lines"})
def compat_(c, versions="all", jobs="1", force=False, keep=False, json_=False):
    """Prove the plugins on real OpenClaw gateways, release by release, into docs/compat.md.

    Each release: install it, deploy fleet to a gateway of it, run the continuity scenario
    (turns, a child, recovery, /mc, upgrade, two rollbacks), keep its row and its corpus of
    turns. Resumable: a release whose row is green and current for the plugin sources is not run
    again.
    """
    run = Run("openclaw.compat", json_)
    with run.guard():
        try:
            result = compat.run(versions, number(jobs, "--jobs", maximum=compat.MAX_JOBS,
                                                 why="a gateway holds ~900 MB"), force, keep,
                                say=(lambda _line: None) if json_ else _progress)
        except compat.CompatError as exc:
            raise Exit(f"openclaw.compat: {exc}", code=1) from None
        ok = not result["failed"]
        if json_:
            run.document(ok, result)
        else:
            print(f"ran {len(result['ran'])}, current {len(result['current'])}, failed "
                  f"{len(result['failed'])}; proven {len(result['proven'])} releases; "
                  + ("the proof is complete for these sources" if result["complete"]
                     else "the proof is not complete for these sources")
                  + f"; see {compat.PAGE.relative_to(compat.REPO)}")
        if not ok:
            raise Exit(f"openclaw.compat: not green on {', '.join(result['failed'])}", code=1)


ns = Collection("openclaw")
ns.add_task(install)
ns.add_task(down)
ns.add_task(compat_, name="compat")
