"""fleet's direct client for an OpenClaw gateway's RPC, against a fake gateway on 127.0.0.1: the
answers a deploy depends on (inventory, reload, a plugin that fails to load), a gateway still
starting or busy, and the fallback to the OpenClaw CLI where the direct path cannot be used."""

from __future__ import annotations

import json
import socket
import stat
import sys
from pathlib import Path

import pytest
from fake_openclaw_gw import FakeGateway, error
from rich.console import Console

from fleet.deploy.report import status_table
from fleet.deploy.runner import HostResult
from fleet.installer import openclawconfig, openclawrpc, selftest
from fleet.installer.manager import ManagerError
from fleet.installer.openclawgw import OpenclawManager, RpcError

LISTING = {
    "generation": 3,
    "diagnostics": [],
    "plugins": [
        {
            "id": "memory-continuity",
            "version": "5.0.1",
            "enabled": True,
            "runtime": {"state": "active"},
        },
        {"id": "mc", "version": "2.1.0", "enabled": True, "runtime": {"state": "active"}},
    ],
}
LOAD_FAILED = error(
    "UNAVAILABLE",
    "Plugin operation failed during activate: plugin load "
    "failed: memory-continuity: Error: broken release: the entry throws at load",
    details={"runtime": {"phase": "activate", "committed": False}},
)
BUSY = error(
    "UNAVAILABLE",
    "Another plugin or config operation is already running; retry when it completes.",
    retryable=True,
    retryAfterMs=20,
)


@pytest.fixture
def gw():
    with FakeGateway() as server:
        yield server


# -- the client ------------------------------------------------------------------------------
def test_a_call_returns_the_gateways_payload_past_events_pings_and_fragments(gw):
    gw.answer("plugins.list", LISTING)
    gw.chatty = gw.fragment = True
    with openclawrpc.GatewayRpc(gw.port, {}) as rpc:
        assert rpc.call("plugins.list", timeout=10) == LISTING
        assert rpc.call("plugins.list", timeout=10) == LISTING  # the same session again
    connect = gw.connects[0]
    assert connect["client"]["id"] == "gateway-client" and connect["client"]["mode"] == "backend"
    assert "operator.admin" in connect["scopes"] and "auth" not in connect


def test_a_large_answer_arrives_whole(gw):
    big = {"plugins": [{"id": f"p{i}", "description": "x" * 200} for i in range(2000)]}
    gw.answer("plugins.list", big)  # ~450 KB: a 64-bit length frame
    with openclawrpc.GatewayRpc(gw.port, {}) as rpc:
        assert rpc.call("plugins.list", timeout=10) == big


def test_an_error_answer_carries_the_gateways_code_and_message(gw):
    gw.answer("plugins.reload", LOAD_FAILED)
    with openclawrpc.GatewayRpc(gw.port, {}) as rpc, pytest.raises(openclawrpc.CallError) as exc:
        rpc.call("plugins.reload", {"plugins": [{"pluginId": "mc"}]}, timeout=10)
    assert exc.value.code == "UNAVAILABLE"
    assert "broken release: the entry throws at load" in exc.value.message
    assert gw.calls == [("plugins.reload", {"plugins": [{"pluginId": "mc"}]})]


def test_a_gateway_still_starting_is_asked_again(gw):
    gw.starting = 3
    gw.answer("plugins.list", LISTING)
    with openclawrpc.GatewayRpc(gw.port, {}) as rpc:
        assert rpc.call("plugins.list", timeout=10) == LISTING
    assert len(gw.connects) == 4


def test_the_shared_token_is_sent_and_a_refused_handshake_is_unsupported():
    with FakeGateway(token="s3cret") as gw:
        gw.answer("plugins.list", LISTING)
        with openclawrpc.GatewayRpc(gw.port, {"token": "s3cret"}) as rpc:
            assert rpc.call("plugins.list", timeout=10) == LISTING
        with pytest.raises(openclawrpc.Unsupported, match="token mismatch"):
            openclawrpc.GatewayRpc(gw.port, {"token": "wrong"}).open(10)


def test_a_port_without_the_gateways_websocket_is_unsupported(gw):
    gw.plain_http = True
    with pytest.raises(openclawrpc.Unsupported, match="no WebSocket upgrade"):
        openclawrpc.GatewayRpc(gw.port, {}).open(5)


def test_nothing_listening_is_unreachable_and_silence_times_out(gw):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    with pytest.raises(openclawrpc.GatewayUnreachable):
        openclawrpc.GatewayRpc(free, {}).open(5)
    gw.answer("chat.send", None)  # accepted, never answered
    with openclawrpc.GatewayRpc(gw.port, {}) as rpc, pytest.raises(TimeoutError):
        rpc.call("chat.send", {}, timeout=0.5)


@pytest.mark.parametrize(
    "gateway, env, expect",
    [
        ({"auth": {"mode": "none"}}, {}, {}),
        ({}, {}, {}),
        ({"auth": {"mode": "token", "token": "t-file"}}, {}, {"token": "t-file"}),
        (
            {"auth": {"mode": "token", "token": "t-file"}},
            {"OPENCLAW_GATEWAY_TOKEN": "t-env"},
            {"token": "t-env"},
        ),
        ({"auth": {"token": "t-file"}}, {}, {"token": "t-file"}),
        ({"auth": {"mode": "password", "password": "pw"}}, {}, {"password": "pw"}),
    ],
)
def test_auth_comes_from_the_config_or_the_environment(gateway, env, expect):
    assert openclawrpc.auth_for({"gateway": gateway}, env) == expect


@pytest.mark.parametrize(
    "gateway, why",
    [
        ({"auth": {"mode": "token", "token": {"source": "env", "id": "GW_TOKEN"}}}, "SecretRef"),
        ({"auth": {"mode": "token"}}, "no token is set"),
        ({"auth": {"mode": "trusted-proxy"}}, "trusted-proxy"),
        ({"tls": {"enabled": True}}, "tls"),
        ({"mode": "remote"}, "remote"),
    ],
)
def test_what_the_direct_client_cannot_do_is_said(gateway, why):
    with pytest.raises(openclawrpc.Unsupported, match=why):
        openclawrpc.auth_for({"gateway": gateway}, {})


# -- the manager: direct first, the CLI where that cannot work ---------------------------------
def _fake_cli(path: Path, listing: dict) -> Path:
    """An `openclaw` stand-in: `config validate` says valid, `gateway call` prints `listing`."""
    path.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        "args = sys.argv[1:]\n"
        "open(__file__ + '.calls', 'a').write(' '.join(args[:3]) + '\\n')\n"
        "if args[:2] == ['config', 'validate']:\n"
        "    print(json.dumps({'valid': True}))\n"
        "elif args == ['--version']:\n"
        "    print('OpenClaw 2026.9.6 (test)')\n"
        f"else:\n    print(json.dumps({listing!r}))\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _host(tmp_path: Path, port: int, auth: dict, **opts: str):
    state = tmp_path / "state"
    state.mkdir()
    (state / "openclaw.json").write_text(json.dumps({"gateway": {"port": port, "auth": auth}}))
    cli = _fake_cli(tmp_path / "openclaw", {"plugins": [], "via": "cli"})
    manager = OpenclawManager(state, dict({"openclaw": str(cli)}, **opts))
    return manager, cli


def _cli_calls(cli: Path) -> list:
    """The CLI boots that matter (`--version` is OpenClaw's fast path, ~0.1 s)."""
    calls = Path(str(cli) + ".calls")
    lines = calls.read_text().splitlines() if calls.exists() else []
    return [line for line in lines if line != "--version"]


def _release(state: Path, name: str, version: str = "5.0.1", schema: dict | None = None) -> Path:
    """A release dir with the two plugins' manifests (what `config validate` reads)."""
    release = state / "fleet" / "releases" / name
    for pid, pkg in (("memory-continuity", "memory_continuity"), ("mc", "mc")):
        plugin = release / "fleet" / "plugins" / pkg
        plugin.mkdir(parents=True)
        (plugin / "openclaw.plugin.json").write_text(
            json.dumps(
                {"id": pid, "version": version, "configSchema": schema or {"type": "object"}}
            )
        )
        (plugin / "package.json").write_text(
            json.dumps(
                {"name": pid, "version": version, "openclaw": {"extensions": ["./index.js"]}}
            )
        )
    (release / "fleet_release.json").write_text(
        json.dumps({"plugins": {"memory-continuity": "memory_continuity", "mc": "mc"}})
    )
    return release


def test_the_manager_asks_the_gateway_directly_and_waits_out_a_busy_gateway(gw, tmp_path):
    manager, cli = _host(tmp_path, gw.port, {"mode": "none"})
    gw.answer("plugins.list", LISTING)
    gw.answer("plugins.reload", BUSY, BUSY, {"ok": True, "pluginIds": ["mc"]})
    health = manager.probe(None)
    assert health["rpc"] == "direct" and health["generation"] == 3
    assert health["openclaw"] == "2026.9.6"  # the running gateway's own version
    assert manager.call("plugins.reload", {"plugins": [{"pluginId": "mc"}]}) == {
        "ok": True,
        "pluginIds": ["mc"],
    }
    assert [m for m, _ in gw.calls].count("plugins.reload") == 3
    assert _cli_calls(cli) == []  # no CLI boot at all


def test_a_plugin_that_fails_to_load_fails_the_activation_and_the_rollback_reloads(gw, tmp_path):
    manager, cli = _host(tmp_path, gw.port, {"mode": "none"})
    old = _release(manager.state_dir, "5.0.1-a")
    new = _release(manager.state_dir, "5.0.2-b", "5.0.2", {"type": "object", "properties": {}})
    manager.configure(old)  # the host is on the old release
    booted = len(_cli_calls(cli))
    gw.answer("plugins.list", LISTING)
    gw.answer("plugins.reload", LOAD_FAILED, {"ok": True})
    with pytest.raises(ManagerError, match="plugin failed to load: .*throws at load"):
        manager.restart(new, {}, timeout=10)
    manager.restart(old, {}, timeout=10)  # the rollback: reloaded, nothing restarted
    assert [m for m, _ in gw.calls] == ["plugins.list", "plugins.reload", "plugins.reload"]
    releases = str(manager.state_dir / "fleet" / "releases") + "/"
    loaded = openclawconfig.load(manager.config_path)["plugins"]["load"]["paths"]
    paths = [p for p in loaded if p.startswith(releases)]
    assert paths and all(p.startswith(str(old)) for p in paths)
    # one OpenClaw CLI boot for the failed deploy and its rollback: validating the new config
    assert _cli_calls(cli)[booted:] == ["config validate --json"]


def test_a_refused_direct_connect_falls_back_to_the_cli_and_says_why(tmp_path):
    with FakeGateway(token="right") as gw:
        manager, cli = _host(tmp_path, gw.port, {"mode": "token", "token": "stale"})
        assert manager.call("plugins.list") == {"plugins": [], "via": "cli"}
        assert manager.rpc_path.startswith("cli (") and "token mismatch" in manager.rpc_path
        assert _cli_calls(cli) == ["gateway call plugins.list"]


def test_the_cli_can_be_chosen_and_an_unknown_rpc_option_is_refused(gw, tmp_path):
    manager, cli = _host(tmp_path, gw.port, {"mode": "none"}, rpc="cli")
    assert manager.call("plugins.list") == {"plugins": [], "via": "cli"}
    assert gw.calls == []
    with pytest.raises(ManagerError, match="option rpc='fast'; use direct or cli"):
        OpenclawManager(manager.state_dir, {"rpc": "fast"})


def test_a_gateway_that_is_down_is_an_rpc_error_not_a_cli_fallback(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    manager, cli = _host(tmp_path, free, {"mode": "none"})
    with pytest.raises(RpcError):
        manager.call("plugins.list", timeout=5)
    assert manager.rpc_path == "direct" and _cli_calls(cli) == []


def test_a_config_openclaw_already_judged_the_same_way_is_not_validated_again(gw, tmp_path):
    manager, cli = _host(tmp_path, gw.port, {"mode": "none"})
    state = manager.state_dir
    assert manager.configure(_release(state, "5.0.1-a"))
    assert manager.validation == "openclaw config validate"
    # the next release: other dir, other versions, the same manifests otherwise
    assert manager.configure(_release(state, "5.0.2-b", "5.0.2"))
    assert manager.validation == "cached"
    # a release whose configSchema changed is OpenClaw's to judge again
    strict = {"type": "object", "additionalProperties": False}
    assert manager.configure(_release(state, "5.0.3-c", "5.0.3", strict))
    assert manager.validation == "openclaw config validate"
    # and so is the same release once the user's own part of the file changed
    data = openclawconfig.load(manager.config_path)
    data["agents"] = {"defaults": {"heartbeat": {"every": "5m"}}}
    manager.config_path.write_text(json.dumps(data))
    assert manager.configure(_release(state, "5.0.4-d", "5.0.4", strict))
    assert manager.validation == "openclaw config validate"
    # option validate=always: OpenClaw judges every new config
    always = OpenclawManager(state, dict(manager.opts, validate="always"))
    assert always.configure(_release(state, "5.0.5-e", "5.0.5", strict))
    assert always.validation == "openclaw config validate"
    assert _cli_calls(cli) == ["config validate --json"] * 4
    with pytest.raises(ManagerError, match="option validate='never'"):
        OpenclawManager(state, {"validate": "never"})


def test_status_names_the_cli_fallback_and_its_reason():
    def shown(rpc):
        gw = {
            "openclaw": "2026.9.6",
            "gateway_pid": 7,
            "rpc": rpc,
            "plugins": {"mc": {"version": "2.1.0", "status": "active"}},
        }
        res = HostResult("oc", "ok", True, data={"ready": True, "gateway": gw})
        console = Console(width=250, record=True)
        console.print(status_table([res], width=250))
        return console.export_text()

    assert "rpc: cli (gateway.tls is enabled" in shown("cli (gateway.tls is enabled)")
    assert "rpc:" not in shown("direct")


# -- readiness: each plugin's own answer ----------------------------------------------------------
def _ready(version: str, pid: int = 41) -> dict:
    return {"id": "x", "version": version, "pid": pid, "python": "3.11.2"}


def test_ready_means_each_plugin_answered_from_its_worker_at_the_version(gw, tmp_path):
    """The inventory says `active`; only the plugin's own `<id>.ready` (its worker started and
    probed) proves that its Python runs, and at which version."""
    from fleet.gateway import process

    manager, _ = _host(tmp_path, gw.port, {"mode": "none"})
    release = _release(manager.state_dir, "5.0.1-a")
    gw.answer("plugins.list", LISTING)
    gw.answer("memory-continuity.ready", _ready("5.0.1"))
    gw.answer("mc.ready", error("UNAVAILABLE", "mc: no answer within 25000 ms",
                                details={"final": False}))
    health = manager.probe(release)
    assert health["versions"] == {"memory-continuity": "5.0.1"}  # mc: not yet
    assert health["plugins"]["memory-continuity"]["worker"] == 41
    want = {"memory-continuity": "5.0.1", "mc": "2.1.0"}
    assert process.judge(health, want).state == process.NOT_YET
    gw.answer("mc.ready", _ready("2.1.0", 42))
    assert process.judge(manager.probe(release), want).state == process.READY


# -- the self-test gate and the hook statistics ----------------------------------------------
def _selftest_answer(plugin: str, ok: bool = True) -> dict:
    check = {"name": "recovery", "ok": ok, "detail": "the prompt to carry X" if ok else
             "expected the prompt to carry X, found nothing"}
    return {"id": plugin, "ok": ok, "plugin": plugin, "version": "5.0.1", "checks": [check],
            "duration_ms": 12}


def test_each_plugins_selftest_rpc_is_judged_and_a_failure_names_its_check(gw, tmp_path):
    manager, _ = _host(tmp_path, gw.port, {"mode": "none"})
    release = _release(manager.state_dir, "5.0.1-a")
    gw.answer("memory-continuity.selftest", _selftest_answer("memory-continuity", ok=False))
    gw.answer("mc.selftest", _selftest_answer("mc"))
    verdict = selftest.judge(manager.selftest(release, timeout=10))
    assert verdict.state == selftest.FAILED
    assert verdict.reason == ("self-test failed: memory-continuity: check 'recovery': expected "
                              "the prompt to carry X, found nothing")
    assert verdict.plugins["mc"] == {"state": "passed", "checks": 1, "duration_ms": 12}
    gw.answer("mc.selftest", error("UNAVAILABLE", "mc: no answer within 25000 ms",
                                   details={"final": False}))
    gw.answer("memory-continuity.selftest", _selftest_answer("memory-continuity"))
    verdict = selftest.judge(manager.selftest(release, timeout=10))
    assert verdict.state == selftest.FAILED
    assert verdict.reason == ("self-test failed: mc: the self-test did not run: mc: no answer "
                              "within 25000 ms")


def test_an_older_bridge_without_the_selftest_is_unsupported_not_failed(gw, tmp_path):
    """A rollback to a release from before the self-test must still go through."""
    manager, _ = _host(tmp_path, gw.port, {"mode": "none"})
    release = _release(manager.state_dir, "5.0.0-a")
    verdict = selftest.judge(manager.selftest(release, timeout=10))
    assert verdict.state == selftest.UNSUPPORTED
    assert verdict.reason == "mc, memory-continuity do not know the self-test"
    gw.answer("mc.selftest", _selftest_answer("mc"))
    verdict = selftest.judge(manager.selftest(release, timeout=10))
    assert verdict.state == selftest.PASSED
    assert verdict.reason == "memory-continuity does not know the self-test"


def test_hook_statistics_come_from_each_plugins_stats_rpc(gw, tmp_path):
    manager, cli = _host(tmp_path, gw.port, {"mode": "none"})
    release = _release(manager.state_dir, "5.0.1-a")
    health = {"ready": True}
    assert manager.hook_stats(release, health) is None  # an older bridge: no such method
    stats = {"plugin": "mc", "calls": 9, "errors": 1, "timeouts": 2, "restarts": 1,
             "since": "2026-12-04T10:00:00Z", "worker": {"pid": 4, "calls": 3}}
    gw.answer("mc.stats", stats)
    assert manager.hook_stats(release, health) == {"mc": {
        "calls": 9, "errors": 1, "timeouts": 2, "restarts": 1, "since": "2026-12-04T10:00:00Z"}}
    assert manager.hook_stats(release, None) is None  # a gateway that is down is not asked
    assert _cli_calls(cli) == []  # never a CLI boot for it (status keeps its time bound)


def test_a_plugin_whose_python_cannot_load_fails_readiness_at_once(gw, tmp_path):
    from fleet.gateway import process

    manager, _ = _host(tmp_path, gw.port, {"mode": "none"})
    release = _release(manager.state_dir, "5.0.1-a")
    gw.answer("plugins.list", LISTING)  # OpenClaw sees nothing wrong: the JS entry loaded
    gw.answer("mc.ready", _ready("2.1.0"))
    gw.answer("memory-continuity.ready", error(
        "UNAVAILABLE", "memory-continuity: plugin memory-continuity cannot load from /r: "
        "RuntimeError: core broken at import", details={"final": True}))
    verdict = process.judge(manager.probe(release), {"memory-continuity": "5.0.1",
                                                     "mc": "2.1.0"})
    assert verdict.state == process.PLUGIN_FAILED
    assert "RuntimeError: core broken at import" in verdict.reason


# -- a plugin that fails to load, as each OpenClaw release reports it ---------------------------
THROWS = "Error: broken release: the entry throws at load"
WANT = {"memory-continuity": "5.0.1", "mc": "2.1.0"}


def _activated(gw, tmp_path, version: str, listing: dict | None = None, **opts: str):
    """A host whose gateway is OpenClaw `version` (a fake: `plugins.list` answers `listing`,
    `mc.ready` answers, `memory-continuity.ready` is unknown: its entry did not load), right
    after fleet activated a release on it; returns (manager, release, the file log)."""
    manager, _ = _host(tmp_path, gw.port, {"mode": "none"}, **opts)
    log = tmp_path / "openclaw.log"
    config = openclawconfig.load(manager.config_path)
    manager.config_path.write_text(json.dumps(dict(config, logging={"file": str(log)})))
    gw.version = version
    if listing is not None:
        gw.answer("plugins.list", listing)
    gw.answer("mc.ready", _ready("2.1.0"))
    release = _release(manager.state_dir, "5.0.1-a")
    _logged(log, release, "an error of an earlier activation")  # not this one's
    manager.restart(release, {}, timeout=10)  # `openclaw gateway restart` (the fake CLI)
    return manager, release, log


def _logged(log: Path, release: Path, error: str = THROWS) -> None:
    entry = release / "fleet" / "plugins" / "memory_continuity" / "index.js"
    with open(log, "a") as fh:
        fh.write(f"[plugins] memory-continuity failed to load from {entry}: {error}\n")


def test_without_an_inventory_rpc_the_plugins_answers_decide_and_the_log_names_the_error(
        gw, tmp_path):
    """OpenClaw 2026.4 - 2026.7: no `plugins.list`. A ready gateway that does not know a plugin's
    `<id>.ready` did not load it: a final answer, its error what the gateway logged."""
    from fleet.gateway import process

    manager, release, log = _activated(gw, tmp_path, "2026.6.6")
    verdict = process.judge(manager.probe(release), WANT)
    assert verdict.state == process.PLUGIN_FAILED  # final at once, never the deadline
    assert "does not know memory-continuity.ready" in verdict.reason
    assert "earlier activation" not in verdict.reason
    _logged(log, release)
    verdict = process.judge(manager.probe(release), WANT)
    assert verdict.reason == f"plugin memory-continuity failed to load: {THROWS}"
    gw.answer("memory-continuity.ready", _ready("5.0.1"))  # a release that loads
    health = manager.probe(None)
    assert health["capabilities"]["plugins_list"] == "none"
    assert "plugins.list" not in [m for m, _ in gw.calls[1:]]  # asked once per host, not again


def test_a_catalog_listing_does_not_hide_a_plugin_that_did_not_load(gw, tmp_path):
    """OpenClaw 2026.8: `plugins.list` lists what is installed, `state: "enabled"` also for a
    plugin whose entry threw, and the version on disk, not the one running."""
    from fleet.gateway import process

    catalog = {"plugins": [
        {"id": "memory-continuity", "version": "5.0.1", "enabled": True, "state": "enabled"},
        {"id": "mc", "version": "2.1.0", "enabled": True, "state": "enabled"}]}
    manager, release, log = _activated(gw, tmp_path, "2026.8.2", catalog)
    _logged(log, release)
    verdict = process.judge(manager.probe(release), WANT)
    assert verdict.state == process.PLUGIN_FAILED
    assert verdict.reason == f"plugin memory-continuity failed to load: {THROWS}"
    gw.answer("memory-continuity.ready", _ready("5.0.1"))  # the next activation loads it
    manager.restart(release, {}, timeout=10)
    health = manager.probe(release)
    assert health["capabilities"]["plugins_list"] == "catalog"
    assert process.judge(health, WANT).state == process.READY
    assert {k: v["status"] for k, v in health["plugins"].items()} == {
        "memory-continuity": "active", "mc": "active"}  # their own answers, not "enabled"


def test_a_logged_load_error_fails_readiness_before_the_gateway_reports_ready(gw, tmp_path):
    """A release whose gateway logs the failure seconds before `/readyz` answers (2026.5 -
    2026.8): the rollback starts then, not when the gateway is ready."""
    from fleet.gateway import process

    manager, release, log = _activated(gw, tmp_path, "2026.7.35")
    gw.ready = False
    assert manager.probe(release) is None  # still starting, nothing said yet
    _logged(log, release, "TypeError: api.registerThing is not a function")
    verdict = process.judge(manager.probe(release), WANT)
    assert verdict.state == process.PLUGIN_FAILED
    assert "TypeError: api.registerThing is not a function" in verdict.reason


def test_the_supervised_gateways_console_is_read_too(gw, tmp_path):
    from fleet.gateway import process

    manager, release, _ = _activated(gw, tmp_path, "2026.4.24", mode="supervised")
    console = manager.process.log
    console.parent.mkdir(parents=True, exist_ok=True)
    _logged(console, release)
    assert process.judge(manager.probe(release), WANT).reason == (
        f"plugin memory-continuity failed to load: {THROWS}")


def test_a_runtime_listing_names_the_error_itself(gw, tmp_path):
    """OpenClaw 2026.9: each plugin's runtime state and load error in `plugins.list`; a plugin
    listed as not active yet is waited for, one with an error fails at once."""
    from fleet.gateway import process

    listing = {"plugins": [
        {"id": "memory-continuity", "version": "5.0.1", "enabled": True,
         "runtime": {"state": "loading"}},
        {"id": "mc", "version": "2.1.0", "enabled": True, "runtime": {"state": "active"}}]}
    gw.answer("plugins.reload", {"ok": True})
    manager, release, _ = _activated(gw, tmp_path, "2026.9.6", listing)
    assert process.judge(manager.probe(release), WANT).state == process.NOT_YET
    listing["plugins"][0]["runtime"] = {"state": "unloaded", "error": THROWS}
    gw.answer("plugins.list", listing)
    verdict = process.judge(manager.probe(release), WANT)
    assert verdict.reason == f"plugin memory-continuity failed to load: {THROWS}"
    assert manager.probe(None)["capabilities"]["load_errors"] == [
        "the plugins.reload answer", "plugins.list runtime.error", "the gateway's log"]


def test_another_openclaw_behind_the_port_is_detected_again(gw, tmp_path):
    """A service restarted on an upgraded OpenClaw: the record follows what now answers."""
    from fleet.gateway import process

    manager, release, _ = _activated(gw, tmp_path, "2026.7.35")
    gw.answer("memory-continuity.ready", _ready("5.0.1"))
    assert manager.probe(release)["capabilities"]["plugins_list"] == "none"
    gw.version = "2026.9.6"
    gw.answer("plugins.list", dict(LISTING, plugins=[
        dict(LISTING["plugins"][0], runtime={"state": "loading"}), LISTING["plugins"][1]]))
    gw.answers.pop("memory-continuity.ready")  # still loading in the new gateway
    # the round that meets the new gateway does not judge by the old one's record ...
    assert process.judge(manager.probe(release), WANT).state == process.NOT_YET
    # ... the next reads what the new one can tell
    assert process.judge(manager.probe(release), WANT).state == process.NOT_YET
    assert manager.probe(release)["capabilities"] == {
        "version": "2026.9.6", "plugins_list": "runtime", "plugins_reload": False,
        "load_errors": ["plugins.list runtime.error", "the gateway's log"]}


# -- which OpenClaw a release supports ------------------------------------------------------------
def _artifact(path: Path, floor: str = "2026.4.24", top: str = "2026.9.6",
              proven: tuple = ("2026.4.24", "2026.9.6")) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as zf:
        for pkg in ("memory_continuity", "mc"):
            zf.writestr(f"fleet/plugins/{pkg}/package.json", json.dumps(
                {"name": pkg, "openclaw": {"compat": {"pluginApi": f">={floor}",
                                                      "minGatewayVersion": floor},
                                           "build": {"openclawVersion": top}}}))
        zf.writestr("fleet/plugins/openclaw-proven.json", json.dumps(
            {"proven": list(proven), "excluded": {}, "sources": "", "commit": "", "date": ""}))
    return path


TOO_OLD = ("is older than this release supports (>=2026.4.24 up to 2026.9.6, declared in "
           "fleet/plugins/mc/package.json); upgrade OpenClaw (npm install -g openclaw@latest), "
           "or deploy a release built for it; nothing was changed")
FLAG = ("; pass --allow-unproven-openclaw to deploy it anyway, or deploy a fleet release proven "
        "on it; nothing was changed")


@pytest.mark.parametrize("running, refusal_end", [
    ("2026.3.28", TOO_OLD),
    ("2026.4.24-beta.1", TOO_OLD),  # a pre-release orders below its release: below the floor
    ("2026.4.24", None),
    ("2026.9.6", None),
    ("2026.6.6", "(proven on 2026.4.24, 2026.9.6): a pre-release, or a release the compat "
                 "matrix has not run" + FLAG),
    ("2026.9.6-beta.1", "a pre-release, or a release the compat matrix has not run" + FLAG),
    ("2026.10.1", "is newer than every release this one was proven on (proven on 2026.4.24, "
                  "2026.9.6; declared >=2026.4.24 up to 2026.9.6)" + FLAG),
])
def test_a_gateway_the_release_was_not_proven_on_is_refused_before_anything_changes(
        gw, tmp_path, running, refusal_end):
    manager, _ = _host(tmp_path, gw.port, {"mode": "none"})
    gw.answer("status", {"runtimeVersion": running})
    refusal, notes = manager.preflight(_artifact(tmp_path / "a.pyz"))
    if refusal_end is None:
        assert (refusal, notes) == (None, [])
    else:
        assert refusal.startswith(f"the running gateway here is OpenClaw {running}: OpenClaw "
                                  f"{running} "), refusal
        assert refusal.endswith(refusal_end), refusal
        assert notes == []


@pytest.mark.parametrize("running, goes_ahead", [
    ("2026.3.28", False), ("2026.6.6", True), ("2026.10.1", True)])
def test_allowing_unproven_goes_ahead_with_a_note_but_never_below_the_floor(
        gw, tmp_path, running, goes_ahead):
    manager, _ = _host(tmp_path, gw.port, {"mode": "none"})
    gw.answer("status", {"runtimeVersion": running})
    refusal, notes = manager.preflight(_artifact(tmp_path / "a.pyz"), allow_unproven=True)
    if goes_ahead:
        assert refusal is None and len(notes) == 1
        assert notes[0].startswith(f"the running gateway here is OpenClaw {running}: ")
        assert notes[0].endswith("; deployed anyway (--allow-unproven-openclaw)")
    else:
        assert refusal.endswith(TOO_OLD) and "--allow-unproven-openclaw" not in refusal


def test_with_no_gateway_running_the_cli_version_is_checked(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    manager, cli = _host(tmp_path, free, {"mode": "none"})
    cli.write_text(cli.read_text().replace("OpenClaw 2026.9.6 (test)", "OpenClaw 2026.2.1 (x)"))
    refusal, _ = manager.preflight(_artifact(tmp_path / "a.pyz"))
    assert refusal.startswith("the OpenClaw CLI (no gateway answers) here is OpenClaw 2026.2.1")


def test_an_artifact_with_a_malformed_proof_is_refused_naming_the_file_and_key(gw, tmp_path):
    manager, _ = _host(tmp_path, gw.port, {"mode": "none"})
    gw.answer("status", {"runtimeVersion": "2026.9.6"})
    art = _artifact(tmp_path / "a.pyz", proven=("2026.9.6", "soon"))
    refusal, _ = manager.preflight(art)
    assert refusal.startswith("cannot read the OpenClaw versions this release supports: ")
    assert "fleet/plugins/openclaw-proven.json: key 'proven': 'soon' is not a version" in refusal


def test_the_lease_asks_the_active_installer_for_the_running_gateways_version(gw, tmp_path):
    """What a deploy's lease take runs on a host with a release (fleet/deploy/lease.py): the
    running gateway's own version, not the CLI's (the fake CLI says 2026.2.1)."""
    from fleet.installer.openclawgw import installed_openclaw

    manager, cli = _host(tmp_path, gw.port, {"mode": "none"})
    cli.write_text(cli.read_text().replace("OpenClaw 2026.9.6 (test)", "OpenClaw 2026.2.1 (x)"))
    gw.answer("status", {"runtimeVersion": "2026.9.6"})
    opts = {"openclaw": str(cli)}
    assert installed_openclaw(str(manager.state_dir), opts, 5.0) == {
        "version": "2026.9.6", "source": "gateway"}
    gw.shutdown()  # no gateway: the CLI answers
    gw.server_close()
    assert installed_openclaw(str(manager.state_dir), opts, 5.0) == {
        "version": "2026.2.1", "source": "cli"}


# -- openclaw.json: the file OpenClaw reads, no lost update, links kept ---------------------------
EDIT_DURING_VALIDATE = """#!{python}
import json, os, sys
args = sys.argv[1:]
marker = __file__ + ".edited"
if args[:2] == ["config", "validate"]:
    if not os.path.exists(marker):  # a user's /mc settings lands while OpenClaw validates
        open(marker, "w").close()
        from fleet.plugins.mc import commands_settings
        commands_settings._write(os.environ["REAL_CONFIG"], "maxArchiveCount", 9)
    print(json.dumps({{"valid": True}}))
elif args == ["--version"]:
    print("OpenClaw 2026.9.6 (test)")
"""


def test_an_edit_made_while_openclaw_validates_is_kept(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    manager, cli = _host(tmp_path, free, {"mode": "none"})
    cli.write_text(EDIT_DURING_VALIDATE.format(python=sys.executable))
    manager = OpenclawManager(manager.state_dir, dict(manager.opts,
                                                      **{"env.REAL_CONFIG": str(
                                                          manager.config_path)}))
    release = _release(manager.state_dir, "5.0.1-a")
    assert manager.configure(release)
    data = openclawconfig.load(manager.config_path)
    assert data["plugins"]["entries"]["memory-continuity"]["config"] == {"maxArchiveCount": 9}
    assert all(p.startswith(str(release)) for p in data["plugins"]["load"]["paths"])
    assert data["gateway"]["port"] == free  # the rest of the user's file as it was


def test_a_symlinked_config_is_written_through_and_stays_a_link(gw, tmp_path):
    manager, _ = _host(tmp_path, gw.port, {"mode": "none"})
    dotfiles = tmp_path / "dotfiles" / "openclaw.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(manager.config_path.read_text())
    manager.config_path.unlink()
    manager.config_path.symlink_to(dotfiles)
    assert manager.configure(_release(manager.state_dir, "5.0.1-a"))
    assert manager.config_path.is_symlink() and manager.config_path.resolve() == dotfiles
    assert "memory-continuity" in openclawconfig.load(dotfiles)["plugins"]["entries"]
