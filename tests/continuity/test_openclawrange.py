"""Which OpenClaw releases a fleet release supports and was proven on: the order of versions, the
proof file as shipped and as it can be broken, and where each kind of OpenClaw lands."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from fleet.continuity.openclawrange import (
    MAX_FILE_BYTES,
    OUTSIDE,
    PROVEN,
    UNPROVEN,
    CompatError,
    Support,
    newer,
    parse_proof,
    version_key,
)

REPO = Path(__file__).resolve().parents[2]
PROOF = "fleet/plugins/openclaw-proven.json"


def release(root: Path, proof: object = None, floor: str = "2026.4.24",
            top: str = "2026.9.6") -> Path:
    """A release dir with two plugins declaring [floor, top] and, unless None, a proof file
    (a dict is written as JSON, bytes as they are)."""
    for pkg in ("memory_continuity", "mc"):
        plugin = root / "fleet" / "plugins" / pkg
        plugin.mkdir(parents=True)
        (plugin / "package.json").write_text(json.dumps(
            {"name": pkg, "openclaw": {"compat": {"pluginApi": f">={floor}",
                                                  "minGatewayVersion": floor},
                                       "build": {"openclawVersion": top}}}))
    if proof is not None:
        raw = proof if isinstance(proof, bytes) else json.dumps(proof).encode()
        (root / PROOF).write_bytes(raw)
    return root


def proof(proven=("2026.4.24", "2026.9.6"), excluded=None) -> dict:
    return {"proven": list(proven), "excluded": excluded or {}, "sources": "", "commit": "",
            "date": ""}


def test_prereleases_and_corrections_order_below_their_release():
    assert newer("2026.5.3", "2026.5.3-1") and newer("2026.9.1", "2026.9.1-beta.1")
    assert newer("2026.9.1-beta.2", "2026.9.1-beta.1") and newer("2026.10.1", "2026.9.30")
    assert version_key("v2026.9.6") == version_key("2026.9.6+build.7")
    with pytest.raises(ValueError, match="not a version"):
        version_key("latest")


def test_the_shipped_proof_is_read_and_its_releases_are_proven():
    support = Support.of_release(REPO)
    assert support.range.floor == "2026.4.24" and support.range.top == "2026.9.6"
    states = [support.classify(v).state for v in support.proof.proven]
    assert states and set(states) == {PROVEN}
    assert {support.classify(v).state for v in support.proof.excluded} <= {OUTSIDE}


@pytest.mark.parametrize("version, state, words", [
    ("2026.4.24", PROVEN, "is proven for this release (proven on 2026.4.24, 2026.9.6)"),
    ("2026.9.6", PROVEN, "is proven for this release"),
    ("2026.6.6", UNPROVEN, "was not proven with this release (proven on 2026.4.24, 2026.9.6): "
                           "a pre-release, or a release the compat matrix has not run"),
    ("2026.5.3-1", UNPROVEN, "was not proven with this release"),
    ("2026.9.6-beta.1", UNPROVEN, "was not proven with this release"),  # below the top
    ("2026.4.24-beta.1", OUTSIDE, "is older than this release supports (>=2026.4.24 up to "
                                  "2026.9.6, declared in fleet/plugins/mc/package.json); "
                                  "upgrade OpenClaw"),
    ("2026.3.28", OUTSIDE, "is older than this release supports"),
    ("2026.9.7-beta.1", OUTSIDE, "is newer than every release this one was proven on (proven "
                                 "on 2026.4.24, 2026.9.6; declared >=2026.4.24 up to "
                                 "2026.9.6)"),
    ("2026.10.1", OUTSIDE, "is newer than every release this one was proven on"),
    ("2026.7.35", OUTSIDE, "is excluded from this release's range: its announce turn drops "
                           "the child's result"),
])
def test_each_openclaw_lands_in_one_state_with_a_reason(tmp_path, version, state, words):
    support = Support.of_release(release(tmp_path, proof(excluded={
        "2026.7.35": "its announce turn drops the child's result"})))
    verdict = support.classify(version)
    assert (verdict.state, verdict.version) == (state, version)
    assert verdict.message.startswith(f"OpenClaw {version} ") and words in verdict.message
    assert verdict.as_dict() == {"state": state, "version": version, "message": verdict.message}


def test_only_an_openclaw_below_the_floor_stays_refused_with_the_flag(tmp_path):
    support = Support.of_release(release(tmp_path, proof()))
    assert support.classify("2026.9.6").accepted(False)
    for version in ("2026.6.6", "2026.10.1", "nightly"):
        assert not support.classify(version).accepted(False)
        assert support.classify(version).accepted(True)
    too_old = support.classify("2026.3.28")
    assert too_old.too_old and not too_old.accepted(True)


def test_a_release_without_a_proof_file_proves_nothing_and_says_so(tmp_path):
    support = Support.of_release(release(tmp_path))
    assert support.proof is None
    verdict = support.classify("2026.9.6")
    assert verdict.state == UNPROVEN
    assert f"this release carries no {PROOF}: no OpenClaw release counts as proven" in \
        verdict.message
    assert support.classify("2026.3.28").state == OUTSIDE  # the range still holds


def test_many_proven_releases_are_shown_as_a_span(tmp_path):
    many = [f"2026.{m}.{d}" for m in (4, 5, 6, 7) for d in (24, 28)]
    support = Support.of_release(release(tmp_path, proof(proven=many)))
    assert "(proven on 8 releases from 2026.4.24 to 2026.7.28)" in \
        support.classify("2026.9.6").message


@pytest.mark.parametrize("raw, says", [
    (b"{", "not JSON"),
    (b"[]", "must be a JSON object with the key 'proven'"),
    (b"{}", "key 'proven' must be a list of OpenClaw versions"),
    (b'{"proven": "2026.9.6"}', "key 'proven' must be a list of OpenClaw versions"),
    (b'{"proven": ["2026.9.6", "soon"]}', "key 'proven': 'soon' is not a version"),
    (b'{"proven": [], "excluded": ["2026.5.7"]}', "key 'excluded' must map an OpenClaw version"),
    (b'{"proven": [], "excluded": {"5.7": "x"}}', "key 'excluded': '5.7' is not a version"),
    (b" " * (MAX_FILE_BYTES + 1), f"larger than {MAX_FILE_BYTES} bytes, not a proof file"),
])
def test_a_malformed_proof_is_an_error_naming_the_file_and_the_key(tmp_path, raw, says):
    root = release(tmp_path, raw)
    with pytest.raises(CompatError) as exc:
        Support.of_release(root)
    assert str(exc.value).startswith(f"{root}: {PROOF}: {says}"), str(exc.value)
    assert "restore it from git or run the matrix" in str(exc.value)


def test_the_proofs_other_keys_are_kept_as_data():
    data = {"proven": ["2026.9.6"], "sources": "sha256:ab", "commit": "c0ffee",
            "date": "2026-12-01", "matrix": {"runs": 41}}
    assert parse_proof(json.dumps(data).encode(), "p").data == data


def test_an_artifact_is_read_as_its_release_dir_would_be(tmp_path):
    root = release(tmp_path / "tree", proof(proven=("2026.9.6",)))
    art = tmp_path / "a.pyz"
    with zipfile.ZipFile(art, "w") as zf:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(root).as_posix())
    support = Support.of_artifact(art)
    assert support == Support.of_release(root)
    assert support.classify("2026.4.24").state == UNPROVEN


def test_an_oversized_proof_in_an_artifact_is_refused_without_reading_it(tmp_path):
    art = tmp_path / "a.pyz"
    with zipfile.ZipFile(art, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(PROOF, b"[" + b" " * (10 * MAX_FILE_BYTES) + b"]")
    with pytest.raises(CompatError, match=f"{PROOF}: larger than {MAX_FILE_BYTES} bytes"):
        Support.of_artifact(art)
    (tmp_path / "junk.pyz").write_bytes(b"not a zip")
    with pytest.raises(CompatError, match="junk.pyz: cannot read the artifact"):
        Support.of_artifact(tmp_path / "junk.pyz")
