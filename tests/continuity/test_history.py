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
