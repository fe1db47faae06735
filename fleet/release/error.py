"""The one exception type of fleet.release: a refusal or failure with a reason and a fix."""

from __future__ import annotations


class ReleaseError(Exception):
    """A release, verify or build step refused or failed; the message says why and what to do.

    The CLI prints the message and exits non-zero; Python callers can catch it.
    """
