"""Version bumps and the changelog section."""

from __future__ import annotations

import re

import pytest

from fleet.release import changelog
from fleet.release.bump import next_version
from fleet.release.error import ReleaseError
from fleet.release.version_file import VersionFile


@pytest.mark.parametrize("current,part,expected", [
    ("5.0.0", "patch", "5.0.1"),
    ("5.0.0", "minor", "5.1.0"),
    ("5.2.7", "major", "6.0.0"),
    ("5.0.0", "pre", "5.0.1rc1"),
    ("5.0.1rc1", "pre", "5.0.1rc2"),
    ("5.0.1b2", "pre", "5.0.1b3"),
    ("5.0.1rc2", "patch", "5.0.1"),
    ("5.1.0rc1", "minor", "5.1.0"),
    ("6.0.0rc1", "major", "6.0.0"),
    ("5.0.1rc1", "minor", "5.1.0"),
    ("2.1", "patch", "2.1.1"),
    ("2.1.0.post1", "patch", "2.1.1"),
])
def test_part_bumps(current, part, expected):
    assert next_version(current, part=part) == expected


def test_default_part_is_patch():
    assert next_version("2.1.0") == "2.1.1"


def test_explicit_version_is_normalized():
    assert next_version("5.0.0", explicit="5.1.0-RC1") == "5.1.0rc1"


@pytest.mark.parametrize("explicit", ["5.0.0", "4.9.9", "5.0.0rc1"])
def test_explicit_version_must_be_greater(explicit):
    with pytest.raises(ReleaseError, match="not greater than the current 5.0.0"):
        next_version("5.0.0", explicit=explicit)


NPM_FILES = [VersionFile("fleet/plugins/mc/package.json", "version"),
             VersionFile("fleet/plugins/mc/openclaw.plugin.json", "version")]
PY_FILES = [VersionFile("pyproject.toml", "project.version"),
            VersionFile("fleet/__init__.py", "__version__")]


@pytest.mark.parametrize("files, explicit, why", [
    (NPM_FILES, "6", "fleet/plugins/mc/package.json `version` would hold it, and it is not "
                     "semver 2.0"),
    (NPM_FILES, "5.1.0rc1", "not semver 2.0"),
    (NPM_FILES + PY_FILES, "5.1.0-rc.1", "pyproject.toml `project.version` would hold it, and "
                                         "it is not PEP 440 in its canonical form"),
])
def test_a_version_invalid_where_it_goes_is_refused_naming_the_file(files, explicit, why):
    with pytest.raises(ReleaseError, match=re.escape(why)):
        next_version("5.0.0", explicit=explicit, files=files)


def test_each_ecosystem_gets_its_spelling():
    assert next_version("5.0.0", explicit="6.0.0", files=NPM_FILES) == "6.0.0"
    assert next_version("5.0.0", explicit="5.1.0-rc.1", files=NPM_FILES) == "5.1.0-rc.1"
    assert next_version("5.0.0", explicit="6", files=PY_FILES) == "6"
    assert next_version("5.0.0", part="pre", files=NPM_FILES) == "5.0.1-rc.1"
    assert next_version("5.0.1-rc.1", part="pre", files=NPM_FILES) == "5.0.1-rc.2"
    assert next_version("5.0.0", part="pre", files=PY_FILES) == "5.0.1rc1"
    with pytest.raises(ReleaseError, match="no spelling both npm"):
        next_version("5.0.0", part="pre", files=NPM_FILES + PY_FILES)
    assert next_version("5.0.0", part="minor", files=NPM_FILES + PY_FILES) == "5.1.0"


def test_invalid_explicit_version_and_unknown_part():
    with pytest.raises(ReleaseError, match="not a valid PEP 440"):
        next_version("5.0.0", explicit="five")
    with pytest.raises(ReleaseError, match="unknown --part 'huge'"):
        next_version("5.0.0", part="huge")
    with pytest.raises(ReleaseError, match="either --part or --version"):
        next_version("5.0.0", part="minor", explicit="6.0.0")


def test_section_groups_by_conventional_type():
    commits = [("a1", "feat(mc): add /mc history"), ("b2", "fix: keep child output as data"),
               ("c3", "docs: explain tags"), ("d4", "Plain subject"), ("e5", "feat!: new format"),
               ("f6", "release: mc v2.1.0")]
    text = changelog.section("mc", "2.2.0", commits, "2026-01-02", "mc-v2.1.0")
    assert text.startswith("## mc 2.2.0 (2026-01-02)\n")
    features = text.index("### Features")
    fixes = text.index("### Fixes")
    other = text.index("### Other")
    assert features < text.index("- **mc:** add /mc history (a1)") < fixes
    assert features < text.index("- **breaking:** new format (e5)") < fixes
    assert fixes < text.index("- keep child output as data (b2)") < other
    assert other < text.index("- docs: explain tags (c3)")
    assert other < text.index("- Plain subject (d4)")
    assert "release: mc" not in text
    assert "Changes since mc-v2.1.0." in text


def test_empty_groups_are_left_out():
    text = changelog.section("mc", "2.2.0", [("a1", "fix: one")], "2026-01-02")
    assert "### Fixes" in text and "### Features" not in text and "### Other" not in text
    assert "First release." in text


def test_prepend_puts_new_section_above_older_ones():
    old = "# Changelog\n\nIntro.\n\n## mc 2.1.0 (2025-01-01)\n\n- x\n"
    new = changelog.prepend(old, "## mc 2.2.0 (2026-01-01)\n\n- y\n")
    assert new.index("Intro.") < new.index("## mc 2.2.0") < new.index("## mc 2.1.0")
    assert new.endswith(old[old.index("## mc 2.1.0"):])
    assert changelog.has_section(new, "mc", "2.2.0")
    assert not changelog.has_section(new, "mc", "2.3.0")


def test_prepend_creates_a_titled_file():
    assert changelog.prepend(None, "## a 1 (d)\n").startswith("# Changelog\n\n## a 1 (d)")


def test_only_our_own_release_commits_are_left_out():
    commits = [("a1", "release: mc v2.1.0"), ("b2", "release: memory-continuity v5.0.0, mc v2.1.0"),
               ("c3", "release: reuse the build when its inputs match")]
    text = changelog.section("mc", "2.2.0", commits, "2026-01-02")
    assert "- release: reuse the build when its inputs match (c3)" in text
    assert "(a1)" not in text and "(b2)" not in text


def test_release_messages_round_trip():
    versions = {"memory-continuity": "5.0.0", "mc": "2.1.0rc1"}
    message = changelog.commit_message(versions)
    assert message == "release: memory-continuity v5.0.0, mc v2.1.0rc1"
    assert changelog.parse_commit_message(message) == versions
    assert changelog.parse_commit_message("release: the tooling got faster") == {}
