"""OpenClaw's texts around turns, as its releases write them, shared by the envelope and origin
tests (the corpus test reads the recorded ones instead)."""

LEGACY = (
    "OpenClaw runtime context (internal):\n"
    "This context is runtime-generated, not user-authored. Keep internal details private.\n\n"
    "[Internal task completion event]\nsource: subagent\n<<<BEGIN_UNTRUSTED_CHILD_RESULT>>>\n"
    "3 issues\n<<<END_UNTRUSTED_CHILD_RESULT>>>\n\nAction:\nTell the user.")
