"""Version files are read from the right key and rewritten without touching any other byte."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.release.error import ReleaseError
from fleet.release.version_file import VersionFile


def changed_only_value(before: str, after: str, old: str, new: str) -> bool:
    """True when `after` is `before` with exactly one occurrence of `old` turned into `new`."""
    i = 0
    while True:
        i = before.find(old, i)
        if i < 0:
            return False
        if before[:i] + new + before[i + len(old):] == after:
            return True
        i += 1


def test_json_top_level_key_keeps_formatting(tmp_path):
    text = ('{\n    "name": "x",\n    "nested": {"version": "9.9.9"},\n'
            '    "version" :   "1.2.3",  "tail": [1, 2]\n}')
    vf = VersionFile("a.json", "version")
    assert vf.locate(text)[2] == "1.2.3"
    out = vf.replace(text, "1.3.0")
    assert changed_only_value(text, out, '"1.2.3"', '"1.3.0"')
    assert json.loads(out)["nested"]["version"] == "9.9.9"


def test_json_nested_key_path_and_last_duplicate_wins():
    text = '{"a": {"b": {"version": "1.0"}}, "version": "0.1", "version": "0.2"}'
    assert VersionFile("x.json", "a.b.version").locate(text)[2] == "1.0"
    top = VersionFile("x.json", "version")
    assert top.locate(text)[2] == json.loads(text)["version"] == "0.2"
    assert json.loads(top.replace(text, "0.3"))["version"] == "0.3"


def test_crlf_file_keeps_its_line_endings(tmp_path):
    raw = b'{\r\n  "version": "2.0.0",\r\n  "x": 1\r\n}\r\n'
    (tmp_path / "m.json").write_bytes(raw)
    vf = VersionFile("m.json", "version")
    text = vf.text(tmp_path)
    assert vf.replace(text, "2.0.1").encode() == raw.replace(b"2.0.0", b"2.0.1")


@pytest.mark.parametrize("text,message", [
    ('{"name": "x"}', "key `version` is missing"),
    ('{"version": 5}', "not a string"),
    ('{"version": "1.0",}', "invalid JSON"),
])
def test_json_problems_name_file_and_key(text, message):
    with pytest.raises(ReleaseError) as err:
        VersionFile("p/m.json", "version").locate(text)
    assert message in str(err.value) and "p/m.json" in str(err.value)


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(ReleaseError, match="gone.json: file is missing"):
        VersionFile("gone.json", "version").read(tmp_path)


def test_toml_edits_only_the_keyed_table():
    text = ('# top comment\n[tool.other]\nversion = "9.9.9"\n\n[project]\nname = "fleet"\n'
            'version = "0.1.0"  # keep me\n[tool.x]\nversion = \'0.1.0\'\n')
    vf = VersionFile("pyproject.toml", "project.version")
    assert vf.locate(text)[2] == "0.1.0"
    out = vf.replace(text, "0.2.0")
    assert out == text.replace('version = "0.1.0"  # keep me', 'version = "0.2.0"  # keep me')


def test_toml_dotted_key_at_top_level():
    text = 'project.name = "x"\nproject.version = "1.0"\n'
    assert VersionFile("a.toml", "project.version").replace(text, "1.1") == \
        'project.name = "x"\nproject.version = "1.1"\n'


def test_toml_missing_key():
    with pytest.raises(ReleaseError, match="`project.version` is missing"):
        VersionFile("pyproject.toml", "project.version").locate('[project]\nname = "x"\n')


def test_python_version_with_annotation_and_single_quotes():
    text = '"""doc"""\n\n__version__: str = \'3.1.4\'\nOTHER = "3.1.4"\n'
    vf = VersionFile("m/__init__.py", "__version__")
    out = vf.replace(text, "3.2.0")
    assert out == '"""doc"""\n\n__version__: str = \'3.2.0\'\nOTHER = "3.1.4"\n'


def test_python_missing_or_computed_version():
    vf = VersionFile("m.py", "__version__")
    with pytest.raises(ReleaseError, match="missing"):
        vf.locate("x = 1\n")
    with pytest.raises(ReleaseError, match="not a string literal"):
        vf.locate("__version__ = get()\n")


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=10)


@settings(max_examples=60, deadline=None)
@given(other=st.dictionaries(st.text(max_size=6).filter(lambda k: k != "version"), json_values,
                             max_size=5),
       indent=st.sampled_from([None, 2, 4, "\t"]),
       position=st.integers(min_value=0, max_value=5))
def test_json_rewrite_changes_only_the_version(other, indent, position):
    items = list(other.items())
    items.insert(min(position, len(items)), ("version", "1.0.0"))
    text = json.dumps(dict(items), indent=indent)
    out = VersionFile("m.json", "version").replace(text, "1.0.1")
    expected = dict(items)
    expected["version"] = "1.0.1"
    assert json.loads(out) == expected
    assert changed_only_value(text, out, '"1.0.0"', '"1.0.1"')
