"""Host-side installer carried inside the artifact (standard library only, Python 3.9+)."""
