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


def test_a_remove_takes_out_what_a_deploy_put_in_and_nothing_else():
    user = {"gateway": {"port": 19610},
            "plugins": {"load": {"paths": ["/home/u/my-plugin"]}, "allow": ["voice"],
                        "entries": {"other": {"enabled": True}}}}
    deployed = oc.with_plugins(user, DIRS, ROOT)
    assert oc.without_plugins(deployed, list(DIRS), ROOT) == user
    assert oc.without_plugins(user, list(DIRS), ROOT) == user  # nothing of fleet's: unchanged
    assert oc.without_plugins({"models": {}}, list(DIRS), ROOT) == {"models": {}}
    assert "memory-continuity" in deployed["plugins"]["entries"]  # the input is not mutated


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


def _plugin(root, pid, version, **manifest):
    plugin = root / pid
    plugin.mkdir(parents=True)
    (plugin / "openclaw.plugin.json").write_text(json.dumps(dict(manifest, id=pid,
                                                                 version=version)))
    (plugin / "package.json").write_text(json.dumps({"name": pid, "version": version}))
    return str(plugin)


def test_the_validation_key_ignores_release_dirs_and_versions_but_not_content(tmp_path):
    root = str(tmp_path / "releases")

    def key(release, version, openclaw="2026.9.6", **manifest):
        dirs = {"mc": _plugin(tmp_path / "releases" / release, "mc", version, **manifest)}
        return oc.validation_key(oc.with_plugins({"gateway": {"port": 1}}, dirs, root), dirs,
                                 root, openclaw)

    first = key("1.0-a", "1.0")
    assert key("1.1-b", "1.1") == first  # another release dir, another version
    assert key("1.2-c", "1.2", configSchema={"type": "object"}) != first
    assert key("1.3-d", "1.3", openclaw="2026.10.1") != first
    # a version range in `requires` may depend on versions: they stay in the key
    assert key("2.0-e", "2.0", requires=["memory-continuity@^5"]) != \
        key("2.1-f", "2.1", requires=["memory-continuity@^5"])
    assert oc.validation_key({}, {"mc": str(tmp_path / "missing")}, root, "x") is None
