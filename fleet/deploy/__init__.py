"""fleet.deploy."""
