"""fleet.harness."""
