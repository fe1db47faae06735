"""The OpenClaw proof: are these plugin sources the ones the OpenClaw matrix proved?

The plugins and the continuity core they run must work on every stable OpenClaw release of the
range they declare. Proving that takes hours on real gateways (`invoke openclaw.compat`), so it
is part of releasing, not of CI: the matrix records what it proved in `PROOF_FILE`, which ships
in the artifact, and `invoke release` refuses plugin sources the record does not match.

The record names its sources by `sources_digest`: a SHA-256 over the path and content of every
file of `fleet/continuity` and `fleet/plugins` that the artifact ships, and of the part of
`fleet/gateway` that runs the plugins under OpenClaw (the worker behind each JS entry and what it
loads them with, `WORKER_FILES`), working-tree content, except the record itself and the
top-level `version` of each plugin's `package.json` and `openclaw.plugin.json`. A release's
version bump therefore keeps a proof current; any change of code, of a shipped data file or of
a manifest's other fields makes it stale. No git needed: the matrix calls `sources_digest` to
stamp its rows.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Iterable, Optional

from fleet.continuity.openclawrange import (
    MAX_FILE_BYTES,
    PROOF_KEYS,
    CompatError,
    Proof,
    parse_proof,
)
from fleet.continuity.statelayout import StateLayout
from fleet.release.component import Component, Project
from fleet.release.error import ReleaseError
from fleet.release.hostside import package_files

PROOF_FILE = StateLayout.RELEASE_PROOF  # its readers on a host: fleet.continuity.openclawrange
PROVEN_PACKAGES = ("fleet/continuity", "fleet/plugins")
# fleet/gateway/worker.py and the modules it imports: the plugins' runtime under OpenClaw
WORKER_FILES = tuple(f"fleet/gateway/{name}.py" for name in (
    "worker", "api", "commands", "hooks", "loader", "layout", "manifest"))
PROVEN_PATHS = PROVEN_PACKAGES + WORKER_FILES
MANIFESTS = ("package.json", "openclaw.plugin.json")  # their `version` is left out
RENEW_COMMAND = "invoke openclaw.compat --versions all"
CURRENT, STALE, NEVER = "current", "stale", "never proven"
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")


def sources_digest(root: Path) -> str:
    """`sha256:<hex>` of the plugin and continuity sources under `root` (see the module doc)."""
    root = Path(root)
    total = hashlib.sha256()
    worker = [rel for rel in WORKER_FILES if (root / rel).is_file()]
    for rel in sorted(package_files(root, PROVEN_PACKAGES) + worker):
        if rel == PROOF_FILE:
            continue
        data = (root / rel).read_bytes()
        if rel.rsplit("/", 1)[-1] in MANIFESTS:
            data = _without_version(rel, data)
        total.update(f"{rel}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    return f"sha256:{total.hexdigest()}"


def _without_version(rel: str, data: bytes) -> bytes:
    """A manifest as canonical JSON without its top-level `version`."""
    try:
        parsed = json.loads(data.decode("utf-8"))
    except ValueError as exc:
        raise ReleaseError(f"{rel}: invalid JSON ({exc}); fix the syntax") from exc
    if isinstance(parsed, dict):
        parsed.pop("version", None)
    return json.dumps(parsed, sort_keys=True, ensure_ascii=False).encode("utf-8")


def read_proof(root: Path) -> Optional[Proof]:
    """The proof under `root`, None when the file does not exist; ReleaseError naming the file
    and the key when it is malformed. Its format is the host side's
    (fleet.continuity.openclawrange); a release also wants every key and a well-formed stamp."""
    path = Path(root) / PROOF_FILE
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ReleaseError(f"{PROOF_FILE}: cannot read it ({exc})") from exc
    fix = f"fix: rewrite it with `{RENEW_COMMAND}`, or restore it with `git checkout {PROOF_FILE}`"
    try:
        proof = parse_proof(raw, PROOF_FILE)
    except CompatError as exc:
        raise ReleaseError(f"{str(exc).split('; it is written by', 1)[0]}; {fix}") from None
    unknown = sorted(set(proof.data) - set(PROOF_KEYS))
    missing = [k for k in PROOF_KEYS if k not in proof.data]
    if unknown or missing:
        what = "; ".join(filter(None, (unknown and f"unknown keys {unknown}",
                                       missing and f"missing keys {missing}")))
        raise ReleaseError(f"{PROOF_FILE}: {what} (the keys are {', '.join(PROOF_KEYS)}); {fix}")
    _check_stamp(proof, fix)
    return proof


def _check_stamp(proof: Proof, fix: str) -> None:
    """`sources`, `commit` and `date` are empty together (never proven) or well-formed."""
    if not proof.sources:
        return
    if not _DIGEST.match(proof.sources):
        raise ReleaseError(f"{PROOF_FILE}: `sources` {proof.sources!r} is not a digest "
                           f"sha256:<64 hex digits>; {fix}")
    if not _COMMIT.match(proof.commit):
        raise ReleaseError(f"{PROOF_FILE}: `commit` {proof.commit!r} is not a git commit id "
                           f"(hex), and `sources` is set; {fix}")
    try:
        date.fromisoformat(proof.date)
    except ValueError as exc:
        raise ReleaseError(f"{PROOF_FILE}: `date` {proof.date!r} is not a day YYYY-MM-DD, and "
                           f"`sources` is set; {fix}") from exc
    if not proof.proven:
        raise ReleaseError(f"{PROOF_FILE}: `proven` is empty, and `sources` is set; {fix}")


@dataclass(frozen=True)
class Verdict:
    """Whether the sources under a root are the ones proven: `state` is CURRENT, STALE or
    NEVER; `proof` is the record (None: no file), `digest` the sources' digest now."""

    state: str
    digest: str
    proof: Optional[Proof]

    @property
    def current(self) -> bool:
        return self.state == CURRENT

    def describe(self) -> str:
        """One line: `current: proven on OpenClaw ... at <commit> (<date>)`, `stale since ...`
        or `never proven`."""
        proof = self.proof
        if proof is None:
            return f"never proven (no {PROOF_FILE})"
        if self.state == NEVER:
            return f"never proven ({PROOF_FILE} has no `sources`)"
        where = f"{proof.commit[:12]} ({proof.date})"
        if self.state == CURRENT:
            left_out = f"; left out: {', '.join(proof.excluded)}" if proof.excluded else ""
            return f"current: proven on OpenClaw {', '.join(proof.proven)} at {where}{left_out}"
        return (f"stale since {where}: the plugins or the continuity core changed after the "
                "OpenClaw matrix proved them")

    def changelog_line(self) -> str:
        """The line a release made with --allow-unproven writes into its changelog section."""
        proof = self.proof
        if self.state == STALE and proof is not None:
            last = f"last proven on {proof.commit[:12]}, {proof.date}"
        else:
            last = "never proven"
        return (f"OpenClaw compatibility: not proven for these sources ({last}); released with "
                "--allow-unproven")


def verdict(root: Path) -> Verdict:
    """Compare the sources under `root` with the proof there; ReleaseError if the proof file is
    malformed or a manifest cannot be read."""
    proof = read_proof(root)
    digest = sources_digest(root)
    if proof is None or not proof.sources:
        return Verdict(NEVER, digest, proof)
    return Verdict(CURRENT if proof.sources == digest else STALE, digest, proof)


def renew_hint() -> str:
    """The fix for an unproven release: renew the proof, or release without it."""
    return (f"`{RENEW_COMMAND}` (it writes docs/compat.md and {PROOF_FILE}), commit both, "
            "release again; or release with --allow-unproven")


def ships_proven_code(comp: Component) -> bool:
    """Whether a component can ship plugin or continuity code: one of its `ships` paths holds
    or lies inside a proven path (`PROVEN_PATHS`), or it declares none (then what it ships is
    not narrowed)."""
    if not comp.ships:
        return True
    return any(_overlap(path, pkg) for path in comp.ships for pkg in PROVEN_PATHS)


def _overlap(a: str, b: str) -> bool:
    a, b = a.strip("/"), b.strip("/")
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def concerned(project: Project, ids: Iterable[str]) -> list:
    """The components among `ids` that ship plugin or continuity code, in the order given."""
    return [cid for cid in ids if ships_proven_code(project.component(cid))]
