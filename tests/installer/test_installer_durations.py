"""Durations typed to the artifact's installer are bounded: `--timeout`, `--lock-wait` (a day),
`--lease` (7 days), an OpenClaw host's `cli_timeout` and `stop_grace` options (a day). A value
past the bound, inf or nan is refused naming the flag or option, before anything is done."""

from __future__ import annotations

import pytest
from deploy_helpers import run_installer


@pytest.mark.parametrize("flag, value, words", [
    ("--timeout", "1e300", "argument --timeout: 1e+300 seconds: at most 86400 (a day)"),
    ("--lock-wait", "inf", "argument --lock-wait: inf seconds: at most 86400 (a day)"),
    ("--lease", "1e9", "argument --lease: 1000000000.0 seconds: at most 604800 (7 days)"),
    ("--timeout", "nan", "argument --timeout: expected a number of seconds >= 0, got nan"),
])
def test_an_installer_duration_past_its_bound_is_refused_naming_the_flag(tmp_path, artifacts,
                                                                         flag, value, words):
    state = tmp_path / "state"
    code, out = run_installer(artifacts().path, "status", "--state-dir", str(state), flag, value)
    assert code == 2 and words in out["stderr"], out
    assert not state.exists()


def test_an_openclaw_duration_option_past_its_bound_is_refused_naming_it(tmp_path, artifacts):
    state = tmp_path / "state"
    code, out = run_installer(artifacts().path, "status", "--state-dir", str(state),
                              "--manager", "openclaw", "--manager-opt", "stop_grace=1e300")
    assert code == 2 and out["result"] == "error", out
    assert out["reason"] == ("openclaw manager: option stop_grace='1e300': 1e+300 seconds: at "
                             "most 86400 (a day); use a smaller number")
