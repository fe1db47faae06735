"""A run makes no full garbage collection while its hosts are in flight (each one walks every
host's connection objects), and leaves the collector as it found it."""

from __future__ import annotations

import contextlib
import gc
import threading

import pytest

from fleet.deploy import collector


def _three_generations() -> bool:
    """Whether this CPython collects by three generations with a threshold for the oldest
    (3.9-3.13); an incremental collector ignores that threshold, and has no full pause to
    defer."""
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], before[2] + 1)
    kept = gc.get_threshold()[2] == before[2] + 1
    gc.set_threshold(*before)
    return kept


pytestmark = pytest.mark.skipif(not _three_generations(),
                                reason="this Python's collector has no oldest-generation threshold")


@pytest.fixture
def collections():
    """The generation of each collection CPython starts on its own while the test runs."""
    seen: list[int] = []

    def record(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(record)
    yield seen
    gc.callbacks.remove(record)


def _grow_heap() -> list:
    """Long-lived container objects, twice as many as the collector tracks now: enough for
    CPython to start full collections of its own."""
    kept = []
    for _ in range(2 * len(gc.get_objects())):
        kept.append([])
    return kept


def test_a_heap_that_grows_during_a_run_gets_no_full_collection_until_the_run_ends(
        collections):
    before = gc.get_threshold()
    kept_outside = _grow_heap()
    assert 2 in collections, "the heap's growth should start full collections outside a run"
    collections.clear()
    with collector.full_collections_deferred():
        kept_inside = _grow_heap()
        inside = list(collections)
    assert 2 not in inside
    assert 0 in inside and 1 in inside  # young collections went on
    assert gc.get_threshold() == before
    del kept_outside, kept_inside


def test_overlapping_runs_restore_the_threshold_when_the_last_one_ends():
    before = gc.get_threshold()
    first_in, second_done = threading.Event(), threading.Event()

    def second() -> None:
        first_in.wait(10)
        with collector.full_collections_deferred():
            pass
        second_done.set()

    thread = threading.Thread(target=second)
    thread.start()
    with collector.full_collections_deferred():
        first_in.set()
        assert second_done.wait(10)
        assert gc.get_threshold()[2] == collector.DEFERRED  # the first run is still going
    thread.join(10)
    assert gc.get_threshold() == before


def test_a_threshold_set_during_a_run_is_kept_after_it():
    before = gc.get_threshold()
    try:
        with collector.full_collections_deferred():
            gc.set_threshold(before[0], before[1], 5)  # somebody's own choice, mid-run
        assert gc.get_threshold() == (before[0], before[1], 5)
    finally:
        gc.set_threshold(*before)


def test_a_deploy_leaves_the_collector_as_it_found_it(sandbox, artifacts):
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    real = collector.full_collections_deferred

    def watching():
        with real():
            seen.append(gc.get_threshold())
            yield

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(collector, "full_collections_deferred", contextlib.contextmanager(watching))
        results = sandbox.deploy(artifacts())
    assert all(r.ok for r in results.values())
    assert seen and seen[0][2] == collector.DEFERRED  # deferred while the hosts were in flight
    assert gc.get_threshold() == before
