"""Run hooks: the operator's executables in `.fleet/hooks/` beside the inventory, run around a
deploy or a rollback as Kamal runs `.kamal/hooks/` (docs/operations.md, "Run hooks").

Why: a deploy often has to wait for something fleet cannot judge (CI green, a change window)
and to tell someone when it is done (a chat channel, a webhook, an APM). A hook is an executable
regular file named after its moment, without an extension: `pre-deploy`, `post-deploy`,
`pre-rollback`, `post-rollback`, `rollout-aborted`. It runs on the control machine, in the
inventory's directory and in a session (process group) of its own, with the run's JSON document
on stdin (the `--json` document: before the run, the plan; after it, the finished one) and the
`FLEET_*` variables of `VARIABLES`. What it prints goes to the operator's stderr line by line,
escaped (its words are data, never fleet's and never markup), never to stdout, where `--json`
prints its one document.

A `pre-*` hook is a gate: one that fails (exits non-zero, outlives its timeout, cannot be run)
refuses the run before any host is touched. A `post-*` or `rollout-aborted` hook is a notice: one
that fails is a warning, and the run's outcome and exit code stay what the hosts made them. A
hook that outlives its timeout has its whole process group terminated (SIGTERM, then SIGKILL
after `GRACE_S`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fleet.continuity.statelayout import release_name
from fleet.deploy import report, rollout
from fleet.deploy.api import ArtifactRef, default_owner
from fleet.deploy.duration import seconds
from fleet.deploy.inventory import control_dir
from fleet.deploy.runner import HostResult
from fleet.terminal.text import json_text, visible

PRE = {"deploy": "pre-deploy", "rollback": "pre-rollback"}
POST = {"deploy": "post-deploy", "rollback": "post-rollback"}
ROLLOUT_ABORTED = "rollout-aborted"
NAMES = (*PRE.values(), *POST.values(), ROLLOUT_ABORTED)
# what a hook finds in its environment (any of these the operator's own environment holds is
# replaced or removed, so an unset one always means "none for this run")
VARIABLES = ("FLEET_HOOK", "FLEET_ACTION", "FLEET_RELEASE", "FLEET_VERSION", "FLEET_SHA256",
             "FLEET_HOSTS", "FLEET_INVENTORY", "FLEET_ROLLOUT", "FLEET_PERFORMER",
             "FLEET_RECORDED_AT", "FLEET_OUTCOME", "FLEET_RUNTIME")
DEFAULT_TIMEOUT = "60s"
MAX_TIMEOUT_S = 3600.0  # a gate that holds a deploy longer is a mistake, not a check
GRACE_S = 5.0  # between SIGTERM and SIGKILL of a hook's process group
TAIL_LINES = 10  # of a failed hook's stderr, in its error
MAX_LINE = 16 * 1024  # a longer line is shown in pieces of this size


class HookRefused(Exception):
    """A `pre-*` hook failed, so the run changed nothing; `results` are the hooks that ran, for
    the `--json` document."""

    def __init__(self, message: str, results: list[dict]):
        super().__init__(message)
        self.results = results


def hooks_dir(inventory_path: str | Path) -> Path:
    """`.fleet/hooks/` beside the inventory (fleet.deploy.inventory.control_dir owns `.fleet/`)."""
    return control_dir(inventory_path) / "hooks"


def timeout_of(spec: str) -> float:
    """Seconds of `--hook-timeout` (`90`, `2m`); ValueError naming the flag otherwise."""
    value = seconds(spec)
    if value is None or value <= 0:
        raise ValueError(f"--hook-timeout {spec!r}: expected a duration like 60s or 5m")
    if value > MAX_TIMEOUT_S:
        raise ValueError(f"--hook-timeout {spec!r}: at most 1h (a hook holds the run while it "
                         "runs)")
    return value


def present(inventory_path: str | Path) -> list[str]:
    """The hooks that have a file in the hooks dir (to say what a run does not run)."""
    folder = hooks_dir(inventory_path)
    return [n for n in NAMES if os.path.lexists(folder / n)]


def release_of(artifact: ArtifactRef) -> dict:
    """FLEET_RELEASE, FLEET_VERSION and FLEET_SHA256 of a deploy of `artifact`."""
    return {"release": release_name(artifact.version, artifact.sha256),
            "version": artifact.version, "sha256": artifact.sha256}


def plan_document(action: str, hosts: list[str], elapsed: float, extra: dict) -> dict:
    """What a `pre-*` hook reads: the run's `--json` document before anything ran (`ok` and
    `exit_code` null, each host `pending`)."""
    doc = report.json_document(action, [HostResult(h, "pending", False) for h in hosts], False,
                               elapsed, extra)
    doc["ok"] = doc["exit_code"] = None
    for host in doc["hosts"]:
        host["ok"] = None
    return doc


def outcome(doc: dict) -> str:
    """FLEET_OUTCOME of a finished document: succeeded, failed, paused or aborted."""
    state = (doc.get("rollout") or {}).get("state")
    if doc.get("ok"):
        return "succeeded"
    return {rollout.PAUSED: "paused", rollout.ABORTED: "aborted"}.get(state, "failed")


@dataclass
class HookResult:
    """How one hook ran: `error` is empty when it exited 0 in time."""

    hook: str
    path: str
    exit_code: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    error: str = ""
    stderr_tail: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.error

    def as_dict(self) -> dict:
        return {"hook": self.hook, "path": self.path, "ok": self.ok,
                "exit_code": self.exit_code, "timed_out": self.timed_out,
                "duration_s": round(self.duration_s, 3), "error": self.error or None,
                "stderr_tail": self.stderr_tail}

    def describe(self) -> str:
        """One sentence naming the file, how it ended and the end of its stderr."""
        tail = "\n".join(f"  | {line}" for line in self.stderr_tail)
        return (f"hook {self.path} {self.error}"
                + (f"; its stderr ended with:\n{tail}" if tail else "; it wrote nothing on "
                   "stderr"))


def _stderr(text: str) -> None:
    """A line (or a message of several) on stderr, escaped: it may quote a hook's output."""
    print(visible(text, multiline=True), file=sys.stderr, flush=True)


def problem(path: Path) -> str | None:
    """Why the file at `path` cannot be run as a hook (None: it can, or there is none)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:  # e.g. `hooks` is a file, not a directory
        return f"cannot be read ({exc.strerror}); hooks live in the directory {path.parent}"
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"cannot be read ({exc.strerror}; a symlink to nothing?)"
    if not stat.S_ISREG(mode):
        return "is not a regular file; a hook is an executable file"
    if not os.access(path, os.X_OK):
        return f"is not executable; make it so (chmod +x {path}) or remove it"
    return None


def strays(inventory_path: str | Path) -> list[str]:
    """Executable files in the hooks dir that no moment runs (a Kamal hook fleet has not, a name
    with an extension), each with what to do."""
    folder = hooks_dir(inventory_path)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return []
    out = []
    for entry in entries:
        if entry.name in NAMES or entry.name.startswith(".") or entry.name.endswith(".sample"):
            continue
        with contextlib.suppress(OSError):
            if entry.is_file() and os.access(entry.path, os.X_OK):
                stem = entry.name.split(".", 1)[0]
                hint = (f"name it {stem} (no extension)" if stem in NAMES else
                        f"fleet runs {', '.join(NAMES)}")
                out.append(f"warning: {entry.path} is not a hook fleet runs; {hint}")
    return out


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the hook's whole process group, SIGKILL to what is left after GRACE_S."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(GRACE_S)


def _failure(result: HookResult, timeout_s: float) -> str:
    """How a hook that ran failed ("" when it exited 0 in time)."""
    if result.timed_out:
        return (f"did not finish within its timeout of {timeout_s:g}s and was stopped (its "
                "process group killed); make it faster or raise --hook-timeout")
    if result.exit_code is not None and result.exit_code < 0:
        return f"was killed by signal {-result.exit_code}"
    return f"exited with {result.exit_code}" if result.exit_code else ""


def run_hook(hook: str, path: Path, doc: dict, env: Mapping[str, str], cwd: Path,
             timeout_s: float, echo: Callable[[str], None] = _stderr) -> HookResult:
    """Run one hook with `doc` on stdin, each line of its output handed to `echo` as it comes
    (the default prints it escaped on stderr), bounded by `timeout_s` in all."""
    result = HookResult(hook, str(path))
    why = problem(path)
    if why:
        result.error = why
        return result
    echo(f"running hook {path} (timeout {timeout_s:g}s)")
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen([str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cwd, env=dict(env),
                                start_new_session=True)
    except OSError as exc:
        hint = "; a script needs a #! line such as #!/bin/sh" if exc.errno == errno.ENOEXEC else ""
        result.error = f"could not be started ({exc.strerror}{hint})"
        return result
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    data = (json_text(doc, indent=2, sort_keys=True, default=str) + "\n").encode()

    def feed() -> None:
        with contextlib.suppress(OSError):  # a hook that reads nothing closes the pipe early
            proc.stdin.write(data)
        with contextlib.suppress(OSError):
            proc.stdin.close()

    def pump(pipe, keep: bool) -> None:
        for raw in iter(lambda: pipe.readline(MAX_LINE), b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            echo(f"  {hook}| {line}")
            if keep:
                tail.append(line)

    threads = [threading.Thread(target=feed, daemon=True),
               threading.Thread(target=pump, args=(proc.stdout, False), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, True), daemon=True)]
    for thread in threads:
        thread.start()
    deadline = t0 + timeout_s
    try:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            result.timed_out = True
        for thread in threads:  # a child it left behind may still hold its output open
            thread.join(max(0.0, deadline - time.monotonic()))
        if result.timed_out or any(t.is_alive() for t in threads):
            _kill_group(proc)
    except KeyboardInterrupt:
        _kill_group(proc)
        result.error = "was interrupted (Ctrl-C) and stopped"
    for thread in threads:
        thread.join(GRACE_S)
    result.duration_s = time.monotonic() - t0
    result.exit_code = proc.returncode
    result.stderr_tail = list(tail)
    result.error = result.error or _failure(result, timeout_s)
    echo(f"hook {hook} ended after {result.duration_s:.1f}s: {result.error or 'exit 0'}")
    return result


@dataclass
class RunHooks:
    """The hooks of one deploy or rollback run: who runs what, with which variables.

    `release` is `{release, version, sha256}` (the part known), `rollout` the rollout's id where
    the run drives one.
    """

    inventory_path: Path
    action: str  # deploy | rollback
    hosts: list[str]
    release: dict
    timeout_s: float
    rollout: str = ""
    echo: Callable[[str], None] = _stderr
    ran: list[HookResult] = field(default_factory=list)

    def results(self) -> list[dict]:
        return [r.as_dict() for r in self.ran]

    def _env(self, hook: str, doc: dict) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
        values = {
            "FLEET_HOOK": hook, "FLEET_ACTION": self.action,
            "FLEET_RELEASE": self.release.get("release") or "",
            "FLEET_VERSION": self.release.get("version") or "",
            "FLEET_SHA256": self.release.get("sha256") or "",
            "FLEET_HOSTS": ",".join(self.hosts),
            "FLEET_INVENTORY": str(Path(self.inventory_path).absolute()),
            "FLEET_ROLLOUT": self.rollout, "FLEET_PERFORMER": default_owner(),
            "FLEET_RECORDED_AT": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if hook not in PRE.values():
            values["FLEET_OUTCOME"] = outcome(doc)
            values["FLEET_RUNTIME"] = str(round(float(doc.get("duration_s") or 0)))
        env.update({k: v for k, v in values.items() if v})
        return env

    def _run(self, hook: str, doc: dict) -> HookResult | None:
        path = hooks_dir(self.inventory_path) / hook
        if not os.path.lexists(path) and not problem(path):
            return None  # no such hook: nothing to run, as Kamal
        result = run_hook(hook, path, doc, self._env(hook, doc),
                          Path(self.inventory_path).absolute().parent, self.timeout_s,
                          self.echo)
        self.ran.append(result)
        return result

    def before(self, doc: dict) -> None:
        """The `pre-*` hook with the plan; HookRefused (nothing was changed) when it fails."""
        for line in strays(self.inventory_path):
            self.echo(line)
        result = self._run(PRE[self.action], doc)
        if result is not None and not result.ok:
            raise HookRefused(f"refusing: {result.describe()}\nNothing was changed. Fix the "
                              "hook or what it checks and run again (--skip-hooks runs "
                              "without hooks)", self.results())

    def after(self, doc: dict, took_back: bool = False) -> None:
        """`rollout-aborted` (when this run took a rollout back), then the `post-*` hook, each
        with the finished document; a failure is a warning and changes no outcome."""
        for hook in ((ROLLOUT_ABORTED,) if took_back else ()) + (POST[self.action],):
            result = self._run(hook, dict(doc, hooks=self.results()))
            if result is not None and not result.ok:
                self.echo(f"warning: {result.describe()}\nThe run's outcome and exit code "
                          "stand: a failed post hook changes neither")
