"""The simulation's side of the one transport seam (`fleet.deploy.runtime.opener`): a connection
to a simulated host, and the host side of each command it runs.

A command is what the control side really sends (`fleet.deploy.commands`, the lease's script);
the host process that runs it is a simulated thread of that host, so the control side can time
out, drop or die while the host goes on, as over ssh. What runs on the host:

- the fleet lease's take/release/status: the real script text (`fleet.deploy.lease.LEASE_PY`),
  executed with the host's clock, name and disk in place of `time`, `socket` and `os.open`;
- an install: the upload's receive (all bytes renamed into place, or a `.part` left by a cut),
  then the real installer transaction
  (`fleet.installer.transaction`) with its real argument parser, on a `SimManager`;
- `status`/`rollback`/`restart` from the current release: the same transaction functions.

Faults the transport injects (chosen by the world's seed): the connection drops before a command
reaches the host, mid-upload, while the host works, or after it answered; a host that stalls
before running a command (a paused VM: a take that runs too late, a command that hangs).
"""

from __future__ import annotations

import builtins
import errno
import io
import json
import re
import shlex
import sys
import time as _time
from pathlib import Path
from typing import Any

from fleet.continuity.statelayout import StateLayout
from fleet.deploy import artifactpatch, commands
from fleet.deploy.connection import UNREACHABLE, CommandResult, ConnectionError_
from fleet.deploy.lease import LEASE_PY
from fleet.installer import cli, machine, transaction
from fleet.installer.lock import DEFAULT_LEASE_S
from fleet.installer.protocol import worst_case_s
from lab.sim.host import SimHost, SimManager
from lab.sim.scheduler import Proc, SimAbort

KILLED = -9  # the exit status a control side sees for a process killed by SIGKILL


class HostRun:
    """One command running on a host: its output so far and how it ended."""

    def __init__(self, proc: Proc):
        self.proc = proc
        self.out: list[str] = []
        self.err: list[str] = []
        self.code: int | None = None
        self.current: str | None = None

    @property
    def done(self) -> bool:
        return self.proc.done

    def result(self) -> CommandResult:
        code = KILLED if self.code is None else self.code
        return CommandResult(code, "".join(self.out), "".join(self.err))


class SimConnection:
    """What `fleet.deploy.connection.connect` returns for a simulated host."""

    def __init__(self, world: Any, host: SimHost):
        self.world = world
        self.host = host
        self.boot = host.boots
        self.active = True

    def open(self) -> None:
        if not self.host.up:
            raise ConnectionError_(f"{self.host.name}: cannot connect to {self.host.name}:22: "
                                   "[Errno 113] No route to host (simulated: powered off)",
                                   UNREACHABLE)

    def is_active(self) -> bool:
        return self.active and self.host.up and self.host.boots == self.boot

    def close(self) -> None:
        self.active = False

    def run(self, command: str, timeout: float, on_stderr_line=None) -> CommandResult:
        return self._exec(command, timeout, on_stderr_line)

    def send_and_run(self, local: Path | bytes, command: str, transfer_timeout: float,
                     timeout: float, on_stderr_line=None, on_sent=None) -> CommandResult:
        return self._exec(command, timeout, on_stderr_line, local, transfer_timeout, on_sent)

    def _lost(self, what: str) -> ConnectionError_:
        self.active = False
        return ConnectionError_(f"{self.host.name}: command failed: {what} (simulated)")

    def _exec(self, command: str, timeout: float, on_stderr_line,
              upload: Path | bytes | None = None,
              transfer_timeout: float = 0.0, on_sent=None) -> CommandResult:
        world, host, sched = self.world, self.host, self.world.sched
        sched.sleep(world.latency())  # the request on its way; others run meanwhile
        if not self.is_active():
            raise self._lost("connection lost")
        fault = world.transport_fault(host, upload is not None, describe(command))
        if fault == "drop_before":
            raise self._lost("connection reset before the command ran")
        stdin = None
        if upload is not None:
            data = upload if isinstance(upload, bytes) else world.artifact_bytes(upload)
            sched.sleep(min(transfer_timeout, len(data) / 50e6 + 0.01))
            if fault == "drop_upload" or not self.is_active():
                world.count("dropped mid-upload")
                host_part(host, command, data[: len(data) // 2])
                self.active = False
                name = "a patch" if isinstance(upload, bytes) else upload.name
                raise ConnectionError_(f"{host.name}: upload of {name} failed: "
                                       "connection lost (simulated)")
            stdin = data
        run = start(world, host, command, stdin)
        if on_sent is not None:
            on_sent()
        if fault == "drop_during":
            world.count("dropped mid-command")
            sched.sleep(world.rng.choice((0.01, 0.3, 3.0)))
            raise self._lost("connection lost while the host worked")
        finished = sched.block(lambda: run.done or not self.is_active(), timeout)
        if not self.is_active():
            raise self._lost("connection lost (the host went down)")
        if not finished:
            self.active = False  # hung up; an installer finishes its transaction on its own
            raise ConnectionError_(f"{host.name}: command timed out after {timeout:.0f}s "
                                   f"(abandoned): {command[:60]}")
        if getattr(command, "intent", None) is not None:  # the installer's answers, not the lease's
            world.answered(sched.running.proc, host, run.current)
        out = "".join(run.out).replace(str(world.root), "<root>")  # before the cut below
        world.note(f"{sched.running.proc.name} <- {host.name}: {describe(command)} exit "
                   f"{run.result().exit_code}: {out.strip()[-160:]}")
        sched.sleep(world.latency())
        if fault == "drop_after":
            raise self._lost("connection lost before the answer arrived")
        if on_stderr_line is not None:
            for line in "".join(run.err).splitlines():
                on_stderr_line(line)
        return run.result()


def describe(command: str) -> str:
    """What a command is, in a word or two (for the schedule's trace)."""
    intent = getattr(command, "intent", None)
    if intent is None:
        tail = command[command.rfind("'", 0, len(command) - 1):] if command.endswith("'") else ""
        for action in ("take", "release", "status", "unlock"):
            if f" {action} " in command[-400:]:
                return f"lease {action}"
        return "lease ?" + tail[:0]
    if intent["op"] in ("current", "release"):
        return "installer " + intent["argv"][0]
    if intent["op"] == "patch":  # the upload, as a patch: the same faults and stalls
        return "upload"
    return intent["op"]


def host_part(host: SimHost, command: str, data: bytes) -> None:
    """What a cut-off upload leaves: the bytes that arrived, under the temp name."""
    intent = getattr(command, "intent", None) or {}
    sha = (intent.get("install") or {}).get("sha256")
    if not sha or host.disk_full:
        return
    path = host.state / f"{StateLayout.ARTIFACT.format(sha256=sha)}.{host.new_pid()}.part"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def start(world: Any, host: SimHost, command: str, stdin: bytes | None) -> HostRun:
    """Start `command` as a new process of `host` (a simulated thread); returns at once."""
    proc = host.process("cmd")
    run = HostRun(proc)

    def body() -> None:
        try:
            stall = world.host_stall(host, describe(command))
            if stall:
                world.sched.sleep(stall)
            with machine.use(host.machine), world.stderr_to(run.err):
                run.code = execute(world, host, command, stdin, run.out)
            run.current = host.current()  # what the host ran when it answered
        finally:  # killed or not: the last switch it made is seen with it
            host.observe()

    world.sched.spawn(body, f"{host.name}-cmd", proc)
    return run


def execute(world: Any, host: SimHost, command: str, stdin: bytes | None,
            out: list[str]) -> int:
    """Do on the host what `command` asks; its stdout goes to `out`; returns its exit code."""
    intent = getattr(command, "intent", None)
    if intent is None:
        return run_lease_script(world, host, command, out)
    op = intent["op"]
    if op == "upload":
        sha = intent["install"]["sha256"]
        if host.disk_full or stdin is None or len(stdin) != intent["size"]:
            out.append(commands.INCOMPLETE + "\n")
            return 1
        final = host.state / StateLayout.ARTIFACT.format(sha256=sha)
        final.parent.mkdir(parents=True, exist_ok=True)
        part = final.with_name(final.name + ".part")
        part.write_bytes(stdin)
        part.replace(final)
        return run_installer(world, host, intent["install"]["argv"], final, out)
    if op == "patch":  # rebuilt from the stored base as the host's APPLY_PY does
        sha = intent["install"]["sha256"]
        final = host.state / StateLayout.ARTIFACT.format(sha256=sha)
        part = final.with_name(final.name + ".part")
        base = host.state / StateLayout.ARTIFACT.format(sha256=intent["base"])
        if host.disk_full or stdin is None or not artifactpatch.apply(
                str(base), str(part), sha, intent["size"], io.BytesIO(stdin)):
            part.unlink(missing_ok=True)
            out.append(artifactpatch.PATCH_FAILED + "\n")
            return 1
        part.replace(final)
        return run_installer(world, host, intent["install"]["argv"], final, out)
    if op == "install":
        sha = intent["sha256"]
        art = host.state / StateLayout.ARTIFACT.format(sha256=sha)
        if intent["if_present"] and not (art.is_file()
                                         and art.stat().st_size == intent["if_present"]):
            if host.disk_full and not art.parent.is_dir():
                return 1
            art.parent.mkdir(parents=True, exist_ok=True)
            out.append(commands.MISSING + "\n")
            return 0
        return run_installer(world, host, intent["argv"], art, out)
    if op == "release":  # that release's installer when the host has it, else the fallback
        rel = host.state / StateLayout.RELEASES / intent["release"]
        if (rel / StateLayout.RELEASE_INSTALLER).is_file():
            return run_installer(world, host, intent["argv"], None, out)
        intent = intent["fallback"]
        op = intent["op"]
    if op == "current":
        if not (host.state / StateLayout.CURRENT / StateLayout.RELEASE_INSTALLER).is_file():
            out.append(commands.NOT_INSTALLED + "\n")
            return 0
        return run_installer(world, host, intent["argv"], None, out)
    raise ValueError(f"the simulation has no host side for {op!r}")


_PARSER: list[Any] = []


def _parser() -> Any:
    """The installer's own argument parser (built once: argparse's set-up is slow)."""
    if not _PARSER:
        _PARSER.append(cli._parser())
    return _PARSER[0]


def run_installer(world: Any, host: SimHost, argv: list[str], artifact: Path | None,
                  out: list[str]) -> int:
    """The installer's command line (its real parser) dispatched as `fleet.installer.cli.run`
    does, with the host's SimManager; prints its one JSON answer."""
    args = _parser().parse_args(argv)
    proc = world.sched.running.proc
    proc.owner = args.owner  # whose fleet lease it must hold to switch
    proc.action = args.command  # what its switches were for (SimHost.history)
    host.commands.append((args.owner, args.command))
    state = Path(args.state_dir)
    manager = SimManager(host)
    owner = args.owner or "unknown@" + host.name
    lease = args.lease if args.lease is not None else max(DEFAULT_LEASE_S,
                                                          worst_case_s(args.timeout) + 120)
    if args.command == "install":
        result = transaction.install(state, artifact, args.sha256, manager, owner,
                                     cli._pairs(args.expect, "--expect"), force=args.force,
                                     timeout=args.timeout, keep=args.keep, lease_s=lease,
                                     lock_wait=args.lock_wait,
                                     allow_unproven=args.allow_unproven_openclaw,
                                     fleet_run=args.fleet_lease)
    elif args.command == "status":
        result = transaction.status(state, manager)
    elif args.command == "rollback":
        result = transaction.rollback(state, manager, owner, to=args.to, timeout=args.timeout,
                                      lease_s=lease, lock_wait=args.lock_wait,
                                      fleet_run=args.fleet_lease)
    elif args.command == "restart":
        result = transaction.restart(state, manager, owner, timeout=args.timeout,
                                     lease_s=lease, lock_wait=args.lock_wait)
    else:
        raise ValueError(f"the simulation does not run the installer's {args.command!r}")
    out.append(json.dumps(result, sort_keys=True, default=str) + "\n")
    return 0 if result.get("ok") else 1


# -- the lease script ------------------------------------------------------------------------

_COMPILED: dict[str, Any] = {}


class _HostTime:
    def __init__(self, host: SimHost):
        self.time = host.machine.time
        self.sleep = host.machine.sleep
        self.monotonic = host.machine.monotonic
        self.strftime = _time.strftime
        self.gmtime = _time.gmtime


class _HostSocket:
    def __init__(self, host: SimHost):
        self.gethostname = lambda: host.name


class _HostOs:
    """`os` on the host: the real one, but a file created on a full disk fails as it would."""

    def __init__(self, host: SimHost):
        import os as real

        self._real = real
        self._host = host

    def open(self, path: Any, flags: int, mode: int = 0o777) -> int:
        if self._host.disk_full and flags & self._real.O_CREAT:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return self._real.open(path, flags, mode)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _words(text: str) -> list[str]:
    """shlex.split for words each `shlex.quote`d (what `lease_command` sends), without shlex's
    character-by-character reader."""
    if _QUOTED.fullmatch(text):
        return [quoted or bare for quoted, bare in _WORD.findall(text)]
    return shlex.split(text)


_QUOTED = re.compile(r"(?:\s*(?:'[^']*'|[\w@%+=:,./-]+))*\s*")
_WORD = re.compile(r"'([^']*)'|([\w@%+=:,./-]+)")


def run_lease_script(world: Any, host: SimHost, command: str, out: list[str]) -> int:
    """`python3 -c LEASE_PY state action run [record]`: the real script, on this host."""
    quoted = shlex.quote(LEASE_PY)  # found as a whole: shlex reads 10 KB of script slowly
    at = command.index(quoted)
    script, argv = LEASE_PY, _words(command[at + len(quoted):])
    code = _COMPILED.get(script)
    if code is None:
        code = _COMPILED[script] = compile(script, "<lease>", "exec")
    fake = {"time": _HostTime(host), "socket": _HostSocket(host), "os": _HostOs(host)}

    class _Sys:
        def __init__(self) -> None:
            self.argv = ["-c", *argv]
            self.path: list[str] = []
            self.stdout = self.stderr = None

        @staticmethod
        def exit(code: int = 0) -> None:
            raise SystemExit(code)

    fake["sys"] = _Sys()
    real_import = builtins.__import__

    def imp(name: str, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
        if name in fake and not fromlist:
            return fake[name]
        return real_import(name, globals, locals, fromlist, level)

    def say(*args: Any, **kwargs: Any) -> None:
        if kwargs.get("file") is None:
            out.append(" ".join(str(a) for a in args) + kwargs.get("end", "\n"))

    env = dict(vars(builtins))
    env.update(__import__=imp, print=say)
    try:
        exec(code, {"__builtins__": env, "__name__": "__main__"})
    except SystemExit as exc:
        return int(exc.code or 0)
    except SimAbort:
        raise
    except Exception as exc:  # the script crashed (a full disk): a traceback, exit 1
        print(f"Traceback (most recent call last): ... {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    return 0
