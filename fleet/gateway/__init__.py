"""fleet.gateway."""
