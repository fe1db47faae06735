"""`logs`: each host's gateway log prefixed by host; `-f` follows across rotation; Ctrl-C stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from fleet.deploy import logs
from fleet.deploy.inventory import load

INVENTORY = """\
vars: {connection: local, gateway: {manager: fleet}}
hosts:
  alpha: {state_dir: hosts/alpha}
  b: {state_dir: hosts/b}
  empty: {state_dir: hosts/empty}
groups:
  two: {hosts: [alpha, b]}
"""


@pytest.fixture
def fleet_dir(tmp_path):
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    for name in ("alpha", "b"):
        log = tmp_path / "hosts" / name / "logs" / "gateway.log"
        log.parent.mkdir(parents=True)
        log.write_text("".join(f"{name} line {i}\n" for i in range(5)))
    (tmp_path / "hosts" / "empty").mkdir(parents=True)
    return tmp_path


def hosts(fleet_dir, names):
    return load(fleet_dir / "inventory.yaml").select(names)


class Collector:
    def __init__(self):
        self.out, self.err = [], []
        self.lock = threading.Lock()

    def __call__(self, host, line, is_error):
        with self.lock:
            (self.err if is_error else self.out).append((host, line))

    def lines(self, host):
        with self.lock:
            return [line for h, line in self.out if h == host]


def test_last_lines_of_every_host_and_a_missing_log(fleet_dir):
    got = Collector()
    failed = logs.show(hosts(fleet_dir, "alpha,b,empty"), lines=2, emit=got)
    assert got.lines("alpha") == ["alpha line 3", "alpha line 4"]
    assert got.lines("b") == ["b line 3", "b line 4"]
    assert failed == 1 and got.err[0][0] == "empty" and "no log yet" in got.err[0][1]


def test_first_read_takes_older_lines_from_the_rotated_file(fleet_dir):
    log = fleet_dir / "hosts" / "b" / "logs" / "gateway.log"
    os.replace(log, log.with_name("gateway.log.1"))
    log.write_text("b new 0\npartial without newline")
    got = Collector()
    logs.show(hosts(fleet_dir, "b"), lines=3, emit=got)
    assert got.lines("b") == ["b line 3", "b line 4", "b new 0"]


def wait_for(cond, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def follow_alpha(fleet_dir):
    """`logs -f` of alpha on a thread, once it printed alpha's last line: (log, lines, stop,
    thread)."""
    log = fleet_dir / "hosts" / "alpha" / "logs" / "gateway.log"
    got, stop = Collector(), threading.Event()
    runner = threading.Thread(target=logs.show, daemon=True, kwargs=dict(
        hosts=hosts(fleet_dir, "alpha"), lines=1, follow=True, emit=got, poll_s=0.05,
        stop=stop))
    runner.start()
    assert wait_for(lambda: got.lines("alpha") == ["alpha line 4"])
    return log, got, stop, runner


def test_follow_prints_new_whole_lines_across_a_rotation_and_stops(fleet_dir):
    log, got, stop, runner = follow_alpha(fleet_dir)
    with open(log, "a") as fh:
        fh.write("new 1\nhalf a li")
    assert wait_for(lambda: "new 1" in got.lines("alpha"))
    with open(log, "a") as fh:  # the half line waits for its end (the list below says so)
        fh.write("ne\nlast before rotation\n")
    os.replace(log, log.with_name("gateway.log.1"))  # rotated before the next poll sees it
    log.write_text("first after rotation\n")
    assert wait_for(lambda: "first after rotation" in got.lines("alpha"))
    assert got.lines("alpha") == ["alpha line 4", "new 1", "half a line",
                                  "last before rotation", "first after rotation"]
    stop.set()
    runner.join(timeout=10)
    assert not runner.is_alive()


def test_follow_passes_a_line_longer_than_a_read_cut_and_marked_then_goes_on(fleet_dir):
    log, got, stop, runner = follow_alpha(fleet_dir)
    with open(log, "a") as fh:  # 2.5 reads long: once stalled every later line for good
        fh.write("X" * (logs.CHUNK * 5 // 2) + "\nafter the long one\n")
    assert wait_for(lambda: "after the long one" in got.lines("alpha"))
    stop.set()
    runner.join(timeout=10)
    first, long_line, after = got.lines("alpha")
    assert long_line == "X" * logs.SHOWN + " \u2026 [line cut: longer than 1 MiB]"
    assert after == "after the long one" and not got.err


def test_a_fifo_as_the_log_is_reported_not_waited_on(fleet_dir):
    log = fleet_dir / "hosts" / "alpha" / "logs" / "gateway.log"
    log.unlink()
    os.mkfifo(log)
    got = Collector()
    failed = logs.show(hosts(fleet_dir, "alpha"), lines=2, emit=got, timeout=20)
    assert failed == 1
    assert got.err == [("alpha", f"error: {log} is not a regular file; fleet does not read it")]


def test_follow_reports_a_failing_host_once_and_keeps_the_others(fleet_dir):
    got, stop = Collector(), threading.Event()
    runner = threading.Thread(target=logs.show, daemon=True, kwargs=dict(
        hosts=hosts(fleet_dir, "b,empty"), lines=1, follow=True, emit=got, poll_s=0.05,
        stop=stop))
    runner.start()
    assert wait_for(lambda: got.err and got.lines("b"))  # following: the failure told, b's tail
    (fleet_dir / "hosts" / "b" / "logs" / "gateway.log").open("a").write("later\n")
    assert wait_for(lambda: "later" in got.lines("b"))
    stop.set()
    runner.join(timeout=10)
    assert [h for h, _ in got.err] == ["empty"]


def fleet_cmd(*args):
    return [sys.executable, "-c", "from fleet.cli.program import main; main()", *args]


def test_task_prefixes_lines_by_host(fleet_dir):
    proc = subprocess.run(fleet_cmd("logs", "--hosts", "two", "-n", "1"), cwd=fleet_dir,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["alpha | alpha line 4", "b     | b line 4"]


def test_task_follow_stops_on_ctrl_c(fleet_dir):
    proc = subprocess.Popen(fleet_cmd("logs", "--hosts", "alpha", "-n", "1", "-f"), cwd=fleet_dir,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killer = threading.Timer(60, proc.kill)  # a broken follower must not hang the suite
    killer.start()
    try:
        assert proc.stdout.readline() == "alpha | alpha line 4\n"  # the first read is done
        with open(fleet_dir / "hosts" / "alpha" / "logs" / "gateway.log", "a") as fh:
            fh.write("followed line\n")
        first = proc.stdout.readline()  # blocks until the follower prints it
        assert first == "alpha | followed line\n"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


def test_task_follow_stops_on_ctrl_c_while_a_poll_hangs(tmp_path):
    """A host whose read never answers (its python hangs): Ctrl-C ends the follower at once,
    not when that poll's own timeout (20 s) gives up."""
    started = tmp_path / "poll-started"
    hang = tmp_path / "hanging-python"
    hang.write_text(  # SIGHUP as a command under sshd has it (the suite may run under nohup)
        f"#!{sys.executable}\nimport os, signal, time\n"
        "signal.signal(signal.SIGHUP, signal.SIG_DFL)\n"
        f"open({str(started)!r} + '.tmp', 'w').write(str(os.getpid()))\n"
        f"os.rename({str(started)!r} + '.tmp', {str(started)!r})\n"
        "time.sleep(60)\n")
    hang.chmod(0o755)
    (tmp_path / "inventory.yaml").write_text(
        "vars: {connection: local, gateway: {manager: fleet}}\n"
        f"hosts:\n  stuck: {{state_dir: hosts/stuck, python: {hang}}}\n")
    proc = subprocess.Popen(fleet_cmd("logs", "--hosts", "stuck", "-f"), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0  # the poll would give up only after 20 s
        assert "Traceback" not in proc.stderr.read()
        poller = int(started.read_text())
        deadline = time.monotonic() + 10
        while _alive(poller):  # hung up, as an ssh session's close would
            assert time.monotonic() < deadline, f"the hung poll {poller} outlived the follower"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie waiting for its reaper is gone for us
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def _stamped(now: float) -> str:
    """A log in both formats: our gateway's (local time, comma) and OpenClaw's (ISO, offset);
    an unstamped continuation line belongs to the line before it."""
    local = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now - 3 * 3600)) + ",271"
    utc = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now - 20 * 60)) + ".597+00:00"
    recent = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now - 60)) + ".001Z"
    return (f"{local} INFO old start\n{local} ERROR old failure\n"
            f"{utc} [gateway] ERROR twenty minutes ago\n  continued detail\n"
            f"{recent} [gateway] info a minute ago\n")


def test_since_and_grep_filter_on_the_host(fleet_dir):
    text = _stamped(time.time())
    (fleet_dir / "hosts" / "alpha" / "logs" / "gateway.log").write_text(text)
    lines = text.splitlines()

    def shown(**only) -> list[str]:
        got = Collector()
        logs.show(hosts(fleet_dir, "alpha"), lines=100, emit=got, only=logs.Filter(**only))
        return got.lines("alpha")

    assert shown(since_ago=30 * 60) == lines[2:]  # the continuation line goes with its line
    assert shown(since_ago=5 * 3600) == lines
    assert shown(since_ago=0) == []
    assert shown(grep="ERROR") == [lines[1], lines[2]]
    assert shown(grep="ERROR", since_ago=3600) == [lines[2]]
    assert shown(grep="(?i)error|minute", since_ago=3600) == [lines[2], lines[4]]
    # a moment: the UTC line is 20 minutes back, so 25 minutes back keeps it and what follows
    assert shown(since_at=time.time() - 25 * 60) == lines[2:]


def test_grep_applies_while_following(fleet_dir):
    got, stop = Collector(), threading.Event()
    follower = threading.Thread(target=logs.show, args=(hosts(fleet_dir, "alpha"), 0, True, got),
                                kwargs={"poll_s": 0.1, "stop": stop,
                                        "only": logs.Filter(grep="(?i)keep")}, daemon=True)
    follower.start()
    try:
        time.sleep(0.5)
        with open(fleet_dir / "hosts" / "alpha" / "logs" / "gateway.log", "a") as fh:
            fh.write("drop this\nKEEP this one\nand drop\n")
        deadline = time.monotonic() + 30
        while not got.lines("alpha") and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        follower.join(30)
    assert got.lines("alpha") == ["KEEP this one"]


def test_task_since_and_grep_and_their_usage_errors(fleet_dir):
    (fleet_dir / "hosts" / "alpha" / "logs" / "gateway.log").write_text(_stamped(time.time()))
    proc = subprocess.run(fleet_cmd("logs", "-H", "alpha", "--since", "30m", "--grep", "ERROR"),
                          cwd=fleet_dir, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("[gateway] ERROR twenty minutes ago\n"), proc.stdout
    assert len(proc.stdout.splitlines()) == 1, proc.stdout
    for flag, value, says in (("--since", "yesterday", "use a duration"),
                              ("--grep", "([", "not a valid regular expression")):
        proc = subprocess.run(fleet_cmd("logs", "-H", "alpha", flag, value), cwd=fleet_dir,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and says in proc.stderr, proc.stderr
