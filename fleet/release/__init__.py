"""fleet.release."""
