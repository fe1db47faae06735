"""A read-only host-side command (`status`, `doctor`) ends with its command: on its own after
2 x --timeout + 5 s with an answer that says so, and at once on a hang-up, as any plain command
run over ssh does. Before, a host-side doctor stuck on a FIFO ignored SIGHUP, survived SIGTERM
and stayed behind after the control side had given up on it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fleet.installer.faults import fault_dir

REPO = Path(__file__).resolve().parents[2]


def held_doctor(state: Path, timeout: str) -> subprocess.Popen:
    """`python -m fleet.installer doctor` held at its start by the fault seam (up to 60 s)."""
    faults = fault_dir(state)
    faults.mkdir(parents=True, exist_ok=True)
    (faults / "doctor").write_text("hold")
    return subprocess.Popen([sys.executable, "-m", "fleet.installer", "doctor", "--state-dir",
                             str(state), "--timeout", timeout], stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONPATH=str(REPO)),
                            start_new_session=True)


def wait_held(state: Path) -> None:
    marker = fault_dir(state) / "doctor.held"
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline, "the doctor never reached its start"
        time.sleep(0.05)


def test_a_doctor_that_cannot_finish_gives_up_by_itself_and_says_why(tmp_path):
    proc = held_doctor(tmp_path, "1")
    out, _ = proc.communicate(timeout=45)  # the hold would last 60 s
    answer = json.loads(out.strip().splitlines()[-1])
    assert proc.returncode == 1
    assert answer == {"ok": False, "result": "error",
                      "reason": "doctor did not finish within 7 s (2 x --timeout + 5 s) and "
                                "gave up"}


def test_a_doctor_ends_when_its_caller_hangs_up(tmp_path):
    proc = held_doctor(tmp_path, "60")
    wait_held(tmp_path)
    os.killpg(proc.pid, signal.SIGHUP)  # what the local connection does past its timeout
    proc.communicate(timeout=20)
    assert proc.returncode == -signal.SIGHUP
