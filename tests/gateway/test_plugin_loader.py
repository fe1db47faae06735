"""Plugin loading: manifests, config with schema defaults, requires, failures reported in health."""

from __future__ import annotations

import json

from gateway_helpers import install, ok, write_config, write_plugin

from fleet.gateway.layout import Layout
from fleet.gateway.service import Gateway

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "depth": {"type": "number", "default": 3, "minimum": 0},
        "label": {"type": "string", "default": "x"},
    },
}
ECHO_CONFIG = """
def register(api):
    api.register_command("cfg", lambda ctx: {"text": repr(sorted(api.plugin_config.items()))})
"""


def load(state):
    gw = Gateway(Layout(state))
    gw.load_plugins()
    return gw


def test_config_defaults_and_values_reach_the_plugin(tmp_path, state):
    install(state, write_plugin(tmp_path / "p", "echo", ECHO_CONFIG, schema=SCHEMA))
    write_config(state, {"plugins": {"entries": {"echo": {"config": {"depth": 5}}}}})
    gw = load(state)
    assert gw.health()["versions"] == {"echo": "1.0.0"}
    assert ok(gw, "command", command="/cfg")["text"] == "[('depth', 5), ('label', 'x')]"


def test_config_that_breaks_the_schema_fails_the_plugin_naming_file_and_key(tmp_path, state):
    install(state, write_plugin(tmp_path / "p", "echo", ECHO_CONFIG, schema=SCHEMA))
    write_config(state, {"plugins": {"entries": {"echo": {"config": {"depht": 5}}}}})
    h = load(state).health()
    assert h["ready"] is False and h["versions"] == {}
    err = h["plugins"]["echo"]["error"]
    assert "openclaw.json" in err and "depht" in err and "plugins.entries.echo.config" in err


def test_manifest_problems_are_reported_with_the_file(tmp_path, state):
    bad_id = write_plugin(tmp_path / "p", "one", "def register(api): pass")
    (bad_id / "openclaw.plugin.json").write_text(json.dumps(
        {"id": "other", "version": "1", "configSchema": {}}))
    no_schema = write_plugin(tmp_path / "p", "two", "def register(api): pass")
    (no_schema / "openclaw.plugin.json").write_text(json.dumps({"id": "two", "version": "1"}))
    broken = write_plugin(tmp_path / "p", "three", "def register(api): pass")
    (broken / "openclaw.plugin.json").write_text("{not json")
    for d in (bad_id, no_schema, broken):
        install(state, d)
    plugins = load(state).health()["plugins"]
    assert "does not match its directory name" in plugins["one"]["error"]
    assert "configSchema" in plugins["two"]["error"]
    assert "not valid JSON" in plugins["three"]["error"]
    assert all(str(tmp_path / "p") in plugins[p]["error"] or "extensions" in plugins[p]["error"]
               for p in plugins)


def test_import_error_and_register_error_leave_nothing_registered(tmp_path, state):
    install(state, write_plugin(tmp_path / "p", "boom", "raise RuntimeError('kaboom at import')"))
    half = """
def register(api):
    api.on("before_prompt_build", lambda e, c: {"prependSystemContext": "HALF"})
    api.register_command("half", lambda ctx: {"text": "x"})
    raise ValueError("register failed halfway")
"""
    install(state, write_plugin(tmp_path / "p", "half", half))
    gw = load(state)
    h = gw.health()
    assert "RuntimeError: kaboom at import" in h["plugins"]["boom"]["error"]
    assert "ValueError: register failed halfway" in h["plugins"]["half"]["error"]
    assert h["ready"] is False
    assert gw.hooks.handlers("before_prompt_build") == []
    assert h["commands"] == []


def test_requires_a_loaded_plugin(tmp_path, state):
    install(state, write_plugin(tmp_path / "p", "cmds", "def register(api): pass",
                                requires=["core"]))
    h = load(state).health()
    assert "requires plugin 'core', which is not installed" in h["plugins"]["cmds"]["error"]
    # with the requirement present it loads, whatever the directory order
    install(state, write_plugin(tmp_path / "p", "core", "def register(api): pass"))
    h = load(state).health()
    assert h["ready"] and set(h["versions"]) == {"cmds", "core"}


def test_disabled_plugin_is_not_loaded_and_does_not_fail_readiness(tmp_path, state):
    install(state, write_plugin(tmp_path / "p", "off", "raise SystemExit('never imported')"))
    write_config(state, {"plugins": {"entries": {"off": {"enabled": False}}}})
    h = load(state).health()
    assert h["ready"] is True
    assert h["plugins"]["off"]["loaded"] is False and h["plugins"]["off"]["enabled"] is False


def test_python_entry_from_package_fleet_entry_with_relative_imports(tmp_path, state):
    d = write_plugin(tmp_path / "p", "rel", "from .helper import TEXT\n"
                     "def register(api):\n"
                     "    api.register_command('rel', lambda ctx: {'text': TEXT})\n",
                     main="entry.py")
    (d / "helper.py").write_text("TEXT = 'from helper'\n")
    install(state, d)
    gw = load(state)
    assert ok(gw, "command", command="/rel")["text"] == "from helper"


def test_broken_openclaw_json_is_a_clear_startup_error(state):
    (state / "openclaw.json").write_text('{"plugins": ')
    try:
        Gateway(Layout(state))
    except ValueError as exc:
        assert "openclaw.json" in str(exc) and "line 1" in str(exc)
    else:
        raise AssertionError("a broken config must stop the gateway")


def test_plugin_config_is_read_fresh_after_the_config_file_changes(tmp_path, state):
    install(state, write_plugin(tmp_path / "p", "echo", ECHO_CONFIG, schema=SCHEMA))
    write_config(state, {"plugins": {"entries": {"echo": {"config": {"depth": 5}}}}})
    gw = load(state)
    assert ok(gw, "command", command="/cfg")["text"] == "[('depth', 5), ('label', 'x')]"
    write_config(state, {"plugins": {"entries": {"echo": {"config": {"depth": 12,
                                                                     "label": "new"}}}}})
    assert ok(gw, "command", command="/cfg")["text"] == "[('depth', 12), ('label', 'new')]"
    # an invalid edit is refused: the last good config stays in force
    write_config(state, {"plugins": {"entries": {"echo": {"config": {"depth": "deep!"}}}}})
    assert ok(gw, "command", command="/cfg")["text"] == "[('depth', 12), ('label', 'new')]"
    (state / "openclaw.json").write_text("{broken")
    assert ok(gw, "command", command="/cfg")["text"] == "[('depth', 12), ('label', 'new')]"
