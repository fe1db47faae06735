"""The arithmetic of a progressive rollout: wave sizes, the failure budget, bake durations.

`--waves 1,10%,50%,100%` gives the size of each wave, as Ansible's `serial: [1, "10%", "50%"]`
does: a number is that many hosts, a percentage is that share of the whole selection (rounded up,
at least one host). A wave takes at most what is left, the last wave takes everything left, and
a wave that would be empty is dropped, so every wave changes at least one host and every host is
in exactly one wave.

`--max-fail N|N%` is spent when the failures of the whole rollout *exceed* it, as Ansible's
`max_fail_percentage`: with 20 hosts, `10%` tolerates 2 failures and aborts at the 3rd; `0`
aborts at the first. A percentage is compared exactly (floor of the share), so `10%` of 15
hosts tolerates 1 failure (2 of 15 is 13% > 10%).
"""

from __future__ import annotations

import math

from fleet.deploy.duration import seconds as seconds_of

DEFAULT_WAVES = "1,25%,100%"


class WaveError(ValueError):
    """A flag value the rollout cannot use; the message names the flag and a valid example."""


def _share(item: str, total: int, flag: str, spec: str) -> tuple[str, float]:
    text = item.strip()
    try:
        if text.endswith("%"):
            pct = float(text[:-1])
            if not 0 < pct <= 100 or math.isnan(pct):
                raise ValueError
            return "%", pct
        number = int(text)
        if number < 1:
            raise ValueError
        return "n", float(number)
    except ValueError:
        raise WaveError(f"{flag} {spec!r}: {item.strip()!r} is neither a whole number of hosts "
                        "(1 or more) nor a percentage in (0, 100]; e.g. "
                        f"{flag} {DEFAULT_WAVES}") from None


def wave_sizes(spec: str, total: int) -> list[int]:
    """The size of each wave for `total` hosts (see the module doc); sums to `total`."""
    items = [i for i in str(spec).split(",")]
    if not str(spec).strip() or any(not i.strip() for i in items):
        raise WaveError(f"--waves {spec!r}: give comma-separated sizes, e.g. --waves "
                        f"{DEFAULT_WAVES}")
    if total < 1:
        return []
    sizes: list[int] = []
    left = total
    for index, item in enumerate(items):
        kind, value = _share(item, total, "--waves", spec)
        want = int(value) if kind == "n" else max(1, math.ceil(total * value / 100))
        last = index == len(items) - 1
        size = left if last else min(want, left)
        if size > 0:
            sizes.append(size)
            left -= size
    return sizes


def plan(names: list[str], spec: str) -> list[list[str]]:
    """`names` (in selection order) cut into waves of `wave_sizes(spec, len(names))`."""
    out, start = [], 0
    for size in wave_sizes(spec, len(names)):
        out.append(names[start:start + size])
        start += size
    return out


def budget(spec: str | int | None, total: int) -> int | None:
    """Failures the rollout tolerates (None: unlimited); spent when failures exceed it."""
    if spec is None or str(spec).strip() == "":
        return None
    text = str(spec).strip()
    try:
        if text.endswith("%"):
            pct = float(text[:-1])
            if not 0 <= pct <= 100 or math.isnan(pct):
                raise ValueError
            return math.floor(total * pct / 100 + 1e-9)
        number = int(text)
        if number < 0:
            raise ValueError
        return number
    except ValueError:
        raise WaveError(f"--max-fail {spec!r}: expected a whole number or a percentage like "
                        "10% (failures tolerated before the rollout is taken back)") from None


def spent(failures: int, tolerated: int | None) -> bool:
    """True when `failures` exceed the budget (never for an unlimited one)."""
    return tolerated is not None and failures > tolerated


def left(failures: int, tolerated: int | None) -> int | None:
    """Failures still tolerated before the budget is spent (None: unlimited)."""
    return None if tolerated is None else max(0, tolerated - failures)


MAX_BAKE_S = 24 * 3600.0


def duration(spec: str, flag: str = "--bake") -> float:
    """Seconds of `30`, `30s`, `5m`, `1h` or `500ms`; a clear error otherwise."""
    seconds = seconds_of(spec)
    if seconds is None:
        raise WaveError(f"{flag} {spec!r}: expected a duration like 30s, 5m or 1h")
    if seconds > MAX_BAKE_S:
        raise WaveError(f"{flag} {spec!r}: at most 24h")
    return seconds
