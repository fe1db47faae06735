"""fleet: release, deploy and prove a memory-continuity runtime across agent gateways."""

__version__ = "0.1.0"
