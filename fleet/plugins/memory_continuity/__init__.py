"""The memory-continuity plugin (OpenClaw id `memory-continuity`)."""
