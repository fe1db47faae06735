"""fleet.release: cutting releases (components and their version files, verify, bump,
changelog, tag, push) and the reproducible artifact; the release dirs on a host are
fleet.installer.releasedirs. Control side (Python >= 3.10); the CLI in fleet.cli.release is
a thin layer.
"""

from fleet.release.error import ReleaseError

__all__ = ["ReleaseError"]
