"""Shared message fixtures: the agent_end run observed with the original JS plugin."""

from __future__ import annotations

METADATA = (
    "Conversation info (untrusted metadata):\n```json\n{\n  \"message_id\": \"4542\"\n}\n```\n\n"
)


def original_run():
    """user (metadata + text), assistant (text + tool call), toolResult, user, assistant."""
    return [
        {"role": "user", "content": METADATA + "Please build the #deploy-pipeline for #Infra team"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "On it."},
            {"type": "toolCall", "id": "t1", "name": "exec", "arguments": {"cmd": "ls"}},
        ]},
        {"role": "toolResult", "toolCallId": "t1", "content": [{"type": "text", "text": "ok"}]},
        {"role": "user", "content": "and also fix the tests please"},
        {"role": "assistant", "content": "Done: tests fixed.\nmore"},
    ]


def run(topic: str, reply: str = "ok, done"):
    """A small two-message run with the given user text."""
    return [{"role": "user", "content": topic}, {"role": "assistant", "content": reply}]
