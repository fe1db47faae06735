"""Relative times and truncation as the original `/mc` prints them (invalid times: `unknown`)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from fleet.plugins.mc.textfmt import fence, rel_time, truncate

NOW = datetime(2026, 3, 31, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("stamp,expected", [
    ("2026-03-31T11:59:30.000Z", "just now"),
    ("2026-03-31T12:05:00Z", "just now"),  # clock skew: a future time is not negative
    ("2026-03-31T11:59:00Z", "1m ago"),
    ("2026-03-31T11:01:00Z", "59m ago"),
    ("2026-03-31T11:00:00Z", "1h 0m ago"),
    ("2026-03-30T12:01:00Z", "23h 59m ago"),
    ("2026-03-30T12:00:00Z", "1d ago"),
    ("2026-03-31T14:00:00+02:00", "just now"),
    ("2026-03-31T08:59:00.123456789-01:00", "2h 0m ago"),
    ("garbage", "unknown"),
    ("", "unknown"),
    (None, "unknown"),
    ("2026-02-30T10:00:00Z", "unknown"),
])
def test_rel_time(stamp, expected):
    assert rel_time(stamp, NOW) == expected


def test_truncate_and_fence():
    assert truncate("abcdef", 3) == "abc\u2026"
    assert truncate("abc\nsecond", 3) == "abc"
    assert truncate("", 3) == "(empty)"
    assert fence("x") == "```\nx\n```"
