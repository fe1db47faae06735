from __future__ import annotations

import multiprocessing
import os
import threading

import pytest

from fleet.continuity import store


def test_read_text_missing_and_invalid_utf8(tmp_path):
    assert store.read_text(tmp_path / "nope.md") is None
    p = tmp_path / "bad.md"
    p.write_bytes(b"ok \xff\xfe end")
    assert store.read_text(p) == "ok \ufffd\ufffd end"
    assert store.read_text(p, max_bytes=2) == "ok"


def test_atomic_write_keeps_bytes_and_mode(tmp_path):
    p = tmp_path / "deep" / "s.md"
    store.atomic_write(p, "a\r\nb\n")
    assert p.read_bytes() == b"a\r\nb\n"
    os.chmod(p, 0o600)
    store.atomic_write(p, "c")
    assert p.read_bytes() == b"c" and (os.stat(p).st_mode & 0o777) == 0o600


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    p = tmp_path / "s.md"
    store.atomic_write(p, "old")

    def boom(*_a):
        raise OSError("disk full")

    monkeypatch.setattr(store.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        store.atomic_write(p, "new")
    assert p.read_text() == "old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["s.md"]


def test_update_skips_writing_when_fn_returns_none(tmp_path):
    p = tmp_path / "s.md"
    assert store.update(p, lambda t: None) is None
    assert not p.exists()
    assert store.update(p, lambda t: t + "!", default="x") == "x!"
    assert p.read_text() == "x!"


def _hold_lock(path, ready, release):
    with store.locked(path):
        ready.set()
        release.wait(10)


def test_lock_times_out_with_a_clear_error(tmp_path):
    p = tmp_path / "s.md"
    ready, release = threading.Event(), threading.Event()
    t = threading.Thread(target=_hold_lock, args=(p, ready, release))
    t.start()
    try:
        assert ready.wait(5)
        with pytest.raises(store.LockTimeout, match=r"s\.md\.lock.*0\.2s"), \
                store.locked(p, timeout=0.2):
            pass
    finally:
        release.set()
        t.join(5)
    with store.locked(p, timeout=1):  # released again
        pass


def _increment(path, n):
    for _ in range(n):
        store.update(path, lambda t: str(int(t) + 1), default="0")


def test_concurrent_updates_from_processes_and_threads_lose_nothing(tmp_path):
    p = tmp_path / "counter"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_increment, args=(str(p), 25)) for _ in range(4)]
    threads = [threading.Thread(target=_increment, args=(p, 25)) for _ in range(4)]
    for w in procs + threads:
        w.start()
    for w in procs + threads:
        w.join(120)
    assert all(pr.exitcode == 0 for pr in procs)
    assert p.read_text() == "200"
