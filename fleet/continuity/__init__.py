"""fleet.continuity."""
