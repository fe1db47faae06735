from __future__ import annotations

from fleet.continuity.history import keywords, related_history


def test_keywords_follow_the_original_plugin_rules():
    assert keywords("Build the deploy-pipeline with Docker for 你好世界 about this") == [
        "build", "deploy-pipeline", "docker", "你好世界"]
    assert len(keywords(" ".join(f"word{i}" for i in range(30)))) == 10


def make_history(ws):
    daily = ws / "memory" / "summaries" / "daily"
    daily.mkdir(parents=True)
    (daily / "2026-03-01.md").write_text(
        "# Daily Summary — 2026-03-01\n\n**Sessions:** 2\n\n## Topics\n1. deploy pipeline\n"
        "2. docker images\n3. other\n4. more\n")
    (daily / "2026-03-02.md").write_text("# Daily Summary — 2026-03-02\n\n## Topics\n1. cooking\n")
    sessions = ws / "memory" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "2026-03-03.md").write_text(
        "# Session Log — 2026-03-03\n\n### 10:15\n- **Topic:** pipeline build for docker deploy\n"
        "- **Messages:** 1 user / 1 assistant\n\n### 11:00\n- **Topic:** docker only\n")


def test_related_history_scores_and_formats(tmp_path):
    make_history(tmp_path)
    out = related_history(tmp_path, "Fix the deploy pipeline docker build", 3)
    assert out.split("\n") == [
        "=== RELATED HISTORY ===",
        "[2026-03-03 10:15] pipeline build for docker deploy",
        "[2026-03-01] 1. deploy pipeline; 2. docker images; 3. other",
        "=== END RELATED HISTORY ===",
    ]
    assert related_history(tmp_path, "Fix the deploy pipeline docker build", 1).count("\n") == 2


def test_no_history_for_short_objectives_or_no_match(tmp_path):
    make_history(tmp_path)
    assert related_history(tmp_path, "deploy", 3) is None
    assert related_history(tmp_path, "completely unrelated gardening", 3) is None
    assert related_history(tmp_path / "missing", "deploy pipeline docker", 3) is None


def session_log(topics):
    return "# Session Log — 2026-03-04\n\n" + "".join(
        f"### 1{i}:00\n- **Topic:** {t}\n\n" for i, t in enumerate(topics))


def test_history_follows_a_log_rewritten_between_prompts(tmp_path):
    """Files are scored once per version: a log replaced between two prompts (atomically, same
    size, same second) must give the new answer, never the remembered one."""
    from fleet.continuity.store import atomic_write

    log = tmp_path / "memory" / "sessions" / "2026-03-04.md"
    log.parent.mkdir(parents=True)
    atomic_write(log, session_log(["cooking pasta again", "docker deploy pipeline"]))
    first = related_history(tmp_path, "Fix the deploy pipeline docker build", 1)
    assert "[2026-03-04 11:00] docker deploy pipeline" in first
    atomic_write(log, session_log(["docker deploy pipeline", "cooking pasta again"]))
    second = related_history(tmp_path, "Fix the deploy pipeline docker build", 1)
    assert "[2026-03-04 10:00] docker deploy pipeline" in second
    with log.open("a", encoding="utf-8") as fh:  # an append in place (no new inode)
        fh.write("### 23:00\n- **Topic:** docker deploy pipeline build fix\n")
    third = related_history(tmp_path, "Fix the deploy pipeline docker build", 1)
    assert "[2026-03-04 23:00] docker deploy pipeline build fix" in third


def test_best_items_are_chosen_across_files_not_per_file_first(tmp_path):
    """A file's weaker matches never hide another file's better one, and more items asked for
    after fewer (same keywords) still brings every match back."""
    sessions = tmp_path / "memory" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "2026-03-05.md").write_text(session_log(
        ["docker deploy", "docker deploy pipeline", "docker deploy again"]))
    (sessions / "2026-03-06.md").write_text(session_log(
        ["deploy docker", "deploy pipeline docker build"]))
    objective = "Fix the deploy pipeline docker build"
    assert related_history(tmp_path, objective, 1).split("\n")[1] == (
        "[2026-03-06 11:00] deploy pipeline docker build")
    lines = related_history(tmp_path, objective, 5).split("\n")[1:-1]
    assert lines == ["[2026-03-06 11:00] deploy pipeline docker build",
                     "[2026-03-05 11:00] docker deploy pipeline",
                     "[2026-03-06 10:00] deploy docker",
                     "[2026-03-05 10:00] docker deploy",
                     "[2026-03-05 12:00] docker deploy again"]
