"""`init`: a dev state dir with plugin links, idempotent, never clobbering what it does not own."""

from __future__ import annotations

import json
import os

import pytest
from gateway_helpers import write_plugin

from fleet.gateway.layout import Layout
from fleet.gateway.scaffold import ScaffoldError, init


def test_init_links_plugins_writes_a_default_config_and_is_idempotent(tmp_path, state):
    src = tmp_path / "src"
    write_plugin(src, "alpha", "def register(api): pass")
    write_plugin(src, "beta", "def register(api): pass")
    first = init(Layout(state), src)
    assert first["plugins"] == {"alpha": "linked", "beta": "linked"}
    assert os.readlink(state / "extensions" / "alpha") == str((src / "alpha").resolve())
    config = json.loads((state / "openclaw.json").read_text())
    assert config["plugins"]["entries"] == {"alpha": {"enabled": True, "config": {}},
                                            "beta": {"enabled": True, "config": {}}}
    (state / "openclaw.json").write_text('{"mine": true}')
    again = init(Layout(state), src)
    assert again["plugins"] == {"alpha": "kept", "beta": "kept"}
    assert again["configCreated"] is False
    assert json.loads((state / "openclaw.json").read_text()) == {"mine": True}
    for sub in ("run", "logs", "agents", "workspace"):
        assert (state / sub).is_dir()


def test_init_defaults_to_the_packaged_plugins(state):
    res = init(Layout(state))
    assert set(res["plugins"]) == {"memory-continuity", "mc"}


def test_init_refuses_to_replace_a_real_plugin_directory(tmp_path, state):
    src = tmp_path / "src"
    write_plugin(src, "alpha", "def register(api): pass")
    (state / "extensions" / "alpha").mkdir(parents=True)
    with pytest.raises(ScaffoldError, match="is not a symlink"):
        init(Layout(state), src)
