"""openclaw.json: fleet's plugin entries go in, everything else the user has stays, bad files
are refused before anything is written."""

from __future__ import annotations

import json

import pytest

from fleet.installer import openclawconfig as oc

ROOT = "/s/fleet/releases"
DIRS = {"memory-continuity": f"{ROOT}/5.0.1-abc/fleet/plugins/memory_continuity",
        "mc": f"{ROOT}/5.0.1-abc/fleet/plugins/mc"}


def test_entries_added_and_the_rest_kept():
    user = {"models": {"mode": "merge"}, "gateway": {"port": 19610},
            "plugins": {"load": {"paths": ["/home/u/my-plugin",
                                           f"{ROOT}/5.0.0-old/fleet/plugins/mc"]},
                        "entries": {"mc": {"enabled": False, "config": {"memoryDir": "x"}},
                                    "other": {"enabled": True}}}}
    out = oc.with_plugins(user, DIRS, ROOT)
    assert out["models"] == user["models"] and out["gateway"] == user["gateway"]
    assert out["plugins"]["load"]["paths"] == ["/home/u/my-plugin", *DIRS.values()]
    assert out["plugins"]["entries"]["mc"] == {"enabled": True, "config": {"memoryDir": "x"},
                                               "hooks": {"allowConversationAccess": True}}
    assert out["plugins"]["entries"]["memory-continuity"]["enabled"] is True
    assert out["plugins"]["entries"]["other"] == {"enabled": True}
    assert "allow" not in out["plugins"]  # creating an allowlist would block every other plugin
    assert user["plugins"]["entries"]["mc"]["enabled"] is False  # the input is not mutated
    assert oc.with_plugins(out, DIRS, ROOT) == out  # applying twice changes nothing


def test_an_existing_allowlist_gains_the_ids():
    out = oc.with_plugins({"plugins": {"allow": ["voice"]}}, DIRS, ROOT)
    assert out["plugins"]["allow"] == ["voice", "memory-continuity", "mc"]


@pytest.mark.parametrize("text, words", [
    ('{"plugins": {} // comment\n}', "not plain JSON"),
    ("[1]", "top level must be a JSON object"),
    ('{"plugins": []}', "key 'plugins' must be an object"),
    ('{"plugins": {"load": {"paths": "/x"}}}', "plugins'.load.paths must be a list"),
    ('{"plugins": {"entries": {"mc": {"hooks": true}}}}', "entries.mc.hooks must be an object"),
])
def test_bad_files_are_refused_naming_the_key(tmp_path, text, words):
    path = tmp_path / "openclaw.json"
    path.write_text(text)
    with pytest.raises(oc.ConfigError) as info:
        oc.load(path)
    assert str(path) in str(info.value) and words in str(info.value)


def test_candidate_keeps_the_mode_and_commit_replaces(tmp_path):
    path = tmp_path / "openclaw.json"
    path.write_text("{}")
    path.chmod(0o640)
    cand = oc.write_candidate(path, {"a": 1})
    assert cand.parent == tmp_path and (cand.stat().st_mode & 0o777) == 0o640
    assert json.loads(path.read_text()) == {}  # nothing in place before the commit
    oc.commit(cand, path)
    assert json.loads(path.read_text()) == {"a": 1} and not cand.exists()
    assert oc.load(tmp_path / "missing.json") == {}
