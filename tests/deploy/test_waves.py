"""The wave plan and the failure budget of a progressive rollout (fleet.deploy.waves)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.deploy import waves

item = st.one_of(st.integers(1, 50).map(str),
                 st.integers(1, 100).map(lambda p: f"{p}%"))
spec = st.lists(item, min_size=1, max_size=6).map(",".join)


@given(spec, st.integers(1, 300))
def test_every_host_is_in_exactly_one_non_empty_wave(text, total):
    names = [f"h{i}" for i in range(total)]
    plan = waves.plan(names, text)
    assert [n for wave in plan for n in wave] == names
    assert all(plan) and len(plan) <= len(text.split(","))


@given(spec, st.integers(1, 300))
def test_each_wave_has_its_size_until_the_last_takes_the_rest(text, total):
    items = text.split(",")
    sizes = waves.wave_sizes(text, total)
    left = total
    for index, size in enumerate(sizes[:-1]):
        raw = items[index]
        want = int(raw) if not raw.endswith("%") else max(1, math.ceil(total * int(raw[:-1]) / 100))
        assert size == min(want, left)
        left -= size
    assert sizes[-1] == left


def test_the_documented_examples():
    assert waves.wave_sizes("1,10%,50%,100%", 20) == [1, 2, 10, 7]
    assert waves.wave_sizes("1,25%,100%", 20) == [1, 5, 14]
    assert waves.wave_sizes("1,25%,100%", 2) == [1, 1]  # no empty wave
    assert waves.wave_sizes("5", 3) == [3]
    assert waves.wave_sizes("1,1", 10) == [1, 9]  # the last takes the rest


@given(st.integers(0, 100), st.integers(1, 500), st.integers(0, 500))
def test_a_percentage_budget_is_spent_exactly_when_failures_exceed_the_share(pct, total, failed):
    failed = min(failed, total)
    tolerated = waves.budget(f"{pct}%", total)
    assert waves.spent(failed, tolerated) == (failed * 100 > pct * total)


@given(st.integers(0, 50), st.integers(0, 60))
def test_a_count_budget_is_spent_when_failures_exceed_it(n, failed):
    assert waves.spent(failed, waves.budget(str(n), 100)) == (failed > n)
    assert waves.left(failed, n) == max(0, n - failed)


def test_no_budget_is_never_spent():
    assert waves.budget("", 10) is None and not waves.spent(10**6, None)
    assert waves.left(3, None) is None


@pytest.mark.parametrize("bad", ["", "0", "-1", "1,,2", "abc", "0%", "101%", "nan%", "1, x"])
def test_bad_wave_specs_name_the_flag_and_an_example(bad):
    with pytest.raises(waves.WaveError, match=r"--waves .*(e\.g\.|comma)"):
        waves.wave_sizes(bad, 10)


@pytest.mark.parametrize("bad", ["-1", "x", "101%", "1.5"])
def test_bad_budgets_name_the_flag(bad):
    with pytest.raises(waves.WaveError, match="--max-fail"):
        waves.budget(bad, 10)


@pytest.mark.parametrize("text,seconds", [("30", 30), ("30s", 30), ("5m", 300), ("1h", 3600),
                                          ("500ms", 0.5), ("1.5m", 90)])
def test_durations(text, seconds):
    assert waves.duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "5 minutes", "-1s", "25h", "2d"])
def test_bad_durations(bad):
    with pytest.raises(waves.WaveError, match="--bake"):
        waves.duration(bad)
