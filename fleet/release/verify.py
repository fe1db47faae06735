"""Verification: every version-bearing file of every component read, parsed and compared.

Release tools such as bump-my-version, python-semantic-release and commitizen rewrite the version
files they are configured with but let a file that drifted pass unnoticed (a recurring complaint in
their issue trackers); this checks that every occurrence agrees, read-only, and names the file and
the value of every problem.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from fleet.continuity import openclawrange
from fleet.release import compatproof, ecosystem, entries
from fleet.release.component import Project
from fleet.release.error import ReleaseError

if TYPE_CHECKING:  # rich is imported when printing only
    from rich.table import Table


@dataclass
class Row:
    """One version-bearing file of one component."""

    component: str
    path: str
    key: str
    version: Optional[str]
    problem: Optional[str] = None


@dataclass
class Report:
    """Everything verify found; `ok` iff no problems."""

    rows: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    versions: dict = field(default_factory=dict)  # component -> agreed version, or None
    notes: list = field(default_factory=list)  # what was checked how, or skipped and why

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "versions": self.versions,
            "files": [vars(r) for r in self.rows],
            "problems": self.problems,
            "notes": self.notes,
        }

    def raise_for_problems(self, context: str) -> None:
        """Raise ReleaseError listing every problem (used as a preflight)."""
        if self.problems:
            lines = "\n".join(f"  - {p}" for p in self.problems)
            raise ReleaseError(f"{context}: `invoke verify` finds problems:\n{lines}\n"
                               "fix: make the files agree (edit them), then run `invoke verify`")


def valid_version(value: str) -> Optional[Version]:
    try:
        return Version(value)
    except InvalidVersion:
        return None


def verify(project: Project, overrides: Optional[dict] = None, js: bool = False,
           pinned_node: Optional[str] = None, proof: bool = False) -> Report:
    """Read every component's files; `overrides` ({id: version}) checks a planned bump's rules.

    `js`: also import each plugin's OpenClaw entry under Node >= 24 (`pinned_node`, else `node`
    on PATH: `fleet.release.entries`); without such a Node the import is skipped and a note
    says so. `proof`: also say, as a note, whether the OpenClaw matrix proved these plugin
    sources (`compatproof`): current, stale or never proven is not a problem here (the release
    refuses it), a malformed proof file is.
    """
    report = Report()
    for comp in project.components.values():
        seen: dict[str, list[str]] = {}
        for vf in comp.files:
            row = Row(comp.id, vf.path, vf.key, None)
            report.rows.append(row)
            try:
                row.version = vf.read(project.root)
            except ReleaseError as exc:
                row.problem = str(exc)
                report.problems.append(f"{comp.id}: {exc}")
                continue
            wrong = ecosystem.problem(row.version, vf.ecosystem)
            if wrong:
                row.problem = wrong
                report.problems.append(
                    f"{comp.id}: {vf.path} `{vf.key}` = {row.version!r} is {wrong}; fix: write "
                    "a version such as 5.0.0")
            seen.setdefault(row.version, []).append(vf.label)
        if len(seen) > 1:
            detail = "; ".join(f"{', '.join(labels)} = {v!r}" for v, labels in seen.items())
            report.problems.append(f"{comp.id}: version files disagree: {detail}")
            for row in report.rows:
                if row.component == comp.id and row.problem is None:
                    row.problem = "disagrees"
        agreed = next(iter(seen)) if len(seen) == 1 else None
        eco = ecosystem.component_ecosystem(vf.ecosystem for vf in comp.files)
        if agreed is not None and ecosystem.order_key(agreed, eco) is None:
            agreed = None
        report.versions[comp.id] = agreed
        for path in comp.ships:
            if not (Path(project.root) / path).exists():
                report.problems.append(f"{comp.id}: shipped path {path} is missing; restore it "
                                       f"or fix `ships` of [tool.fleet.components.{comp.id}]")
    package_problems(project, report)
    versions = dict(report.versions)
    versions.update(overrides or {})
    report.problems.extend(dependency_problems(project, versions))
    report.problems.extend(compat_problems(project))
    if js:
        node = entries.find_node(pinned_node)
        found, _ = entries.entries(project)
        report.problems.extend(entries.import_problems(project, node))
        if node.path is None:
            report.notes.append(f"OpenClaw entries not imported: {node.note}")
        else:
            report.notes.append(f"OpenClaw entries imported with {node.note}: "
                                + ", ".join(str(p.relative_to(Path(project.root).resolve()))
                                            for _, p in found))
    if proof:
        try:
            found_proof = compatproof.verdict(project.root)
        except ReleaseError as exc:
            report.problems.append(f"OpenClaw proof: {exc}")
        else:
            report.notes.append(f"OpenClaw proof: {found_proof.describe()}"
                                + ("" if found_proof.current
                                   else f"; `invoke release` refuses these sources until "
                                        f"`{compatproof.RENEW_COMMAND}` proves them"))
    return report


def package_problems(project: Project, report: Report) -> None:
    """The plugins' OpenClaw packages built in `dist/` (`<name>-<version>.tgz`, npmpackage):
    a row per version-bearing file inside each, which must say the version its name says, and
    the current version's package the component's version. A package of another version is an
    older build, kept (its name and content still must agree)."""
    from fleet.release import npmpackage  # noqa: PLC0415  (it imports this module)

    dist = Path(project.root) / "dist"
    for comp in npmpackage.plugin_components(project):
        rel = f"{Path(comp.manifest).parent.as_posix()}/package.json"
        try:
            name = json.loads((Path(project.root) / rel).read_text(encoding="utf-8"))["name"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # the version check reports the file
        prefix = npmpackage.tarball_name(str(name), "")[:-len(".tgz")]
        for path in sorted(dist.glob(f"{prefix}*.tgz")):
            named = path.name[len(prefix):-len(".tgz")]
            if not named[:1].isdigit():
                continue  # another package whose name starts with this one's
            shown = path.relative_to(project.root).as_posix()
            try:
                inside = npmpackage.read_versions(path)
            except ReleaseError as exc:
                report.rows.append(Row(comp.id, shown, "package/", None, "unreadable"))
                report.problems.append(f"{comp.id}: {exc}")
                continue
            for member, version in inside.items():
                row = Row(comp.id, shown, f"{member}:version", version)
                report.rows.append(row)
                if version != named:
                    row.problem = f"the tarball's name says {named}"
                    report.problems.append(
                        f"{comp.id}: {shown} `{member}` version = {version!r}, but its name "
                        f"says {named}; fix: remove it and run `invoke build --npm`")


def compat_problems(project: Project) -> list:
    """The OpenClaw versions the plugins support: declared by every plugin, in every field, the
    same way. Fields: package.json `openclaw.compat.pluginApi` (">=floor") and
    `openclaw.compat.minGatewayVersion`, the manifest's `minOpenClawVersion` (the floor), and
    `openclaw.build.openclawVersion` (the top of the range). The installer refuses a gateway below
    the floor (fleet/continuity/openclawrange.py): a plugin that declared another floor, or none,
    would make that refusal say something the release does not mean."""
    root = Path(project.root)
    problems: list = []
    floors: dict = {}
    verified: dict = {}
    for comp in project.components.values():
        if not comp.manifest:
            continue
        pkg = ((root / comp.manifest).parent / "package.json").relative_to(root).as_posix()
        try:
            package = json.loads((root / pkg).read_text(encoding="utf-8"))
            manifest = json.loads((root / comp.manifest).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # reported by the version check
        block = package.get("openclaw") if isinstance(package, dict) else None
        block = block if isinstance(block, dict) else {}
        compat = block.get("compat") if isinstance(block.get("compat"), dict) else {}
        build = block.get("build") if isinstance(block.get("build"), dict) else {}
        api = str(compat.get("pluginApi") or "")
        mine = {f"{pkg} openclaw.compat.pluginApi": api.split(">=", 1)[-1].strip() or None,
                f"{pkg} openclaw.compat.minGatewayVersion": compat.get("minGatewayVersion"),
                f"{comp.manifest} minOpenClawVersion": manifest.get("minOpenClawVersion")}
        built = {f"{pkg} openclaw.build.openclawVersion": build.get("openclawVersion")}
        missing = [key for key, value in {**mine, **built}.items() if not value]
        if missing:
            problems.append(f"{comp.id}: no {', '.join(missing)}; every plugin declares the "
                            'OpenClaw versions it supports, e.g. "openclaw": {"compat": '
                            '{"pluginApi": ">=2026.4.24", "minGatewayVersion": "2026.4.24"}, '
                            '"build": {"openclawVersion": "2026.9.6"}} and "minOpenClawVersion"')
            continue
        try:
            openclawrange.declared(package, pkg)
        except openclawrange.CompatError as exc:
            problems.append(f"{comp.id}: {exc}")
            continue
        floors.update(mine)
        verified.update(built)
    for what, values in (("floor", floors), ("verified version", verified)):
        if len({str(v) for v in values.values()}) > 1:
            detail = "; ".join(f"{k} = {v}" for k, v in values.items())
            problems.append(f"the plugins' OpenClaw {what} differs: {detail}; make them equal")
    return problems


def dependency_problems(project: Project, versions: dict) -> list:
    """Broken `requires` rules: unknown component, or a version outside the specifier."""
    problems = []
    by_name = {canonicalize_name(cid): cid for cid in project.components}
    for comp in project.components.values():
        try:
            reqs = comp.requires(project.root)
        except ReleaseError as exc:
            problems.append(f"{comp.id}: {exc}")
            continue
        for raw in reqs:
            where = f"{comp.manifest} `requires`"
            try:
                req = Requirement(raw)
            except InvalidRequirement as exc:
                problems.append(f"{comp.id}: {where} entry {raw!r} is not a valid requirement "
                                f"({exc}); fix: write e.g. \"memory-continuity>=5\"")
                continue
            target = by_name.get(canonicalize_name(req.name))
            if target is None:
                problems.append(f"{comp.id}: {where} names {req.name!r}, which is not a declared "
                                "component; fix: declare it in [tool.fleet.components] or drop "
                                "the rule")
                continue
            have = versions.get(target)
            if have is None or valid_version(have) is None:
                continue  # the target's own problem is already reported
            if req.specifier and not req.specifier.contains(have, prereleases=True):
                problems.append(f"{comp.id}: {where} needs {raw!r} but {target} is {have}; "
                                f"fix: change the rule in {comp.manifest} or release a matching "
                                f"{target}")
    return problems


def render(report: Report) -> Table:
    """A rich table: component x file x key x version x status. Every cell is the checkout's
    text (a version file's value, a problem quoting it): shown escaped, never as markup."""
    from rich.table import Table  # noqa: PLC0415  (control side only, imported when printing)

    from fleet.terminal.text import cell  # noqa: PLC0415  (imports rich: the same reason)

    table = Table(title="fleet versions")
    for col in ("component", "file", "key", "version", "status"):
        table.add_column(col, overflow="fold")
    for row in report.rows:
        status = cell("ok", "green") if row.problem is None else cell(row.problem, "red")
        table.add_row(cell(row.component), cell(row.path), cell(row.key),
                      cell(row.version or "-"), status)
    return table
