"""The installer's live progress: a step is announced on stderr once it lasts, while it runs;
quick steps cost the control side no line (fleet.installer.announcer)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from fleet.installer.announcer import StepAnnouncer


def _wait_for(check, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()


def test_a_step_that_lasts_is_announced_once_while_it_runs_and_a_quick_one_never():
    said: list[dict] = []
    news = StepAnnouncer(0.05, write=said.append)
    news.begin("restart")
    assert _wait_for(lambda: said == [{"step": "restart"}])
    time.sleep(0.2)
    assert said == [{"step": "restart"}]  # once, not every 0.05 s
    news.end()
    for name in ("switch", "audit"):
        news.begin(name)
        news.end()
    time.sleep(0.3)
    assert said == [{"step": "restart"}]


def test_a_simulated_host_announces_each_step_at_its_start_without_a_thread():
    said: list[dict] = []
    before = threading.active_count()
    news = StepAnnouncer(0.0, write=said.append)
    news.begin("lock")
    news.end()
    news.begin("verify")
    assert said == [{"step": "lock"}, {"step": "verify"}]
    assert threading.active_count() == before


def test_the_installer_announces_a_held_step_and_not_its_quick_ones(artifacts, host_states,
                                                                   fake_manager_args):
    art, state = artifacts(), host_states[0]
    faults = state / "fleet" / "faults"
    faults.mkdir(parents=True)
    (faults / "verify").write_text("hold")
    proc = subprocess.Popen([sys.executable, str(art.path), "install", "--state-dir", str(state),
                             "--sha256", art.sha256, "--timeout", "20", *fake_manager_args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        assert _wait_for(lambda: (faults / "verify.held").exists(), 30)
        assert _wait_for(lambda: '{"step": "verify"}\n' in lines), lines  # while still held
        assert (faults / "verify.held").exists()
    finally:
        (faults / "verify").unlink()
    out, _ = proc.communicate(timeout=60)
    reader.join(timeout=10)
    answer = json.loads(out)
    assert answer["result"] == "installed", answer
    said = [json.loads(line)["step"] for line in lines if line.startswith('{"step"')]
    assert said.count("verify") == 1
    quick = [step for step, seconds in answer["steps"].items()
             if seconds < 0.1 and step != "verify"]  # a hold is not in its step's time
    assert quick, answer["steps"]  # the lock and the audit take milliseconds
    assert not set(quick) & set(said), (said, answer["steps"])
