"""record_run: session log, tag index, summaries, decay, config switches."""

from __future__ import annotations

from datetime import datetime

from journal_fixtures import METADATA, original_run, run

from fleet.continuity import archive, envelope, journal, summary, tagindex

NOW = datetime(2026, 3, 31, 14, 7)  # a Tuesday


def _mem(tmp_path, *parts):
    return tmp_path.joinpath("memory", *parts)


def test_original_run_session_log_entry(tmp_path):
    record = journal.record_run(tmp_path, original_run(), {}, now=NOW)
    assert record.session_log == _mem(tmp_path, "sessions", "2026-03-31.md")
    assert record.session_log.read_text() == (
        "# Session Log \u2014 2026-03-31\n"
        "\n"
        "### 14:07\n"
        "- **Topic:** Please build the #deploy-pipeline for #Infra team\n"
        "- **Messages:** 2 user / 2 assistant\n"
        "- **Est. tokens:** ~49\n"
        "\n"
    )
    assert record.tags == ["#deploy-pipeline", "#infra"]
    assert _mem(tmp_path, "tags.md").read_text() == (
        "# Tag Index\n\n## #deploy-pipeline\n- 2026-03-31\n\n## #infra\n- 2026-03-31\n"
    )


def test_second_run_appends_entry(tmp_path):
    journal.record_run(tmp_path, run("first topic of the day"), {}, now=NOW)
    journal.record_run(tmp_path, run("second topic of the day"), {},
                       now=NOW.replace(hour=15, minute=30))
    text = _mem(tmp_path, "sessions", "2026-03-31.md").read_text()
    assert text.count("# Session Log") == 1
    assert "### 14:07\n- **Topic:** first topic of the day\n" in text
    assert "### 15:30\n- **Topic:** second topic of the day\n" in text
    assert text.index("14:07") < text.index("15:30")


def test_topic_rules(tmp_path):
    short = [{"role": "user", "content": "hi"}, {"role": "user", "content": METADATA + "ok"}]
    assert journal.record_run(tmp_path, short, {}, now=NOW).topic == "(no topic)"
    long_line = "x" * 200 + "\nsecond line"
    assert journal.record_run(tmp_path, run(long_line), {}, now=NOW).topic == "x" * 120
    sender = ("Sender (untrusted metadata):\n```json\n{\"id\": \"1\"}\n```\n\n"
              "Deploy the staging cluster\nplease")
    assert journal.record_run(tmp_path, run(sender), {}, now=NOW).topic == (
        "Deploy the staging cluster")


def test_empty_run_writes_nothing(tmp_path):
    record = journal.record_run(tmp_path, [], {}, now=NOW)
    assert record.session_log is None
    assert not (tmp_path / "memory").exists()


def test_session_logging_false_skips_log_and_tags(tmp_path):
    record = journal.record_run(tmp_path, original_run(), {"sessionLogging": False}, now=NOW)
    assert record.session_log is None
    assert not _mem(tmp_path, "sessions").exists()
    assert not _mem(tmp_path, "tags.md").exists()


def test_daily_summary_of_yesterday(tmp_path):
    monday = datetime(2026, 3, 30, 9, 0)
    journal.record_run(tmp_path, original_run(), {}, now=monday)
    journal.record_run(tmp_path, run("review the #infra budget today"), {},
                       now=monday.replace(hour=10))
    record = journal.record_run(tmp_path, run("next day work item"), {}, now=NOW)
    assert record.daily == _mem(tmp_path, "summaries", "daily", "2026-03-30.md")
    # Flaw of the original plugin, fixed: it counted the file header as a session (2 entries -> 3).
    assert record.daily.read_text() == (
        "# Daily Summary \u2014 2026-03-30\n"
        "\n"
        "**Sessions:** 2\n"
        "**Messages:** 3 user / 3 assistant\n"
        f"**Est. tokens:** ~{49 + journal.run_tokens(run('review the #infra budget today'))}\n"
        "\n"
        "## Topics\n"
        "1. Please build the #deploy-pipeline for #Infra team\n"
        "2. review the #infra budget today\n"
        "\n"
    )
    # Written once only.
    again = journal.record_run(tmp_path, run("another item later"), {}, now=NOW)
    assert again.daily is None


def test_summary_disabled(tmp_path):
    journal.record_run(tmp_path, original_run(), {}, now=datetime(2026, 3, 30, 9, 0))
    record = journal.record_run(tmp_path, run("next day work item"), {"summaryEnabled": False},
                                now=NOW)
    assert record.daily is None
    assert not _mem(tmp_path, "summaries").exists()


def test_weekly_summary_on_monday_with_iso_label_at_year_boundary(tmp_path):
    # ISO week 2026-W01 runs Mon 2025-12-29 .. Sun 2026-01-04.
    journal.record_run(tmp_path, run("year end #release work"), {}, now=datetime(2025, 12, 30, 9))
    journal.record_run(tmp_path, run("Year End #release work again"), {},
                       now=datetime(2026, 1, 3, 9))
    journal.record_run(tmp_path, run("new topic entirely here"), {}, now=datetime(2026, 1, 3, 10))
    record = journal.record_run(tmp_path, run("monday morning start"), {},
                                now=datetime(2026, 1, 5, 8))
    # Flaw of the original plugin, fixed: it labelled this week with the Monday's calendar year
    # (2025-W01).
    assert record.weekly == _mem(tmp_path, "summaries", "weekly", "2026-W01.md")
    assert record.weekly.read_text() == (
        "# Weekly Summary \u2014 2026-W01\n"
        "> 2025-12-29 to 2026-01-04\n"
        "\n"
        "**Active days:** 2/7\n"
        "**Total sessions:** 3\n"
        "**Total messages:** 3 user / 3 assistant\n"
        f"**Est. total tokens:** ~{sum(journal.run_tokens(run(t)) for t in ['year end #release work', 'Year End #release work again', 'new topic entirely here'])}\n"  # noqa: E501
        "\n"
        "## Key Topics\n"
        "- year end #release work\n"
        "- Year End #release work again\n"
        "- new topic entirely here\n"
        "\n"
    )


def test_weekly_topics_dedup_by_first_50_chars(tmp_path):
    base = "a" * 50
    for hour, tail in ((9, "one"), (10, "two")):
        journal.record_run(tmp_path, run(base + tail), {}, now=datetime(2026, 3, 24, hour))
    record = journal.record_run(tmp_path, run("monday again here"), {},
                                now=datetime(2026, 3, 30, 8))
    text = record.weekly.read_text()
    assert text.count("- " + base) == 1
    assert record.weekly.name == "2026-W13.md"


def test_no_weekly_on_other_days_or_empty_weeks(tmp_path):
    record = journal.record_run(tmp_path, run("monday with nothing before"), {},
                                now=datetime(2026, 3, 30, 8))
    assert record.weekly is None
    assert journal.record_run(tmp_path, run("tuesday work item"), {}, now=NOW).weekly is None


def test_week_label_iso_year():
    from datetime import date
    assert summary.week_label(date(2024, 12, 30)) == "2025-W01"
    assert summary.week_label(date(2021, 1, 3)) == "2020-W53"
    assert summary.week_label(date(2026, 3, 31)) == "2026-W14"


def test_tag_index_exact_header_match(tmp_path):
    # Flaw fixed: `## #foo` was found inside `## #foobar` by substring lookup.
    journal.record_run(tmp_path, run("work on #foobar feature"), {}, now=datetime(2026, 3, 30, 9))
    journal.record_run(tmp_path, run("work on #foo feature now"), {}, now=NOW)
    rows = {row.tag: row.dates for row in tagindex.parse(_mem(tmp_path, "tags.md").read_text())}
    assert rows == {"#foobar": ["2026-03-30"], "#foo": ["2026-03-31"]}


def test_tag_dates_newest_first_without_duplicates(tmp_path):
    journal.record_run(tmp_path, run("fix the #ci pipeline"), {}, now=datetime(2026, 3, 30, 9))
    journal.record_run(tmp_path, run("fix the #CI pipeline again"), {}, now=NOW)
    journal.record_run(tmp_path, run("fix the #ci pipeline more"), {}, now=NOW)
    rows = tagindex.parse(_mem(tmp_path, "tags.md").read_text())
    assert [(r.tag, r.dates) for r in rows] == [("#ci", ["2026-03-31", "2026-03-30"])]


def test_record_run_decays_archives(tmp_path):
    old = archive.archive_state(tmp_path, "old", now=datetime(2026, 1, 1))
    journal.record_run(tmp_path, run("some topic here"), {"archiveDecayDays": 30}, now=NOW)
    assert not old.exists()
    assert (old.parent / "cold" / old.name).read_text() == "old"


def test_record_run_decay_disabled(tmp_path):
    old = archive.archive_state(tmp_path, "old", now=datetime(2026, 1, 1))
    journal.record_run(tmp_path, run("some topic here"), {"archiveDecayDays": 0}, now=NOW)
    assert old.exists()


def test_never_deletes_user_files(tmp_path):
    # Flaw of the original plugin, fixed: it deleted users' notes when memory/ held more than 500
    # files.
    notes = tmp_path / "memory"
    notes.mkdir()
    for i in range(510):
        (notes / f"note-{i:03d}.md").write_text("mine")
    journal.record_run(tmp_path, run("some topic here"), {}, now=NOW)
    assert len(list(notes.glob("note-*.md"))) == 510


def test_message_helpers():
    assert journal.message_text({"content": [
        {"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}) == "a\nb"
    assert journal.message_text({"content": None}) == ""
    assert journal.message_text("not a dict") == ""
    assert envelope.user_words(METADATA + "  hello  ") == "hello"
    assert [t for t in journal.user_texts(original_run()) if len(t) > 10] == [
        "Please build the #deploy-pipeline for #Infra team", "and also fix the tests please"]


def test_concurrent_runs_all_logged(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(
            lambda i: journal.record_run(tmp_path, run(f"parallel task {i:02d}"), {}, now=NOW),
            range(30)))
    text = _mem(tmp_path, "sessions", "2026-03-31.md").read_text()
    assert text.count("# Session Log") == 1
    assert sorted(e.split("\n")[0] for e in text.split("- **Topic:** ")[1:]) == [
        f"parallel task {i:02d}" for i in range(30)]


def test_metadata_envelopes_stripped_without_eating_the_message():
    both = (METADATA + "Sender (untrusted metadata):\n```json\n{\"id\": \"1\"}\n```\n\n"
            "Deploy now\n\nsecond paragraph")
    assert envelope.user_words(both) == "Deploy now\n\nsecond paragraph"
    # No blank line after the fenced block: only the envelope goes, the message stays whole.
    tight = "Conversation info (untrusted metadata):\n```json\n{}\n```\nFix CI\n\nplease"
    assert envelope.user_words(tight) == "Fix CI\n\nplease"
    crlf = METADATA.replace("\n", "\r\n") + "hello there"
    assert envelope.user_words(crlf) == "hello there"
    unfenced = "Conversation info (untrusted metadata): chat 42\n\nreal text"
    assert envelope.user_words(unfenced) == "real text"


def test_unicode_and_punctuated_tags(tmp_path):
    record = journal.record_run(tmp_path, run("部署 #部署 and #infra. plus #CI_2!"), {}, now=NOW)
    assert record.tags == ["#部署", "#infra", "#ci_2"]


def test_daily_summaries_backfilled_after_quiet_days(tmp_path):
    journal.record_run(tmp_path, run("thursday work item"), {}, now=datetime(2026, 3, 26, 9))
    journal.record_run(tmp_path, run("friday work item"), {}, now=datetime(2026, 3, 27, 9))
    # Nothing from Saturday to Monday; Tuesday's run still summarises Friday.
    record = journal.record_run(tmp_path, run("tuesday work item"), {}, now=NOW)
    assert record.daily is None  # Monday had no log
    assert [p.name for p in record.backfilled] == ["2026-03-27.md"]
    assert "1. friday work item" in summary.daily_dir(tmp_path).joinpath(
        "2026-03-27.md").read_text()
    assert [p.name for p in summary.list_daily(tmp_path)] == ["2026-03-27.md", "2026-03-26.md"]


def test_a_subagents_old_journal_moves_into_its_own_directory_without_overwriting(tmp_path):
    child = tmp_path / "ws" / "memory" / "subagents" / "c1"
    (child / "memory" / "sessions").mkdir(parents=True)
    (child / "memory" / "sessions" / "2026-01-05.md").write_text("old\n")
    (child / "memory" / "tags.md").write_text("old tags\n")
    (child / "sessions").mkdir()
    (child / "sessions" / "2026-01-05.md").write_text("new\n")  # the name is taken
    moved = journal.adopt_legacy_child_journal(child)
    assert sorted(p.relative_to(child).as_posix() for p in moved) == [
        "sessions/2026-01-05.moved-1.md", "tags.md"]
    assert (child / "sessions" / "2026-01-05.md").read_text() == "new\n"
    assert (child / "sessions" / "2026-01-05.moved-1.md").read_text() == "old\n"
    assert not (child / "memory").exists()
    workspace = tmp_path / "ws"  # an agent's workspace is never treated as a child's directory
    (workspace / "memory" / "notes.md").write_text("mine\n")
    assert journal.adopt_legacy_child_journal(workspace) == []
    assert (workspace / "memory" / "notes.md").read_text() == "mine\n"
