"""Running work on many hosts: bounded pool, rolling batches, failure budget, deadlines.

Why not Fabric's ThreadingGroup: it starts one thread per host with no pool size and no join
timeout, and one exception ends the run as a raw traceback. Here every host gets a result; one
failing host never stops the others unless the failure budget (`max_fail`) is spent, in which case
hosts not yet started are reported `skipped`; a host still running past its deadline is reported
`failed` ("deadline exceeded") and never waited for.

Limits: at most MAX_PARALLEL hosts run at once (`--parallel`), and the pool starts no more
threads than there are hosts. A pool that cannot start its threads (the process or the machine
is out of them) fails every host of the run with that reason, before any host is worked on, so
the caller's `finally` (the fleet lease's release) runs as for any other failed run.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from fleet.deploy import inventory
from fleet.deploy.inventory import Host
from fleet.deploy.runtime import queue, threading, time  # the real ones, or a simulation's
from fleet.installer.protocol import HostStatus

Progress = Callable[[str, str], None]  # (step, note)


@dataclass
class HostResult:
    """What happened on one host: `ok` is the only thing the exit code looks at."""

    host: str
    result: str
    ok: bool
    from_release: dict | None = None
    to_release: dict | None = None
    duration_s: float = 0.0
    note: str = ""
    steps: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    status: HostStatus | None = None  # a status run's answer, typed (`data` holds it whole)

    def as_dict(self) -> dict:
        return {"host": self.host, "result": self.result, "ok": self.ok,
                "from": self.from_release, "to": self.to_release,
                "duration_s": round(self.duration_s, 3), "note": self.note,
                "steps": self.steps, "data": self.data}


def parse_count(value: str | int | None, total: int, what: str) -> int | None:
    """`N` or `N%` of `total` (at least 1 for a percentage); None stays None."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    try:
        if text.endswith("%"):
            pct = float(text[:-1])
            if not 0 < pct <= 100:
                raise ValueError
            return max(1, math.ceil(total * pct / 100))
        number = int(text)
        if number < 0:
            raise ValueError
        return number
    except ValueError:
        raise ValueError(f"{what} {value!r}: expected a whole number or a percentage "
                         "like 25%") from None


# Hosts worked on at once, at most: each holds a thread and, for an ssh host, an SSH session
# (paramiko's transport thread, a socket, its crypto) on this machine. Beyond a few hundred the
# control machine's CPU, not the pool, sets the pace; larger fleets go in `--batch`es.
MAX_PARALLEL = 256


def check_parallel(parallel: int) -> None:
    """ValueError naming `--parallel` and its bounds unless 1 <= parallel <= MAX_PARALLEL."""
    if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
        raise ValueError(f"--parallel {parallel!r}: use 1 or more")
    if parallel > MAX_PARALLEL:
        raise ValueError(f"--parallel {parallel}: at most {MAX_PARALLEL} hosts run at once; "
                         f"use --parallel {MAX_PARALLEL} or less (docs/operations.md, Limits)")


@dataclass
class RunOptions:
    parallel: int = 10                  # hosts at once, 1..MAX_PARALLEL
    batch: str | int | None = None      # hosts per rolling batch (N or N%)
    max_fail: str | int | None = None   # failures tolerated before stopping (N or N%)
    deadline: Callable[[Host], float] = lambda host: 600.0


class PoolError(RuntimeError):
    """The pool could not start its threads; nothing was run."""


class _Pool:
    """A bounded pool of *daemon* threads: a hung host can never keep the process from exiting
    (ThreadPoolExecutor joins its workers at exit without a timeout)."""

    def __init__(self, size: int):
        self.jobs: queue.Queue = queue.Queue()
        self.threads: list[threading.Thread] = []
        try:
            for i in range(size):
                thread = threading.Thread(target=self._work, daemon=True, name=f"fleet-host-{i}")
                thread.start()
                self.threads.append(thread)
        except Exception as exc:  # "can't start new thread", MemoryError: out of threads
            self.shutdown()  # the ones that did start end at once
            raise PoolError(f"fleet could not start {size} worker thread(s) on this machine "
                            f"({len(self.threads)} started: {exc})") from exc

    def submit(self, fn, arg) -> Future:
        fut: Future = Future()
        self.jobs.put((fut, fn, arg))
        return fut

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            fut, fn, arg = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(arg))
            except BaseException as exc:  # delivered to the waiting side
                fut.set_exception(exc)

    def shutdown(self) -> None:
        for _ in self.threads:
            self.jobs.put(None)


DEADLINE_CHECK_S = 0.5  # longest wait between looks at hosts that have not started yet
INTERRUPTED = ("interrupted before this host finished; an installer already running on it "
               "completes its transaction on its own (see `{}`)")


def _interrupted(host: Host) -> HostResult:
    return HostResult(host.name, "interrupted", False, note=INTERRUPTED.format(
        inventory.command("status", [host.name], host.inventory)))


def _batches(hosts: list[Host], size: int | None) -> list[list[Host]]:
    if not size:
        return [hosts]
    return [hosts[i:i + size] for i in range(0, len(hosts), size)]


def run(hosts: list[Host], work: Callable[[Host, Progress], HostResult],
        progress: Callable[[str, str, str], None], options: RunOptions) -> list[HostResult]:
    """Run `work(host, progress)` on every host; results come back in inventory order."""
    total = len(hosts)
    batch = parse_count(options.batch, total, "--batch")
    budget = parse_count(options.max_fail, total, "--max-fail")
    if batch and budget is None:
        budget = 0  # rolling batches stop after the first batch with a failure, unless told
    check_parallel(options.parallel)
    results: dict[str, HostResult] = {}
    failures = 0
    pool: _Pool | None = None
    interrupted = threading.Event()
    try:
        pool = _Pool(min(options.parallel, max(1, total)))
        for group in _batches(hosts, batch):
            if budget is not None and failures > budget:
                break
            failures += _run_batch(pool, group, work, progress, options, results,
                                   None if batch else budget, interrupted)
    except KeyboardInterrupt:  # report what is known; never wait for hosts still working
        interrupted.set()
        for host in hosts:
            if host.name not in results:
                results[host.name] = _interrupted(host)
    except PoolError as exc:  # before any host started: each is told why, nothing was done
        note = (f"not started: {exc}; nothing was done on this host. Lower --parallel (now "
                f"{options.parallel}) or raise this machine's process limit (ulimit -u)")
        for host in hosts:
            results[host.name] = HostResult(host.name, "failed", False, note=note)
            progress(host.name, "failed", note)
    finally:
        if pool is not None:
            pool.shutdown()
    for host in hosts:
        if host.name not in results:
            results[host.name] = HostResult(host.name, "skipped", False,
                                            note=f"not started: failure budget ({budget}) spent")
            progress(host.name, "skipped", "")
    return [results[h.name] for h in hosts]


def _run_batch(pool: _Pool, group: list[Host], work, progress, options: RunOptions,
               results: dict[str, HostResult], budget: int | None,
               interrupted: threading.Event) -> int:
    """Run one batch; returns its failure count. A spent budget stops hosts not yet started."""
    limits = {h.name: options.deadline(h) for h in group}  # once per host
    deadlines: list[tuple[float, str, float, float]] = []  # (end, host, start, limit): a heap
    lock = threading.Lock()
    failed: list[str] = []
    stop = threading.Event()

    def count_failure(name: str) -> None:
        with lock:
            if name not in failed:
                failed.append(name)
            if budget is not None and len(failed) > budget:
                stop.set()

    def call(host: Host) -> HostResult:
        if interrupted.is_set():
            return _interrupted(host)
        if stop.is_set():
            return HostResult(host.name, "skipped", False,
                              note=f"not started: failure budget ({budget}) spent")
        t0 = time.monotonic()
        with lock:  # the host's deadline counts from here
            heapq.heappush(deadlines, (t0 + limits[host.name], host.name, t0, limits[host.name]))
        try:
            res = work(host, lambda step, note="": progress(host.name, step, note))
        except Exception as exc:  # a bug or unexpected error stays this host's problem
            res = HostResult(host.name, "failed", False, note=f"{type(exc).__name__}: {exc}")
        if not res.duration_s:
            res.duration_s = time.monotonic() - t0
        if not res.ok and res.result != "skipped":
            count_failure(host.name)
        return res

    def settle(name: str, res: HostResult) -> None:
        results[name] = res
        progress(name, res.result, res.note)

    futures: dict[str, Future] = {}
    finished = queue.Queue()  # names of hosts whose work ended, in the order they ended
    for h in group:
        futures[h.name] = fut = pool.submit(call, h)
        fut.add_done_callback(lambda _fut, name=h.name: finished.put(name))
    pending = dict(futures)
    while pending:
        # One wake-up per host finishing, or at the next deadline (at most DEADLINE_CHECK_S
        # apart, for hosts started since): each looks at that host and the expired deadlines
        # only, never at every host still running.
        with lock:
            due = deadlines[0][0] if deadlines else None
        wait = DEADLINE_CHECK_S if due is None else min(DEADLINE_CHECK_S,
                                                         max(0.0, due - time.monotonic()))
        try:
            name = finished.get(timeout=wait + 0.01)
        except queue.Empty:
            name = None
        if name is not None and name in pending:
            settle(name, pending.pop(name).result())
        now = time.monotonic()
        while True:
            with lock:
                if not deadlines or deadlines[0][0] >= now:
                    break
                _end, name, t0, limit = heapq.heappop(deadlines)
            if name in pending and not pending[name].done() and now - t0 > limit:
                del pending[name]
                count_failure(name)
                settle(name, HostResult(name, "failed", False, duration_s=now - t0,
                                        note=f"deadline exceeded ({limit:.0f}s); host abandoned"))
    return len(failed)
