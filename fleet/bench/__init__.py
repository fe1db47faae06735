"""fleet.bench."""
