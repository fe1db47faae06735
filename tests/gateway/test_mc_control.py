"""`/mc` through the gateway's `command` control op, with the real plugins loaded."""

from __future__ import annotations

import json

from gateway_helpers import ok

PARENT_GOAL = "Ship the quarterly report with verified numbers"


def test_an_unknown_subcommand_is_an_error_that_carries_the_help(real_gateway):
    resp = real_gateway.handle({"op": "command", "command": "/mc stauts"})
    assert resp["ok"] is False
    assert "Unknown subcommand: stauts" in resp["error"]
    help_text = ok(real_gateway, "command", command="/mc help")["text"]
    assert help_text.strip("`\n") in resp["error"]


def test_a_setting_says_it_applies_now_and_the_next_run_uses_it(real_gateway, state):
    gw = real_gateway
    key = ok(gw, "session.start")["sessionKey"]
    ok(gw, "session.turn", sessionKey=key, prompt=PARENT_GOAL, steps=["Plan: gather, check."])
    reply = ok(gw, "command", command="/mc settings autoExtract false")["text"]
    assert "Restart" not in reply and "no restart needed" in reply
    config = json.loads((state / "openclaw.json").read_text())
    assert config["plugins"]["entries"]["memory-continuity"]["config"]["autoExtract"] is False
    ok(gw, "session.turn", sessionKey=key, prompt="Rewrite the onboarding guide from scratch",
       steps=["Sure."])
    saved = (state / "workspace" / "memory" / "CURRENT_STATE.md").read_text()
    assert PARENT_GOAL in saved and "onboarding guide" not in saved
