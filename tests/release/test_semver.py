"""Versions of npm files are ordered and validated as npm does (semver 2.0), and said as the
files hold them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from release_fixtures import commit_file

from fleet.release import semver
from fleet.release.bump import next_version
from fleet.release.error import ReleaseError
from fleet.release.version_file import VersionFile

NPM_FILES = (VersionFile.parse("p/package.json:version", "test"),
             VersionFile.parse("p/openclaw.plugin.json:version", "test"))

# semver.org §11's own example, lowest first
CHAIN = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
         "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"]


def test_precedence_follows_the_specs_example():
    keys = [semver.SemVer.parse(v).key() for v in CHAIN]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


ident = st.one_of(st.integers(0, 30).map(str),
                  st.sampled_from(["alpha", "beta", "rc", "dev", "x-1"]))
version = st.builds(lambda a, b, c, pre, build: semver.SemVer(a, b, c, tuple(pre), tuple(build)),
                    st.integers(0, 5), st.integers(0, 5), st.integers(0, 5),
                    st.lists(ident, max_size=3), st.lists(st.sampled_from(["b1", "7", "sha"]),
                                                          max_size=2))


@given(version, version)
def test_build_metadata_never_changes_precedence_and_parse_round_trips(a, b):
    assert semver.SemVer.parse(str(a)) == a
    plain = semver.SemVer(a.major, a.minor, a.patch, a.pre)
    assert a.key() == plain.key()
    assert (a.key() < b.key()) == semver.greater(str(b), str(a))


@pytest.mark.parametrize("current,new,why", [
    ("5.1.0-dev.1", "5.1.0-alpha.1", "words compare in ASCII order"),
    ("5.2.0", "5.2.0+build.1", "build metadata (after `+`) is ignored"),
    ("5.2.0-rc.10", "5.2.0-rc.9", "numbers compare as numbers (9 < 10)"),
    ("5.2.0", "5.2.0-rc.1", "a pre-release sorts below its release (5.2.0-rc.1 < 5.2.0)"),
    ("5.2.0-rc.1.2", "5.2.0-rc.1", "fewer identifiers sorts below"),
    ("5.2.0", "5.1.9", "5.1.9 is below 5.2.0")])
def test_not_greater_for_npm_is_refused_in_the_files_form_saying_which_rule(current, new, why):
    with pytest.raises(ReleaseError, match="not greater") as err:
        next_version(current, explicit=new, files=NPM_FILES)
    message = str(err.value)
    assert f"new version {new} is not greater than the current {current}" in message
    assert why in message
    # only the rule that decides: a build-metadata refusal says nothing of pre-releases
    others = {"ASCII", "build metadata", "as numbers", "below its release", "fewer"} - {
        word for word in ("ASCII", "build metadata", "as numbers", "below its release", "fewer")
        if word in why}
    assert not [word for word in others if word in message], message


@pytest.mark.parametrize("current,new", [("5.3.0-rc.1", "5.3.0-rc.1.2"),
                                         ("5.1.0-alpha.1", "5.1.0-dev.1"),
                                         ("5.2.0-rc.9", "5.2.0-rc.10"),
                                         ("5.2.0-rc.1", "5.2.0")])
def test_greater_for_npm_is_taken_as_written(current, new):
    assert next_version(current, explicit=new, files=NPM_FILES) == new


@pytest.mark.parametrize("current,part,new", [("5.3.0-rc.1.2", "pre", "5.3.0-rc.1.3"),
                                              ("5.3.0-rc.1.2", "patch", "5.3.0"),
                                              ("5.3.0", "pre", "5.3.1-rc.1"),
                                              ("5.3.0-beta", "pre", "5.3.0-beta.1"),
                                              ("5.3.1", "minor", "5.4.0")])
def test_part_bumps_of_semver_versions(current, part, new):
    assert next_version(current, part=part, files=NPM_FILES) == new


def test_a_valid_semver_pre_release_with_several_numbers_is_verified_and_released(repo):
    for name in ("package.json", "openclaw.plugin.json"):
        rel = f"fleet/plugins/mc/{name}"
        data = json.loads(repo.read(rel))
        data["version"] = "2.2.0-rc.1.2"
        commit_file(repo.path, rel, json.dumps(data, indent=2) + "\n", f"mc {name} rc")
    from fleet.release.component import load_project
    from fleet.release.cut import run_release
    from fleet.release.verify import verify

    report = verify(load_project(repo.path))
    assert report.versions["mc"] == "2.2.0-rc.1.2", report.problems
    with pytest.raises(ReleaseError, match="2.2.0-rc.1 is not greater than the current "
                                           "2.2.0-rc.1.2"):
        run_release(repo.path, component="mc", version="2.2.0-rc.1", push=False,
                    today="2026-01-02", echo=lambda _line: None)
    result = run_release(repo.path, component="mc", part="pre", push=False, today="2026-01-02",
                         echo=lambda _line: None)
    assert verify(load_project(repo.path)).versions["mc"] == "2.2.0-rc.1.3", result
