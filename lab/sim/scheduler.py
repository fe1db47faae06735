"""A deterministic scheduler: the real, threaded control code run one thread at a time, every
switch chosen by the schedule's random generator, on a simulated clock.

Why threads at all: the runner's pool, the lease's take and release, and the installer's
readiness wait are written for threads (and for `time.sleep`); rewriting them for a simulation
would test the rewrite. Here each simulated thread is a real one, but only the one holding the
baton runs; it gives the baton back only where real code would block (an event, a condition, a
queue, a join, a sleep), and the scheduler picks the next runnable thread with the seeded
generator, or, when none can run, moves the clock to the earliest timeout. So a seed fixes
every interleaving and every time, and a schedule replays exactly; a "second" of waiting costs
no real time.

What a simulated thread must never do is block the real way while holding the baton (a real
lock held across a simulated wait): the simulation's `threading` (`SimThreading`) has no real
locks, and the deploy modules take their primitives from `fleet.deploy.runtime`.
"""

from __future__ import annotations

import queue as _queue
import random
import time as _time
import traceback
from collections.abc import Callable
from typing import Any

import greenlet

EPOCH = 1_800_000_000.0  # the simulated wall clock's start (2027-01-15), for every seed


class SimAbort(BaseException):
    """The simulated process this thread belongs to was killed: unwind, as kill -9 would end
    it (a BaseException so the code under test cannot catch it as an error)."""


class Proc:
    """A simulated process: its threads die with it. `on_death` runs once its last thread
    unwound (a host puts back what the unwinding's `finally` blocks undid)."""

    def __init__(self, name: str, pid: int, on_death: Callable[[], None] | None = None):
        self.name = name
        self.pid = pid
        self.killed = False
        self.tasks: list[Task] = []
        self.on_death = on_death

    def kill(self) -> None:
        self.killed = True

    @property
    def done(self) -> bool:
        return all(t.done for t in self.tasks)


class Task:
    """One simulated thread: a greenlet the hub switches to when the seed picks it."""

    def __init__(self, name: str, proc: Proc, glet: greenlet.greenlet | None = None):
        self.name = name
        self.proc = proc
        self.glet = glet
        self.done = False
        self.until: Callable[[], bool] | None = None  # blocked until this is true ...
        self.wake_at: float | None = None  # ... or this time comes
        self.blocked = False

    def runnable(self, now: float) -> bool:
        if self.done:
            return False
        if not self.blocked or self.proc.killed:
            return True
        if self.wake_at is not None and self.wake_at <= now:
            return True
        return bool(self.until is not None and self.until())


class Scheduler:
    """Runs simulated threads one at a time; `now` is the simulated time in seconds.

    The threads are greenlets (stackful coroutines: the real, threaded code runs unchanged): a
    thread that waits switches to the hub, which picks the next one. A switch costs about a
    microsecond and no kernel wake-up, where a baton passed between real threads cost ~30 us
    idle and milliseconds on a loaded machine (measured: docs/benchmarks.md)."""

    def __init__(self, rng: random.Random, max_time: float = 1e7):
        self.rng = rng
        self.now = 0.0
        self.max_time = max_time
        self.tasks: list[Task] = []
        self.running: Task | None = None
        self.errors: list[str] = []  # unexpected exceptions in simulated threads
        self.switches = 0
        self._ended = False  # a thread ended since the last pick
        self.hub = greenlet.greenlet(self._loop)

    # -- threads ---------------------------------------------------------------------------

    def spawn(self, fn: Callable[[], Any], name: str, proc: Proc) -> Task:
        """A new simulated thread of `proc`, runnable now; it runs when the scheduler picks it."""
        task = Task(name, proc)

        def body() -> None:
            try:
                if proc.killed:
                    raise SimAbort
                fn()
            except SimAbort:
                pass
            except BaseException:  # a bug in the code under test or in the simulation
                self.errors.append(f"thread {name} of {proc.name} raised:\n"
                                   + traceback.format_exc())
            finally:
                task.done = True
                self._ended = True
                if proc.killed and proc.on_death is not None and proc.done:
                    hook, proc.on_death = proc.on_death, None
                    hook()

        task.glet = greenlet.greenlet(body, parent=self.hub)
        proc.tasks.append(task)
        self.tasks.append(task)
        return task

    def main(self, fn: Callable[[], Any], proc: Proc) -> Any:
        """Run `fn` on the calling greenlet as the first simulated thread; returns its value
        once it ends. The other threads run whenever it waits."""
        task = Task("main", proc, greenlet.getcurrent())
        proc.tasks.append(task)
        self.tasks.append(task)
        self.running = task
        try:
            return fn()
        finally:
            self.drain()  # no simulated thread outlives the schedule
            task.done = True
            self._ended = True
            self.running = None

    # -- waiting -----------------------------------------------------------------------------

    def block(self, until: Callable[[], bool] | None, timeout: float | None) -> bool:
        """Wait (as the running thread) until `until()` is true or `timeout` simulated seconds
        passed; returns `until()`'s last value. Raises SimAbort in a killed process."""
        task = self.running
        if task is None:
            raise RuntimeError("a simulated wait outside the simulation")
        if task.proc.killed:
            raise SimAbort
        task.until = until
        task.wake_at = None if timeout is None else self.now + max(0.0, timeout)
        task.blocked = True
        self.switches += 1
        nxt = self._pick()
        if nxt is not task:
            self.hub.switch(nxt)
        self.running = task
        task.blocked = False
        task.until = None
        task.wake_at = None
        if task.proc.killed:
            raise SimAbort
        return bool(until is not None and until())

    def sleep(self, seconds: float) -> None:
        self.block(None, seconds)

    def _pick(self) -> Task:
        while True:
            if self._ended:
                self.tasks = [t for t in self.tasks if not t.done]
                self._ended = False
            now = self.now
            ready = [t for t in self.tasks if t.runnable(now)]
            if ready:
                return ready[0] if len(ready) == 1 else self.rng.choice(ready)
            times = [t.wake_at for t in self.tasks if t.wake_at is not None and not t.done]
            if not times or min(times) > self.max_time:
                self.errors.append("deadlock: every simulated thread waits with no timeout: "
                                   + ", ".join(f"{t.proc.name}/{t.name}" for t in self.tasks)
                                   if not times else
                                   f"simulated time passed {self.max_time:.0f}s")
                for other in self.tasks:  # end everything: every waiter unwinds
                    other.proc.killed = True
                continue
            self.now = min(times)

    def _loop(self, first: Task) -> None:
        """The hub: run the picked thread until it waits or ends, then pick the next."""
        nxt = first
        while True:
            self.running = nxt
            nxt = nxt.glet.switch()
            if nxt is None:  # a thread ended (returned to the hub): pick another
                nxt = self._pick()

    def drain(self) -> None:
        """Kill every simulated process still running and let each thread unwind; afterwards
        no simulated thread is left (called by the main thread at the end of a schedule)."""
        me = self.running
        for task in list(self.tasks):
            if task is not me:
                task.proc.killed = True
        killed, me.proc.killed = me.proc.killed, False  # the caller waits for the others
        try:
            while any(not t.done for t in self.tasks if t is not me):
                self.block(lambda: all(t.done for t in self.tasks if t is not me), 1.0)
        finally:
            me.proc.killed = killed


class SimTime:
    """`time` for the simulated control process: its clocks read the scheduler's."""

    def __init__(self, sched: Scheduler, offset: Callable[[], float] = lambda: 0.0):
        self.sched = sched
        self.offset = offset
        self.strftime = _time.strftime
        self.gmtime = _time.gmtime

    def monotonic(self) -> float:
        return self.sched.now

    def time(self) -> float:
        return EPOCH + self.sched.now + self.offset()

    def sleep(self, seconds: float) -> None:
        self.sched.sleep(seconds)


class SimThreading:
    """`threading` for the simulated control process: threads, events, conditions and locks
    that wait through the scheduler. A new thread belongs to the process of its creator."""

    def __init__(self, sched: Scheduler):
        sched_ = sched

        class Thread:
            def __init__(self, target: Callable[..., Any] | None = None, args: tuple = (),
                         kwargs: dict | None = None, daemon: bool | None = None,
                         name: str | None = None) -> None:
                self._call = (target, args, kwargs or {})
                self.name = name or "thread"
                self.task: Task | None = None

            def start(self) -> None:
                target, args, kwargs = self._call
                proc = sched_.running.proc
                self.task = sched_.spawn(lambda: target(*args, **kwargs), self.name, proc)

            def join(self, timeout: float | None = None) -> None:
                task = self.task
                sched_.block(lambda: task.done, timeout)

            def is_alive(self) -> bool:
                return self.task is not None and not self.task.done

        class Event:
            def __init__(self) -> None:
                self._flag = False

            def set(self) -> None:
                self._flag = True

            def clear(self) -> None:
                self._flag = False

            def is_set(self) -> bool:
                return self._flag

            def wait(self, timeout: float | None = None) -> bool:
                if self._flag:
                    return True
                return sched_.block(lambda: self._flag, timeout)

        class Lock:
            """No real lock: one simulated thread runs at a time, and the code under test never
            waits while holding one (a wait inside `with cond:` releases it, as here)."""

            def acquire(self, *_args: object, **_kwargs: object) -> bool:
                return True

            def release(self) -> None:
                return None

            def __enter__(self) -> Lock:
                return self

            def __exit__(self, *exc: object) -> None:
                return None

        class Condition(Lock):
            def __init__(self, lock: object = None) -> None:
                self._waiters: list[list[bool]] = []

            def wait(self, timeout: float | None = None) -> bool:
                token = [False]
                self._waiters.append(token)
                try:
                    return sched_.block(lambda: token[0], timeout)
                finally:
                    if token in self._waiters:
                        self._waiters.remove(token)

            def notify_all(self) -> None:
                for token in self._waiters:
                    token[0] = True
                self._waiters = []

            def notify(self, n: int = 1) -> None:
                for token in self._waiters[:n]:
                    token[0] = True
                self._waiters = self._waiters[n:]

        self.Thread = Thread
        self.Event = Event
        self.Lock = Lock
        self.RLock = Lock
        self.Condition = Condition


class SimQueue:
    """`queue` for the simulated control process: a FIFO whose `get` waits through the
    scheduler."""

    Empty = _queue.Empty

    def __init__(self, sched: Scheduler):
        sched_ = sched

        class Queue:
            def __init__(self, *_args: object) -> None:
                self._items: list[Any] = []

            def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
                self._items.append(item)

            def get(self, block: bool = True, timeout: float | None = None) -> Any:
                if not self._items and block:
                    sched_.block(lambda: bool(self._items), timeout)
                if not self._items:
                    raise _queue.Empty
                return self._items.pop(0)

        self.Queue = Queue
