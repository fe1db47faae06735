"""The user's words out of what OpenClaw wraps around them (fleet.continuity.envelope), with the
exact shapes OpenClaw 2026.4.24 writes (its bootstrap prefix and timestamp envelope were read
from a real gateway's agent_end messages)."""

from __future__ import annotations

import pytest
from openclaw_texts import LEGACY

from fleet.continuity import envelope, subagenttask

BOOTSTRAP_AND_STAMP = (
    "[Bootstrap pending]\n"
    "Please read BOOTSTRAP.md from the workspace and follow it before replying normally.\n"
    "If this run can complete the BOOTSTRAP.md workflow, do so.\n"
    "Do not pretend bootstrap is complete when it is not.\n"
    "Your first user-visible reply for a bootstrap-pending workspace must follow BOOTSTRAP.md, "
    "not a generic greeting.\n"
    "\n"
    "[Fri 2026-12-04 01:15 UTC] Migrate the billing service to Postgres 16 this week")
# 2026.5.3: the bootstrap paragraph, then the file itself and an instruction to follow it
BOOTSTRAP_FILE_AND_STAMP = (
    "[Bootstrap pending]\nPlease read BOOTSTRAP.md from the workspace and follow it before "
    "replying normally.\n\nBOOTSTRAP.md contents for this bootstrap turn:\n[BEGIN BOOTSTRAP.md]\n"
    "# BOOTSTRAP.md - Hello, World\n\n_You just woke up._\n\n## Related\n\n- [Agent "
    "workspace](/concepts/agent-workspace)\n[END BOOTSTRAP.md]\n\nFollow the BOOTSTRAP.md "
    "instructions above now. Treat them as workspace/user instructions, not as system policy."
    "\n\n[Fri 2026-12-04 13:45 UTC] Migrate the billing service to Postgres 16 this week")
INTERNAL = (
    "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\n"
    "OpenClaw runtime context (internal):\n"
    "[Internal task completion event]\n"
    "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nnested\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>\n"
    "<<<END_OPENCLAW_INTERNAL_CONTEXT>>>")


@pytest.mark.parametrize("wrapped, words", [
    (BOOTSTRAP_AND_STAMP, "Migrate the billing service to Postgres 16 this week"),
    (BOOTSTRAP_FILE_AND_STAMP, "Migrate the billing service to Postgres 16 this week"),
    ("[Fri 2026-12-04 01:15 UTC] Ship it", "Ship it"),
    ("[Thu 2026-12-03 23:59:07 GMT+1] with seconds and a zone", "with seconds and a zone"),
    ("[Telegram Ann (@ann) 2026-12-04 01:15 UTC] hi there", "hi there"),
    (INTERNAL + "\n\n[Fri 2026-12-04 01:16 UTC] What is next?", "What is next?"),
    ("Before\n\n" + INTERNAL + "\n\nAfter", "Before\n\nAfter"),
    ("Kept\n<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nnever closed", "Kept"),
    (INTERNAL, ""),  # an announce turn: nothing the user said
    ("[Fri 2026-12-04 02:45 UTC] " + INTERNAL, ""),  # 2026.4.24: the stamp on the marker's line
    ("[Fri 2026-12-04 02:45 UTC] " + INTERNAL + "\n\nand mine", "and mine"),
    (LEGACY + "\n\nThe user's follow-up", "The user's follow-up"),
    ("Conversation info (untrusted metadata):\n```json\n{\"chat\": 1}\n```\n\n"
     "[Fri 2026-12-04 01:15 UTC] Fix CI", "Fix CI"),
    # not envelopes: the user's own brackets and markers mid-text stay
    ("[x] done with the migration", "[x] done with the migration"),
    ("see [2026-12-04 01:15] in the log", "see [2026-12-04 01:15] in the log"),
    ("say <<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> inline", "say "
     "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> inline"),
])
def test_the_users_words_come_out_of_openclaws_wrappers(wrapped, words):
    assert envelope.user_words(wrapped) == words


def test_a_stamped_subagent_task_still_unwraps_to_the_task():
    task = "Check the replication lag on db-2"
    stamped = "[Fri 2026-12-04 01:16 UTC] " + subagenttask.wrap(task)
    assert subagenttask.unwrap(envelope.user_words(stamped)) == task


def test_a_2026_4_subagent_task_line_unwraps_to_the_task():
    first = ("[Fri 2026-12-04 02:45 UTC] [Subagent Context] You are running as a subagent "
             "(depth 1/1). Results auto-announce to your requester; do not busy-poll for "
             "status.\n\n[Subagent Context] This subagent session is persistent and remains "
             "available for thread follow-up messages.\n\n[Subagent Task]: Check db-2\nand db-3")
    assert subagenttask.unwrap(envelope.user_words(first)) == "Check db-2\nand db-3"
