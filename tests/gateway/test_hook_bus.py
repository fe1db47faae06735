"""Hook bus: OpenClaw's order, merge, error and time-limit semantics."""

from __future__ import annotations

import threading

from fleet.gateway.hooks import HookBus


def test_higher_priority_runs_first_and_prompt_texts_merge_in_that_order():
    bus = HookBus()
    calls = []

    def make(name, text):
        def handler(event, ctx):
            calls.append(name)
            return {"prependSystemContext": text}
        return handler

    bus.register("before_prompt_build", make("low", "LOW"), priority=1, plugin_id="low")
    bus.register("before_prompt_build", make("high", "HIGH"), priority=90, plugin_id="high")
    bus.register("before_prompt_build", make("mid", "MID"), priority=10, plugin_id="mid")
    merged, errors = bus.run_modifying("before_prompt_build", {"prompt": "p"}, {})
    assert calls == ["high", "mid", "low"]
    assert merged["prependSystemContext"] == "HIGH\n\nMID\n\nLOW"
    assert errors == []


def test_equal_priority_keeps_registration_order():
    bus = HookBus()
    seen = []
    for name in ("a", "b", "c"):
        bus.register("agent_end", lambda e, c, n=name: seen.append(n), priority=5, plugin_id=name)
    bus.run_void("agent_end", {}, {})
    assert seen == ["a", "b", "c"]


def test_modifying_hook_skips_none_and_failing_handlers():
    bus = HookBus()

    def boom(event, ctx):
        raise RuntimeError("broken plugin")

    bus.register("before_prompt_build", lambda e, c: None, priority=50, plugin_id="quiet")
    bus.register("before_prompt_build", boom, priority=40, plugin_id="broken")
    bus.register("before_prompt_build", lambda e, c: {"prependSystemContext": "ok"}, 30, "good")
    merged, errors = bus.run_modifying("before_prompt_build", {}, {})
    assert merged == {"prependSystemContext": "ok"}
    assert len(errors) == 1 and "broken" in errors[0] and "broken plugin" in errors[0]


def test_void_hook_errors_are_caught_and_later_handlers_still_run():
    bus = HookBus()
    ran = []

    def boom(event, ctx):
        raise ValueError("nope")

    bus.register("subagent_ended", boom, priority=9, plugin_id="bad")
    bus.register("subagent_ended", lambda e, c: ran.append(e["x"]) or {"ignored": 1}, 1, "good")
    errors = bus.run_void("subagent_ended", {"x": 7}, {})
    assert ran == [7]
    assert errors and "[bad] subagent_ended handler failed: ValueError: nope" in errors[0]


def test_a_hung_handler_is_abandoned_after_its_time_limit():
    bus = HookBus(timeout_s=0.2)
    ran, gate = [], threading.Event()
    bus.register("agent_end", lambda e, c: gate.wait(60), priority=9, plugin_id="slow")
    bus.register("agent_end", lambda e, c: ran.append(1), priority=1, plugin_id="fast")
    try:
        errors = bus.run_void("agent_end", {}, {})
    finally:
        gate.set()  # only now may the slow handler return: the bus did not wait for it
    assert ran == [1]
    assert errors == ["[slow] agent_end handler timed out after 0.2s"]


def test_handler_cannot_mutate_the_callers_event_dict():
    bus = HookBus()
    bus.register("agent_end", lambda e, c: e.update(success=False), plugin_id="p")
    event = {"success": True}
    bus.run_void("agent_end", event, {})
    assert event == {"success": True}


def test_prompt_fields_are_stripped_for_plugins_without_prompt_injection():
    bus = HookBus()
    bus.prompt_policy = lambda plugin_id: plugin_id != "muted"
    bus.register("before_prompt_build",
                 lambda e, c: {"prependSystemContext": "SECRET", "model": "m1"}, 9, "muted")
    bus.register("before_prompt_build", lambda e, c: {"prependSystemContext": "OK"}, 1, "open")
    merged, _ = bus.run_modifying("before_prompt_build", {}, {})
    assert merged == {"prependSystemContext": "OK", "model": "m1"}
    assert bus.summary() == {"before_prompt_build": ["muted", "open"]}


def test_a_hook_openclaw_does_not_have_is_ignored_with_a_warning(caplog):
    """OpenClaw 2026.9.6 ignores `before_agent_start` ("unknown typed hook"); so does the bus."""
    bus = HookBus()
    bus.register("before_agent_start", lambda e, c: {"prependSystemContext": "LOST"}, 10, "old")
    bus.register("before_prompt_build", lambda e, c: {"prependSystemContext": "KEPT"}, 10, "new")
    assert bus.summary() == {"before_prompt_build": ["new"]}
    assert bus.run_modifying("before_agent_start", {}, {}) == ({}, [])
    assert "unknown typed hook 'before_agent_start' ignored" in caplog.text


def test_stats_count_each_plugins_calls_errors_and_timeouts():
    bus = HookBus(timeout_s=0.2)
    gate = threading.Event()

    def boom(event, ctx):
        raise ValueError("nope")

    bus.register("agent_end", boom, priority=9, plugin_id="bad")
    bus.register("agent_end", lambda e, c: gate.wait(60), priority=5, plugin_id="slow")
    bus.register("before_prompt_build", lambda e, c: {"prependSystemContext": "x"}, 1, "good")
    try:
        bus.run_void("agent_end", {}, {})
    finally:
        gate.set()
    bus.run_modifying("before_prompt_build", {}, {}, inline=True)
    bus.run_modifying("before_prompt_build", {}, {})
    stats = bus.stats(["unused"])
    since = stats["bad"]["since"]
    assert stats == {
        "bad": {"calls": 1, "errors": 1, "timeouts": 0, "since": since},
        "good": {"calls": 2, "errors": 0, "timeouts": 0, "since": since},
        "slow": {"calls": 1, "errors": 0, "timeouts": 1, "since": since},
        "unused": {"calls": 0, "errors": 0, "timeouts": 0, "since": since},
    }
    assert bus.counts("good") == {"calls": 2, "errors": 0, "timeouts": 0}


def test_an_exercise_reaches_one_plugin_and_is_not_counted():
    """What a self-test does: `plugin` keeps other plugins' handlers out, `counted=False`
    keeps the call out of the statistics."""
    bus = HookBus()
    seen = []
    bus.register("agent_end", lambda e, c: seen.append("a"), 9, "a")
    bus.register("agent_end", lambda e, c: seen.append("b"), 1, "b")
    bus.register("before_prompt_build", lambda e, c: {"prependSystemContext": "A"}, 9, "a")
    bus.register("before_prompt_build", lambda e, c: {"prependSystemContext": "B"}, 1, "b")
    assert bus.run_void("agent_end", {}, {}, plugin="b", counted=False) == []
    merged, _ = bus.run_modifying("before_prompt_build", {}, {}, plugin="b", counted=False)
    assert seen == ["b"] and merged == {"prependSystemContext": "B"}
    assert bus.counts("a") == bus.counts("b") == {"calls": 0, "errors": 0, "timeouts": 0}
