"""`invoke logs`: each host's gateway log, prefixed by host; `-f` follows it.

Every read is one short command per host (a stdlib Python snippet run by the host's python),
so following is a loop of bounded polls, never a stream that can hang: each poll has a timeout,
a host that fails is reported and asked again on the next round, and Ctrl-C stops the loop
between or during polls. While following, SIGINT only sets a flag that every wait of the loop
checks (no KeyboardInterrupt raised inside a lock or a thread pool's bookkeeping), and polls run
on daemon threads, so a poll still in flight never holds the exit up. The snippet remembers
nothing; the control side keeps, per host, the log file's inode and the offset read so far.
When the gateway rotated the log between two polls (fleet/gateway/logfile.py: `gateway.log`
becomes `gateway.log.1`), the rest of the old file is read from `.1` first, so no line is lost;
only whole lines are returned; a line longer than one read (1 MiB) is shown as its head and a
mark, and its rest skipped, so following never stalls on it. A log that is not a regular file (a
FIFO) is reported, never waited on. Lines and host names are printed escaped (fleet.terminal.text),
`--json` keeps them exact."""

from __future__ import annotations

import json
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from fleet.continuity.statelayout import StateLayout
from fleet.deploy.connection import close_quietly, connect
from fleet.deploy.inventory import Host
from fleet.deploy.report import JSON_SCHEMA
from fleet.installer.textfile import size_text
from fleet.terminal.text import json_text, visible

LOG_FILE = StateLayout.GATEWAY_LOG
POLL_S = 1.0
POLL_TIMEOUT_S = 20.0
CHUNK = 1 << 20  # at most this many bytes per host per poll

SHOWN = 16 * 1024  # of a line longer than CHUNK, the head that is printed before the mark
CUT_MARK = " \u2026 [line cut: longer than {limit}]"
SCAN = 32 << 20  # `--since`/`--grep`: at most this much of the log and of its `.1` is searched
# A line's time, as our gateway (`2026-12-05 10:00:01,271`, local time) and OpenClaw
# (`2026-12-05T10:00:01.597+00:00`) write it; a line without one has its predecessor's.
STAMP = rb"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:[.,]\d+)?(Z|z|[+-]\d{2}:?\d{2})?"

LOG_PY = """\\
import json, os, re, stat, sys, time
from datetime import datetime
path = os.path.expanduser(sys.argv[1])
ino, off, want, chunk, skip, shown = (int(a) for a in sys.argv[2:8])
mark = sys.argv[8].encode("utf-8")
grep = re.compile(sys.argv[9]) if sys.argv[9] else None
kind, _, value = sys.argv[10].partition(":")
since = float(value) if value else None
if kind == "ago":
    since = time.time() - since
filtered = grep is not None or since is not None
scan = int(sys.argv[11])
STAMP = re.compile(@STAMP@)
def stamp(line):
    m = STAMP.match(line)
    if not m:
        return None
    try:
        text = m.group(1).decode() + " " + m.group(2).decode()
        when = datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    tz = m.group(3).decode() if m.group(3) else ""
    if not tz:
        return time.mktime(when.timetuple())
    if tz in ("Z", "z"):
        tz = "+00:00"
    sign = -1 if tz[0] == "-" else 1
    hh, mm = int(tz[1:3]), int(tz[-2:])
    return (when - datetime(1970, 1, 1)).total_seconds() - sign * (hh * 3600 + mm * 60)
def keep(lines):
    out, when = [], None
    for line in lines:
        t = stamp(line)
        if t is not None:
            when = t
        if since is not None and (when is None or when < since):
            continue
        if grep is not None and not grep.search(line.decode("utf-8", "replace")):
            continue
        if len(line) > chunk:
            line = line[:shown] + mark + b"\\n"
        out.append(line)
    return out
def read(p, start, limit):
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        fh.seek(start)
        return fh.read(limit)
def size_of(p):
    try:
        return os.stat(p).st_size
    except OSError:
        return 0
try:
    st = os.stat(path)
except OSError:
    print(json.dumps({"ino": 0, "off": 0, "missing": path}))
    sys.exit(0)
if not stat.S_ISREG(st.st_mode):
    print(json.dumps({"ino": 0, "off": 0, "irregular": path}))
    sys.exit(0)
data = b""
if ino < 0:
    size = st.st_size
    limit = scan if filtered else chunk
    start = max(0, size - limit)
    data = read(path, start, size - start)
    if start:
        data = data[data.find(b"\\n") + 1:]
    if filtered or data.count(b"\\n") < want:
        start = max(0, size_of(path + ".1") - limit)
        older = read(path + ".1", start, limit)
        if start:
            older = older[older.find(b"\\n") + 1:]
        data = older + data
    lines = data.splitlines(True)
    if lines and not lines[-1].endswith(b"\\n"):
        size -= len(lines.pop())
    if filtered:
        lines = keep(lines)
    data = b"".join(lines[-want:]) if want > 0 else b""
    off = size
    skip = 0
else:
    if ino and st.st_ino != ino:
        try:
            if os.stat(path + ".1").st_ino == ino:
                data = read(path + ".1", off, chunk)
        except OSError:
            pass
        off, skip = 0, 0
    if st.st_size < off:
        off, skip = 0, 0
    new = read(path, off, chunk)
    if skip:  # the rest of a line already cut: drop it through its newline
        end = new.find(b"\\n")
        if end < 0:
            off += len(new)
            new = b""
        else:
            off += end + 1
            new, skip = new[end + 1:], 0
    cut = new.rfind(b"\\n") + 1
    if not cut and len(new) >= chunk:  # one line longer than a whole read: its head, marked
        data += new[:shown] + mark + b"\\n"
        off += len(new)
        skip = 1
    else:
        data += new[:cut]
        off += cut
    if grep is not None:
        data = b"".join(keep(data.splitlines(True)))
sys.stdout.write(json.dumps({"ino": st.st_ino, "off": off, "skip": skip}) + "\\n")
sys.stdout.flush()
sys.stdout.buffer.write(data)
"""


LOG_PY = LOG_PY.replace("@STAMP@", repr(STAMP))


@dataclass(frozen=True)
class Filter:
    """`--grep` (a Python regular expression, searched in each line) and `--since`: a moment
    (`since_at`, epoch seconds) or a duration back from the host's own clock (`since_ago`,
    seconds: `--since 5m` means five minutes of the host's time, whatever the skew)."""

    grep: str = ""
    since_at: float | None = None
    since_ago: float | None = None

    def since_arg(self) -> str:
        if self.since_ago is not None:
            return f"ago:{float(self.since_ago)!r}"
        return "" if self.since_at is None else f"at:{float(self.since_at)!r}"


def read_command(host: Host, ino: int, off: int, lines: int, skip: int = 0,
                 chunk: int = CHUNK, only: Filter = Filter()) -> str:
    """One read of the host's log: `ino < 0` is the first (last `lines` lines), else the whole
    lines after `off` of the file with inode `ino` (and its rotated rest). A line longer than
    `chunk` comes as its first SHOWN bytes and a mark, and `skip` drops its rest next time.
    `only`: lines that match it (the first read searches up to SCAN bytes of the log and of
    its rotated `.1`; later reads apply `grep` to the new lines, all newer than `since`)."""
    path = f"{host.state_dir.rstrip('/')}/{LOG_FILE}"
    mark = CUT_MARK.format(limit=size_text(chunk))
    since = only.since_arg() if ino < 0 else ""
    args = [path, str(ino), str(off), str(lines), str(chunk), str(skip), str(SHOWN), mark,
            only.grep, since, str(SCAN)]
    return (f"cd / && exec {shlex.quote(host.python)} -c {shlex.quote(LOG_PY)} "
            + " ".join(shlex.quote(a) for a in args))


def parse(stdout: str) -> tuple[dict, str]:
    """(header, text) of one read; ValueError when the output is not ours."""
    head, _, text = stdout.partition("\n")
    header = json.loads(head)
    if not isinstance(header, dict) or "off" not in header:
        raise ValueError(f"unexpected answer: {head[:200]!r}")
    return header, text


@dataclass
class HostLog:
    """Where one host's log was read up to, and its open connection."""

    host: Host
    ino: int = -1
    off: int = 0
    skip: int = 0  # the host is inside a line too long to show: drop its rest
    conn: object = None
    error: str = ""
    lines: list = field(default_factory=list)
    only: Filter = Filter()

    def poll(self, lines: int, timeout: float) -> None:
        """One read; fills `lines` (whole lines) or `error`; never raises."""
        self.lines, self.error = [], ""
        try:
            if self.conn is None:
                self.conn = connect(self.host)
            res = self.conn.run(read_command(self.host, self.ino, self.off, lines, self.skip,
                                             only=self.only), timeout)
            if res.exit_code != 0:
                tail = " ".join((res.stderr or res.stdout).strip().splitlines()[-2:])
                raise RuntimeError(f"reading the log failed (exit {res.exit_code}): {tail[:300]}")
            header, text = parse(res.stdout)
        except Exception as exc:  # unreachable, timed out, bad answer: report, retry next round
            self.error = str(exc) or type(exc).__name__
            self.close()
            return
        if header.get("missing"):
            self.error = f"no log yet at {header['missing']}"
        if header.get("irregular"):
            self.error = f"{header['irregular']} is not a regular file; fleet does not read it"
        self.ino, self.off = int(header.get("ino") or 0), int(header.get("off") or 0)
        self.skip = 1 if header.get("skip") else 0
        self.lines = text.splitlines()

    def close(self) -> None:
        close_quietly(self.conn)
        self.conn = None


Emit = Callable[[str, str, bool], None]  # (host, line, is_error)


def printer(names: list[str], out=None, err=None) -> Emit:
    """`host | line` on stdout (errors on stderr), host names padded to one width; both are
    the host's or the inventory's words, so escaped: a log line never drives the terminal."""
    width = max((len(visible(n)) for n in names), default=0)
    lock = threading.Lock()

    def emit(host: str, line: str, is_error: bool) -> None:
        stream = (err or sys.stderr) if is_error else (out or sys.stdout)
        with lock:
            stream.write(f"{visible(host):<{width}} | {visible(line)}\n")
            stream.flush()

    return emit


def json_lines(out=None) -> Emit:
    """One JSON object per line on stdout (`logs --json`, also while following): `{"schema",
    "action": "logs", "host", "line", "error"}`, `error` true for what fleet says about a host
    (unreachable, back again) rather than a line of its log. A stream, not one document, so a
    script can read `-f` as it comes. Each line's text is exact (JSON escaping only)."""
    lock = threading.Lock()

    def emit(host: str, line: str, is_error: bool) -> None:
        record = {"schema": JSON_SCHEMA, "action": "logs", "host": host, "line": line,
                  "error": is_error}
        with lock:
            stream = out or sys.stdout
            stream.write(json_text(record, ensure_ascii=False) + "\n")
            stream.flush()

    return emit


def _round(logs: list[HostLog], lines: int, timeout: float, emit: Emit, reported: dict,
           stopped: Callable[[], bool]) -> int:
    """Poll every host at once (one daemon thread each); print in inventory order. Returns the
    number of failed hosts; returns early, printing nothing, once `stopped()`."""
    threads = [threading.Thread(target=log.poll, args=(lines, timeout), daemon=True)
               for log in logs]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout + 15  # poll() never raises and its command is bounded
    for thread in threads:
        while thread.is_alive() and not stopped() and time.monotonic() < deadline:
            thread.join(0.1)
    if stopped():
        return 0
    failed = 0
    for log, thread in zip(logs, threads):
        name = log.host.name
        if thread.is_alive():  # past even the bound above: say so, ask again next round
            log.lines, log.error = [], f"no answer within {timeout + 15:.0f}s"
        for line in log.lines:
            emit(name, line, False)
        if log.error:
            failed += 1
            if reported.get(name) != log.error:  # say it once, not every second
                emit(name, f"error: {log.error}", True)
            reported[name] = log.error
        elif name in reported:
            reported.pop(name)
            emit(name, "(reachable again)", True)
    return failed


@contextmanager
def _interrupt_sets(flag: list) -> Iterator[None]:
    """While following in the main thread, Ctrl-C only sets `flag[0]` (a handler that takes no
    lock); elsewhere (a test's thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame) -> None:
        flag[0] = True

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def show(hosts: list[Host], lines: int = 50, follow: bool = False, emit: Emit | None = None,
         poll_s: float = POLL_S, timeout: float = POLL_TIMEOUT_S,
         stop: threading.Event | None = None, only: Filter = Filter()) -> int:
    """Print the last `lines` lines of every host's gateway log (of those that match `only`);
    with `follow`, keep printing new lines until `stop` is set or Ctrl-C. Returns how many
    hosts failed the first read."""
    emit = emit or printer([h.name for h in hosts])
    stop = stop or threading.Event()
    logs = [HostLog(h, only=only) for h in hosts]
    reported: dict = {}
    interrupted = [False]

    def stopped() -> bool:
        return interrupted[0] or stop.is_set()

    try:
        if not follow:
            return _round(logs, max(0, lines), timeout, emit, reported, stop.is_set)
        with _interrupt_sets(interrupted):
            failed = _round(logs, max(0, lines), timeout, emit, reported, stopped)
            while not stopped():
                deadline = time.monotonic() + poll_s
                while not stopped() and time.monotonic() < deadline:
                    time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
                if not stopped():
                    _round(logs, 0, timeout, emit, reported, stopped)
        return failed
    finally:
        for log in logs:
            log.close()
