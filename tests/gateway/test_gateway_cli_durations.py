"""The gateway CLI's durations (`--timeout`, `--retry`) are at most a day: a value past it, inf,
nan or a negative one is refused naming the flag, before anything is done."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("args", [["call", "health", "--timeout", "1e300"],
                                  ["call", "health", "--retry", "inf"],
                                  ["stop", "--timeout", "-5"], ["start", "--timeout", "1e9"]])
def test_a_gateway_cli_duration_past_a_day_is_refused_naming_the_flag(tmp_path, args):
    proc = subprocess.run([sys.executable, "-m", "fleet.gateway", "--state-dir",
                           str(tmp_path / "gw"), *args], capture_output=True, text=True,
                          timeout=60)
    flag = args[-2]
    assert proc.returncode == 2 and f"argument {flag}: '{args[-1]}': use 0 to 86400 seconds" \
        in proc.stderr, proc.stderr
    assert not (tmp_path / "gw").exists()
