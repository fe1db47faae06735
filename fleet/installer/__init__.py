"""fleet.installer."""
