"""Session archives: naming, collisions, cap, decay, listing."""

from __future__ import annotations

from datetime import datetime, timezone

from fleet.continuity import archive


def _names(paths):
    return [p.name for p in paths]


def test_archive_is_named_by_local_minute_and_verbatim(tmp_path):
    path = archive.archive_state(tmp_path, "old state\r\n", now=datetime(2026, 3, 31, 7, 5, 59))
    assert path == tmp_path / "memory" / "session_archive" / "2026-03-31_07-05.md"
    assert path.read_bytes() == b"old state\r\n"


def test_aware_now_is_converted_to_local_time(tmp_path):
    aware = datetime(2026, 3, 31, 7, 5, tzinfo=timezone.utc)
    expected = aware.astimezone().strftime("%Y-%m-%d_%H-%M") + ".md"
    assert archive.archive_state(tmp_path, "x", now=aware).name == expected


def test_same_minute_archives_never_overwrite(tmp_path):
    # Flaw of the original plugin, fixed: it overwrote an archive written in the same minute.
    now = datetime(2026, 3, 31, 7, 5)
    paths = [archive.archive_state(tmp_path, f"state {i}", now=now) for i in range(3)]
    assert _names(paths) == [
        "2026-03-31_07-05.md", "2026-03-31_07-05-2.md", "2026-03-31_07-05-3.md"]
    assert [p.read_text() for p in paths] == ["state 0", "state 1", "state 2"]


def test_list_archives_newest_first_with_suffix_order(tmp_path):
    now = datetime(2026, 3, 31, 7, 5)
    archive.archive_state(tmp_path, "a", now=datetime(2026, 3, 30, 23, 59))
    archive.archive_state(tmp_path, "b", now=now)
    archive.archive_state(tmp_path, "c", now=now)
    archive.archive_state(tmp_path, "d", now=datetime(2026, 3, 31, 7, 6))
    assert _names(archive.list_archives(tmp_path)) == [
        "2026-03-31_07-06.md", "2026-03-31_07-05-2.md", "2026-03-31_07-05.md",
        "2026-03-30_23-59.md",
    ]


def test_cap_deletes_oldest_own_archives_only(tmp_path):
    directory = tmp_path / "memory" / "session_archive"
    (directory / "cold").mkdir(parents=True)
    (directory / "cold" / "2020-01-01_00-00.md").write_text("cold")
    (directory / "notes.md").write_text("user file")
    for minute in range(5):
        archive.archive_state(tmp_path, str(minute), max_count=3,
                              now=datetime(2026, 1, 1, 10, minute))
    assert _names(archive.list_archives(tmp_path)) == [
        "2026-01-01_10-04.md", "2026-01-01_10-03.md", "2026-01-01_10-02.md"]
    # Flaw fixed: cold/ neither counted nor touched; foreign files kept.
    assert (directory / "cold" / "2020-01-01_00-00.md").read_text() == "cold"
    assert (directory / "notes.md").read_text() == "user file"


def test_cap_zero_means_twenty(tmp_path):
    for minute in range(22):
        archive.archive_state(tmp_path, "x", max_count=0, now=datetime(2026, 1, 1, 10, minute))
    assert len(archive.list_archives(tmp_path)) == 20


def test_decay_moves_old_archives_to_cold(tmp_path):
    old = archive.archive_state(tmp_path, "old", now=datetime(2026, 1, 1, 9, 0))
    fresh = archive.archive_state(tmp_path, "fresh", now=datetime(2026, 1, 30, 9, 0))
    moved = archive.decay_archives(tmp_path, 10, now=datetime(2026, 1, 31, 12, 0))
    cold = tmp_path / "memory" / "session_archive" / "cold"
    assert moved == [cold / old.name]
    assert (cold / old.name).read_text() == "old"
    assert not old.exists()
    assert fresh.exists()
    assert _names(archive.list_archives(tmp_path)) == [fresh.name]


def test_decay_never_clobbers_cold_file(tmp_path):
    cold = tmp_path / "memory" / "session_archive" / "cold"
    cold.mkdir(parents=True)
    (cold / "2026-01-01_09-00.md").write_text("earlier")
    archive.archive_state(tmp_path, "later", now=datetime(2026, 1, 1, 9, 0))
    archive.decay_archives(tmp_path, 1, now=datetime(2026, 2, 1))
    assert (cold / "2026-01-01_09-00.md").read_text() == "earlier"
    assert (cold / "2026-01-01_09-00-2.md").read_text() == "later"


def test_decay_disabled_for_zero_or_negative(tmp_path):
    path = archive.archive_state(tmp_path, "old", now=datetime(2020, 1, 1))
    assert archive.decay_archives(tmp_path, 0, now=datetime(2026, 1, 1)) == []
    assert archive.decay_archives(tmp_path, -5, now=datetime(2026, 1, 1)) == []
    assert path.exists()


def test_decay_boundary_is_local_midnight(tmp_path):
    path = archive.archive_state(tmp_path, "x", now=datetime(2026, 1, 1, 23, 0))
    # cutoff = 2026-01-31 00:00 - 30 days = 2026-01-01 00:00; midnight of the file is not older.
    assert archive.decay_archives(tmp_path, 30, now=datetime(2026, 1, 31, 0, 0)) == []
    assert len(archive.decay_archives(tmp_path, 30, now=datetime(2026, 1, 31, 0, 1))) == 1
    assert not path.exists()


def test_concurrent_archives_in_one_minute_all_kept(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    now = datetime(2026, 3, 31, 7, 5)
    with ThreadPoolExecutor(max_workers=8) as pool:
        paths = list(pool.map(
            lambda i: archive.archive_state(tmp_path, f"state {i}", max_count=100, now=now),
            range(40)))
    assert len(set(paths)) == 40
    assert sorted(p.read_text() for p in archive.list_archives(tmp_path)) == sorted(
        f"state {i}" for i in range(40))
