"""The OpenClaw compatibility matrix: every stable release of the declared range, proven for real.

The plugins declare the OpenClaw releases they support (`openclaw.compat` in their
package.json: from `minGatewayVersion` up to `openclaw.build.openclawVersion`), and each release
changes what it hands plugins. So for each stable release of that range (the npm registry's
list) the matrix installs that OpenClaw (lab.openclaw.toolchain), runs the continuity scenario
on a real gateway of it (lab.openclaw.scenario) and keeps:

- a row per release, `docs/compat/<release>.json`: each check's verdict, the deploy timings, the
  date, the commit and the fingerprint of the plugin sources it ran (`sources`). A green row
  whose fingerprint is the checkout's is current and is not run again (`force` re-runs it), so
  an interrupted matrix resumes where it stopped; a failed one is run again;
- the corpus of turns that release produced (lab.openclaw.corpus);
- `docs/compat.md`, the table release x check, rendered from every row;
- the proof, `fleet/plugins/openclaw-proven.json`, which ships in every artifact: `proven`,
  the releases whose latest row is all green for these sources (what hosts and `invoke status`
  compare a host's OpenClaw with); `excluded`, releases taken out of the range by name with the
  reason (kept as written there, by hand); and, once every stable release of the range has a
  current row that is green or excluded, `sources`, `commit` and `date` (what `invoke release`
  checks).

An install is ~570 MB: one of a release outside the CI set (toolchain.OPENCLAW_VERSIONS) is
removed after its row unless `keep` says otherwise. Two jobs at most (a gateway holds ~900 MB).
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from fleet.continuity import openclawrange
from fleet.continuity.atomicfile import atomic_write
from fleet.deploy.inventory import load
from fleet.release import compatproof
from fleet.release.git import Git, GitError
from lab.openclaw import corpus, sandbox, scenario, toolchain

REPO = Path(__file__).resolve().parents[2]
ROWS = REPO / "docs" / "compat"
PAGE = REPO / "docs" / "compat.md"
WORK = REPO / ".fleet" / "compat"  # per release; a failed release's host stays here
# Pages that state the supported and proven range, between STATEMENT_MARKS, written from the
# proof by `sync_statement` (a unit test keeps them in step with the proof).
STATING = (REPO / "README.md", REPO / "docs" / "openclaw.md")
STATEMENT_MARKS = ("<!-- openclaw-range -->", "<!-- /openclaw-range -->")
PROOF = REPO / compatproof.PROOF_FILE
MAX_JOBS = 2
NPM_TIMEOUT_S = 120.0


class CompatError(RuntimeError):
    """The matrix cannot run as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Declared:
    """The OpenClaw releases the checkout's plugins declare: `floor` up to `top`."""

    floor: str
    top: str

    def holds(self, version: str) -> bool:
        key = openclawrange.version_key(version)
        return (openclawrange.version_key(self.floor) <= key
                <= openclawrange.version_key(self.top))


def declared(root: Path = REPO) -> Declared:
    """The range the checkout's plugins declare (their package.json files)."""
    packages = {str(p.relative_to(root)): json.loads(p.read_text(encoding="utf-8"))
                for p in sorted((root / "fleet" / "plugins").glob("*/package.json"))}
    found = openclawrange.release_range(packages)
    if found is None or not found.top:
        raise CompatError("the plugins declare no OpenClaw range (openclaw.compat.pluginApi and "
                          "openclaw.build.openclawVersion in fleet/plugins/*/package.json)")
    return Declared(found.floor, found.top)


def is_stable(version: str) -> bool:
    """A release, not a pre-release or a numbered correction (`2026.5.3-1`)."""
    return re.fullmatch(r"\d+\.\d+\.\d+", version) is not None


def stable_releases(declared_range: Declared, npm: str = "npm") -> list[str]:
    """Every stable OpenClaw release of the range on the npm registry, oldest first."""
    try:
        proc = subprocess.run([npm, "view", "openclaw", "versions", "--json"],
                              capture_output=True, text=True, timeout=NPM_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompatError(f"cannot ask the npm registry for OpenClaw's releases: {exc}") from exc
    try:
        versions = json.loads(proc.stdout)
    except ValueError:
        versions = None
    if proc.returncode != 0 or not isinstance(versions, list):
        tail = (proc.stderr or proc.stdout).strip()[-300:]
        raise CompatError(f"`npm view openclaw versions` failed (exit {proc.returncode}): {tail}")
    found = [v for v in versions if isinstance(v, str) and is_stable(v)
             and declared_range.holds(v)]
    return sorted(found, key=openclawrange.version_key)


def select(spec: str, declared_range: Declared, npm: str = "npm") -> list[str]:
    """The releases `spec` names: `all` (every stable release of the range), `ci` (the CI set),
    or a comma-separated list."""
    spec = spec.strip()
    if spec == "all":
        return stable_releases(declared_range, npm)
    if spec == "ci":
        return sorted(toolchain.OPENCLAW_VERSIONS, key=openclawrange.version_key)
    wanted = [v.strip() for v in spec.split(",") if v.strip()]
    for version in wanted:
        if not is_stable(version) or not declared_range.holds(version):
            raise CompatError(f"--versions: {version!r} is not a stable OpenClaw release of the "
                              f"declared range {declared_range.floor} .. {declared_range.top}")
    return sorted(dict.fromkeys(wanted), key=openclawrange.version_key)


# -- rows ----------------------------------------------------------------------------------
def row_path(release: str) -> Path:
    return ROWS / f"{release}.json"


def read_row(release: str) -> dict | None:
    try:
        row = json.loads(row_path(release).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return row if isinstance(row, dict) and row.get("release") == release else None


def is_current(row: dict | None, sources: str) -> bool:
    """A row made from these plugin sources, with every check the scenario has today."""
    return bool(row) and row.get("sources") == sources and \
        set(row.get("checks") or {}) == set(scenario.CHECKS)


def row_ok(row: dict | None) -> bool:
    checks = (row or {}).get("checks") or {}
    return bool(row) and all((checks.get(name) or {}).get("ok") for name in scenario.CHECKS)


def commit(root: Path = REPO) -> str:
    """The short commit the matrix runs on, `+dirty` when the proven sources differ from it."""
    git = Git(root)
    try:
        head = git.run("rev-parse", "--short=10", "HEAD")
        # the proof file lies among the proven paths, and every run rewrites it: not a change
        dirty = git.run("status", "--porcelain", "--", *compatproof.PROVEN_PATHS,
                        f":(exclude){compatproof.PROOF_FILE}")
    except GitError:
        return "unknown"
    return head + ("+dirty" if dirty else "")


# -- one release ---------------------------------------------------------------------------
def run_release(release: str, releases: scenario.Releases, work: Path, sources: str,
                say: Callable[[str], None], keep: bool = False) -> dict:
    """Install `release`, run the scenario on a gateway of it, write its corpus; its row."""
    started = datetime.datetime.now(datetime.timezone.utc)
    say(f"{release}: installing")
    tool = toolchain.install(version=release, log=lambda line: say(f"{release}: {line}"))
    toolchain.stage_runtime_deps(tool, log=lambda line: say(f"{release}: {line}"))
    install_s = (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()
    folder = work / release
    if folder.exists():  # an earlier failed run's, kept for a look
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "inventory.yaml").write_text(sandbox.inventory_text(
        ["oc"], "compat", ready_s=600, command_s=1800,
        options={"oc": {"openclaw_version": release}}))
    hosts = sandbox.resolve(load(folder / "inventory.yaml").select("compat"))
    sandbox.prepare(hosts)
    probe_log = folder / "probe.jsonl"
    scenario.install_probe(hosts[0], probe_log)
    say(f"{release}: running the scenario")
    try:
        outcome = scenario.Scenario(hosts[0], releases, probe_log).run()
    finally:
        sandbox.down(hosts)
    corpus.write(release, corpus.collect(scenario.probe_records(probe_log), outcome.turns,
                                         scenario.CHILD_TASK))
    if not keep and release not in toolchain.OPENCLAW_VERSIONS:
        toolchain.remove(tool)
    row = {"release": release, "date": started.date().isoformat(), "commit": commit(),
           "sources": sources, "ok": outcome.ok, "checks": outcome.checks,
           "seconds": {"install": round(install_s, 1), **outcome.seconds}}
    ROWS.mkdir(parents=True, exist_ok=True)
    atomic_write(row_path(release), json.dumps(row, indent=1) + "\n")
    failed = [name for name in scenario.CHECKS if not outcome.checks[name]["ok"]]
    if failed:  # the host's state dir, logs and probe record stay for a look
        say(f"{release}: FAILED {', '.join(failed)} (its host is kept in {folder})")
    else:
        shutil.rmtree(folder, ignore_errors=True)
        say(f"{release}: all green")
    return row


def run(spec: str = "all", jobs: int = 1, force: bool = False, keep: bool = False,
        say: Callable[[str], None] = print) -> dict:
    """The matrix for the releases `spec` names (see `select`), then the page and the proof.
    Returns {"ran": [...], "current": [...], "failed": [...], "proven": [...], "complete": bool}."""
    declared_range = declared()
    wanted = select(spec, declared_range)
    sources = compatproof.sources_digest(REPO)
    todo = [r for r in wanted
            if force or not (is_current(read_row(r), sources) and row_ok(read_row(r)))]
    if spec.strip() == "all":  # an excluded release runs only when named: it cannot pass
        out = sorted(set(todo) & set(excluded_releases()), key=openclawrange.version_key)
        todo = [r for r in todo if r not in out]
        if out:
            say(f"excluded by name in {PROOF.name}, not run (name it to run it): "
                f"{', '.join(out)}")
    else:
        out = []
    skipped = [r for r in wanted if r not in todo and r not in out]
    if skipped:
        say(f"green and current for these sources, not run again: {', '.join(skipped)}")
    jobs = max(1, min(jobs, MAX_JOBS))
    lock = threading.Lock()

    def report(line: str) -> None:
        with lock:
            say(line)

    def one(release: str) -> dict | None:
        try:
            return run_release(release, releases, WORK, sources, report, keep)
        except (toolchain.ToolchainError, sandbox.SandboxError) as exc:
            report(f"{release}: not run: {exc}")
            return None

    # built outside the checkout: a snapshot inside it would take the checkout's git status
    with tempfile.TemporaryDirectory(prefix="fleet-compat-builds-") as builds:
        releases = scenario.build_releases(Path(builds)) if todo else None
        with ThreadPoolExecutor(jobs) as pool:
            rows = dict(zip(todo, pool.map(one, todo)))
    everything = _all_releases(declared_range)
    proof = write_proof(everything, sources)
    PAGE.write_text(render(everything, proof, declared_range, sources), encoding="utf-8")
    sync_statement(statement(declared_range, proof))
    return {"ran": todo, "current": skipped,
            "failed": [r for r, row in rows.items() if row is None or not row["ok"]],
            "proven": proof["proven"], "complete": proof["sources"] == sources}


def excluded_releases(path: Path | None = None) -> list[str]:
    """The releases the proof (default PROOF) excludes by name (none when it cannot be read)."""
    path = path or PROOF
    try:
        excluded = json.loads(path.read_text(encoding="utf-8")).get("excluded")
    except (OSError, ValueError, AttributeError):
        return []
    return list(excluded) if isinstance(excluded, dict) else []


def _all_releases(declared_range: Declared) -> list[str]:
    """The stable releases of the range (the registry's list, else those with a row)."""
    try:
        return stable_releases(declared_range)
    except CompatError:
        return sorted((p.stem for p in ROWS.glob("*.json") if is_stable(p.stem)
                       and declared_range.holds(p.stem)), key=openclawrange.version_key)


# -- the proof and the page ----------------------------------------------------------------
def write_proof(everything: Iterable[str], sources: str, path: Path | None = None) -> dict:
    """Rewrite the proof (default PROOF) from the rows (see the module doc); what was written."""
    path = path or PROOF
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = {}
    excluded = old.get("excluded") if isinstance(old.get("excluded"), dict) else {}
    everything = list(everything)
    rows = {r: read_row(r) for r in everything}
    # proven for these sources: a row of older sources proves nothing about these
    proven = [r for r in everything if r not in excluded and is_current(rows[r], sources)
              and row_ok(rows[r])]
    complete = bool(everything) and all(r in excluded or r in proven for r in everything)
    proof = {"proven": proven, "excluded": excluded,
             "sources": sources if complete else old.get("sources", ""),
             "commit": commit() if complete else old.get("commit", ""),
             "date": (max(rows[r]["date"] for r in proven) if complete and proven
                      else old.get("date", ""))}
    atomic_write(path, json.dumps(proof, indent=2) + "\n")
    return proof


def statement(declared_range: Declared, proof: dict) -> str:
    """The one sentence README.md and docs/openclaw.md say about the OpenClaw range."""
    proven = sorted(proof.get("proven") or [], key=openclawrange.version_key)
    excluded = sorted(proof.get("excluded") or {}, key=openclawrange.version_key)
    said = (f"Supported: OpenClaw **{declared_range.floor} to {declared_range.top}**; proven "
            f"release by release on {len(proven)} stable releases of that range"
            + (f" (the oldest {proven[0]}, the newest {proven[-1]})" if proven else "")
            + (f", {len(excluded)} excluded ({', '.join(excluded)})" if excluded else "")
            + ": every check of every release is in [docs/compat.md]")
    return said


def sync_statement(text: str, pages: Iterable[Path] = STATING) -> None:
    """Write `text` between the marks of each page (a page without them is left alone)."""
    begin, end = STATEMENT_MARKS
    for page in pages:
        body = page.read_text(encoding="utf-8")
        if begin not in body or end not in body:
            continue
        head, rest = body.split(begin, 1)
        link = "(compat.md)" if page.parent.name == "docs" else "(docs/compat.md)"
        new = f"{head}{begin}{text}{link}.{end}{rest.split(end, 1)[1]}"
        if new != body:
            page.write_text(new, encoding="utf-8")


_MARK = {True: "✓", False: "✗"}


def _short(name: str) -> str:
    return {"child state": "child", "recovered once": "once", "/mc subagents": "mc sub",
            "/mc doctor": "mc doc", "/mc settings": "mc set", "clean state": "clean",
            "rollback: python": "rb py", "rollback: entry": "rb js"}.get(name, name)


def render(everything: Iterable[str], proof: dict, declared_range: Declared,
           sources: str = "") -> str:
    """docs/compat.md from the rows and the proof; a row not current for `sources` says so."""
    everything = list(everything)
    excluded = proof.get("excluded") or {}
    proven = proof.get("proven") or []
    lines = [
        "# OpenClaw compatibility",
        "",
        "<!-- Written by `invoke openclaw.compat`; do not edit by hand. -->",
        "",
        f"fleet's plugins declare OpenClaw **{declared_range.floor} to {declared_range.top}** "
        "(`openclaw.compat` in each plugin's package.json). Every stable release of that range "
        "on the npm registry is installed and runs the continuity scenario on a real gateway "
        "(`lab/openclaw/scenario.py`): deploy, a user turn, a child spawned and ended, the seed "
        "in the child, the child's answer recovered once, the next turn's recovery, `/mc "
        "subagents`, `/mc doctor`, `/mc settings`, every section of the parent's and the "
        "child's state free of OpenClaw's own text, an upgrade, and a rollback each when the "
        "Python core raises at import and when the entry throws at load, with the error named.",
        "",
        f"**Proven: {len(proven)} of {len(everything)} stable releases** "
        f"({', '.join(_ranges(proven, everything)) or 'none'}). "
        + (f"Excluded: {'; '.join(f'{r} ({why})' for r, why in sorted(excluded.items()))}. "
           if excluded else "Excluded: none. ")
        + (f"Proven for the plugin sources `{proof['sources'][:19]}…` at commit "
           f"`{proof['commit']}` on {proof['date']}."
           if proof.get("sources") else "The proof is not complete for any sources yet."),
        "",
        "The list of proven releases ships with the plugins (`fleet/plugins/"
        "openclaw-proven.json`): `invoke status` and `invoke doctor` compare each host's "
        "OpenClaw with it, and `invoke release` refuses plugins whose sources changed since "
        "the matrix ran (see docs/openclaw.md).",
        "",
        "A release marked *(older sources)* ran for plugin sources that have changed since: "
        "its marks tell what was, not what is proven, until the matrix runs it again.",
        "",
        "Seconds are the wall time of one deploy to one gateway as the control side sees it; "
        "`rb/up` is the slower rollback against the upgrade (a good deploy of a new release to "
        "the same running gateway; goal: at most 2).",
        "",
    ]
    header = ["release", *(_short(c) for c in scenario.CHECKS), "deploy s", "upgrade s",
              "rb py s", "rb js s", "rb/up", "date", "commit"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    failures = []
    for release in everything:
        row = read_row(release)
        if row is None:
            marks = ["–"] * len(scenario.CHECKS)
            cells = [release, *marks, "", "", "", "", "", "not run", ""]
        else:
            checks = row.get("checks") or {}
            marks = [_MARK[bool((checks.get(c) or {}).get("ok"))] if c in checks else "–"
                     for c in scenario.CHECKS]
            secs = row.get("seconds") or {}
            upgrade = secs.get("upgrade")
            slowest = max([secs.get("rollback_python") or 0, secs.get("rollback_entry") or 0])
            ratio = f"{slowest / upgrade:.1f}" if upgrade and slowest else ""
            cells = [release, *marks, _num(secs.get("deploy")), _num(upgrade),
                     _num(secs.get("rollback_python")), _num(secs.get("rollback_entry")),
                     ratio, row.get("date", ""), f"`{row.get('commit', '')}`"]
            failures += [f"- {release}, {name}: {(checks.get(name) or {}).get('detail', '')}"
                         for name in scenario.CHECKS
                         if name in checks and not checks[name].get("ok")]
        if release in excluded:
            cells[0] = f"{release} (excluded)"
        elif row is not None and sources and not is_current(row, sources):
            cells[0] = f"{release} *(older sources)*"
        lines.append("| " + " | ".join(cells) + " |")
    if failures:
        lines += ["", "## What failed", "", *failures]
    lines += ["", "## What each release hands the plugins", "",
              "Read off each release's corpus of turns (`tests/corpus/openclaw/<release>/`): where "
              "it says a turn is OpenClaw's own (run provenance in the hook ctx, or only on the "
              "message kept in the transcript; the announce run's id), the form of an announce "
              "turn's text as the prompt and as kept, where a child finds its task, and whether "
              "a user's message carries a timestamp. `fleet/continuity/origin.py` reads every "
              "one of them.", "",
              "| release | " + " | ".join(corpus.TRAITS) + " |",
              "|" + "---|" * (len(corpus.TRAITS) + 1)]
    for release in everything:
        found = corpus.traits(release)
        if found:
            lines.append(f"| {release} | " + " | ".join(found[t] for t in corpus.TRAITS) + " |")
    lines += ["", "## Running it", "",
              "```bash",
              "invoke openclaw.compat --versions all      # every stable release of the range",
              "invoke openclaw.compat --versions ci       # the releases CI tests",
              "invoke openclaw.compat --versions 2026.6.6,2026.7.35 --force",
              "```",
              "",
              "A release whose row is current for the plugin sources is not run again. Each "
              "run also rewrites that release's corpus of turns (`tests/corpus/openclaw/`), "
              "which the unit tests run the turn recogniser over.", ""]
    return "\n".join(lines)


def _num(value) -> str:
    return "" if value is None else f"{value:.1f}"


def _ranges(proven: list[str], everything: list[str]) -> list[str]:
    """`proven` as runs of consecutive releases of `everything`: ["2026.4.24 – 2026.9.6"]."""
    runs, current = [], []
    for release in everything:
        if release in proven:
            current.append(release)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return [r[0] if len(r) == 1 else f"{r[0]} – {r[-1]}" for r in runs]
