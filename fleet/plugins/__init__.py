"""fleet.plugins."""
