"""The OpenClaw proof: which sources its digest covers, how its record is read, the verdict."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from release_fixtures import MAIN, commit_file, proof_text

from fleet.release.compatproof import (
    CURRENT,
    NEVER,
    PROOF_FILE,
    STALE,
    WORKER_FILES,
    concerned,
    read_proof,
    sources_digest,
    verdict,
)
from fleet.release.component import load_project
from fleet.release.error import ReleaseError
from fleet.release.verify import verify

PLUGINS = ("fleet/plugins/mc", "fleet/plugins/memory_continuity")
MANIFESTS = [f"{p}/{name}" for p in PLUGINS for name in ("package.json", "openclaw.plugin.json")]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the checkout's continuity core, plugins and the gateway modules that run them
    under OpenClaw, as the artifact would take them."""
    root = tmp_path / "src"
    for pkg in ("fleet/continuity", "fleet/plugins"):
        shutil.copytree(MAIN / pkg, root / pkg, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (root / "fleet" / "gateway").mkdir()
    for rel in WORKER_FILES:
        shutil.copy(MAIN / rel, root / rel)
    return root


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


# --- the digest ----------------------------------------------------------------------------------
def test_digest_ignores_version_bumps_and_the_proof_file(tree):
    before = sources_digest(tree)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", before)
    for rel in MANIFESTS:
        edit_json(tree / rel, lambda d: d.update(version="9.8.7-rc.1"))
    (tree / PROOF_FILE).write_text(proof_text(tree), encoding="utf-8")
    assert sources_digest(tree) == before
    (tree / PROOF_FILE).unlink()
    assert sources_digest(tree) == before


@pytest.mark.parametrize("rel", [
    "fleet/continuity/document.py",
    "fleet/plugins/mc/plugin.py",
    "fleet/plugins/memory_continuity/plugin.py",
    "fleet/plugins/memory_continuity/index.js",
    "fleet/plugins/bridge.mjs",  # each plugin's bridge.mjs is a link to this one
    "fleet/gateway/worker.py",  # the plugins' Python side under OpenClaw
    "fleet/gateway/hooks.py",
])
def test_digest_changes_for_a_code_change_in_each_package(tree, rel):
    before = sources_digest(tree)
    append(tree / rel, "\n// a change\n" if rel.endswith(("js", "mjs")) else "\n# a change\n")
    assert sources_digest(tree) != before


@pytest.mark.parametrize("rel,change", [
    ("fleet/plugins/mc/openclaw.plugin.json", lambda d: d.update(minOpenClawVersion="2026.5.7")),
    ("fleet/plugins/mc/package.json", lambda d: d["openclaw"]["build"].update(
        openclawVersion="2026.9.7")),
    ("fleet/plugins/memory_continuity/openclaw.plugin.json",
     lambda d: d.update(description="other words")),
    ("fleet/plugins/memory_continuity/package.json", lambda d: d.update(main="other.js")),
])
def test_digest_changes_for_a_manifest_field_other_than_version(tree, rel, change):
    before = sources_digest(tree)
    edit_json(tree / rel, change)
    assert sources_digest(tree) != before


def test_digest_follows_what_the_artifact_ships(tree):
    before = sources_digest(tree)
    (tree / "fleet/plugins/mc/__pycache__").mkdir()
    (tree / "fleet/plugins/mc/__pycache__/plugin.cpython-311.pyc").write_bytes(b"x")
    (tree / "fleet/plugins/mc/tests").mkdir()
    (tree / "fleet/plugins/mc/tests/test_x.py").write_text("x = 1\n")
    (tree / "fleet/continuity/store.py.orig").write_text("scratch")
    assert sources_digest(tree) == before
    (tree / "fleet/continuity/new.py").write_text("X = 1\n")
    assert sources_digest(tree) != before
    (tree / "fleet/continuity/new.py").unlink()
    assert sources_digest(tree) == before
    (tree / "fleet/continuity/tokens.py").unlink()
    assert sources_digest(tree) != before


def test_a_manifest_that_is_not_json_is_named(tree):
    (tree / MANIFESTS[0]).write_text("{ nope")
    with pytest.raises(ReleaseError, match=f"{MANIFESTS[0]}: invalid JSON"):
        sources_digest(tree)


# --- the record ----------------------------------------------------------------------------------
def write_proof(tree: Path, **fields) -> None:
    (tree / PROOF_FILE).write_text(proof_text(tree, **fields), encoding="utf-8")


def test_verdict_current_stale_and_never_proven(tree):
    write_proof(tree)
    found = verdict(tree)
    assert found.state == CURRENT and found.current
    assert found.describe() == ("current: proven on OpenClaw 2026.4.24, 2026.9.6 at "
                                "0123456789ab (2026-01-01)")
    append(tree / "fleet/continuity/store.py", "\n# later\n")
    found = verdict(tree)
    assert found.state == STALE and not found.current
    assert found.describe().startswith("stale since 0123456789ab (2026-01-01): the plugins or "
                                       "the continuity core changed")
    assert found.changelog_line() == (
        "OpenClaw compatibility: not proven for these sources (last proven on 0123456789ab, "
        "2026-01-01); released with --allow-unproven")
    write_proof(tree, excluded={"2026.5.7": "withdrawn by its publisher"})
    assert verdict(tree).describe().endswith("(2026-01-01); left out: 2026.5.7")
    write_proof(tree, sources="", commit="", date="")
    found = verdict(tree)
    assert found.state == NEVER and "has no `sources`" in found.describe()
    assert "(never proven)" in found.changelog_line()
    (tree / PROOF_FILE).unlink()
    assert verdict(tree).state == NEVER and "no fleet/plugins/openclaw-proven.json" in \
        verdict(tree).describe()


def test_the_record_this_checkout_ships_is_well_formed():
    assert read_proof(MAIN) is not None


@pytest.mark.parametrize("text,named", [
    ("{not json", "not JSON"),
    ("[]", "must be a JSON object"),
    ('{"proven": [], "excluded": {}, "sources": "", "commit": ""}', "missing keys ['date']"),
    ('{"proven": [], "excluded": {}, "sources": "", "commit": "", "date": "", "by": "x"}',
     "unknown keys ['by']"),
    ('{"proven": "2026.9.6", "excluded": {}, "sources": "", "commit": "", "date": ""}',
     "key 'proven' must be a list"),
    ('{"proven": ["latest"], "excluded": {}, "sources": "", "commit": "", "date": ""}',
     "key 'proven': 'latest' is not a version"),
    ('{"proven": [], "excluded": [], "sources": "", "commit": "", "date": ""}',
     "key 'excluded' must map an OpenClaw version"),
    ('{"proven": [], "excluded": {"next": "x"}, "sources": "", "commit": "", "date": ""}',
     "key 'excluded': 'next' is not a version"),
    ('{"proven": [], "excluded": {}, "sources": 1, "commit": "", "date": ""}',
     "key 'sources' must be a string"),
    ('{"proven": ["2026.9.6"], "excluded": {}, "sources": "md5:00", "commit": "abcdef1", '
     '"date": "2026-01-01"}', "`sources` 'md5:00' is not a digest"),
    ('{"proven": ["2026.9.6"], "excluded": {}, "sources": "sha256:' + "0" * 64 + '", '
     '"commit": "", "date": "2026-01-01"}', "`commit` '' is not a git commit id"),
    ('{"proven": ["2026.9.6"], "excluded": {}, "sources": "sha256:' + "0" * 64 + '", '
     '"commit": "abcdef1", "date": "2026-13-01"}', "`date` '2026-13-01' is not a day"),
    ('{"proven": [], "excluded": {}, "sources": "sha256:' + "0" * 64 + '", '
     '"commit": "abcdef1", "date": "2026-01-01"}', "`proven` is empty"),
    ('{"proven": [], "excluded": {}, "sources": "", "commit": "", "date": "", "pad": "'
     + "x" * 70000 + '"}', "larger than 65536 bytes"),
])
def test_a_malformed_record_is_an_error_naming_the_file_and_key(tree, text, named):
    (tree / PROOF_FILE).write_text(text, encoding="utf-8")
    with pytest.raises(ReleaseError) as err:
        verdict(tree)
    message = str(err.value)
    assert message.startswith(f"{PROOF_FILE}: ") and named in message
    assert "invoke openclaw.compat --versions all" in message  # and the fix


# --- who is concerned, and verify's note ---------------------------------------------------------
def test_components_that_ship_plugin_or_continuity_code(repo):
    project = load_project(repo.path)
    # memory-continuity and mc ship a plugin dir, fleet ships the whole package
    assert concerned(project, ["fleet", "mc", "memory-continuity"]) == [
        "fleet", "mc", "memory-continuity"]
    text = repo.read("pyproject.toml") + (
        '\n[tool.fleet.components.docs]\nfiles = ["docs/version.json:version"]\n'
        'ships = ["docs"]\n')
    commit_file(repo.path, "pyproject.toml", text, "chore: a docs component")
    assert concerned(load_project(repo.path), ["docs", "mc"]) == ["mc"]


def test_verify_notes_the_proof_and_fails_on_a_malformed_one(repo):
    project = load_project(repo.path)
    report = verify(project, proof=True)
    assert report.ok and report.notes == [
        "OpenClaw proof: current: proven on OpenClaw 2026.4.24, 2026.9.6 at 0123456789ab "
        "(2026-01-01)"]
    append(repo.path / "fleet/plugins/mc/index.js", "\n// uncommitted work counts\n")
    report = verify(project, proof=True)
    assert report.ok and report.notes[0].startswith("OpenClaw proof: stale since 0123456789ab")
    assert "`invoke release` refuses these sources" in report.notes[0]
    repo.write(PROOF_FILE, "{}")
    report = verify(project, proof=True)
    assert not report.ok and report.problems[0].startswith(f"OpenClaw proof: {PROOF_FILE}: ")
    assert verify(project).ok  # builds and releases read the proof through their own checks
