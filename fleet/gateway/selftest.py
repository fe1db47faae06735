"""A plugin's self-test: its own scenario, run through the hook bus and command registry that
real hooks and commands take, on a scratch workspace; one bounded answer.

Why: readiness proves that a plugin loaded, not that it works. A progressive rollout needs a gate
that exercises each plugin, with no model call, before more hosts take the release. The scenario
is the plugin's (its entry module's `selftest(run)`, beside `register(api)`: written once, in
Python, for both gateways); this module owns what a scenario may touch:

- a scratch dir the host derives itself, `<state>/selftest/<plugin>-<pid>-<random>/`, never a
  path a caller sent; it is removed when the run ends, on failure too, and a dead process's
  leftovers are removed by the next run;
- hook calls (`run.hook`) that reach only the plugin under test, through the live bus
  (`HookBus.run_void` / `run_modifying`), not counted in the hook statistics;
- commands (`run.command`) dispatched by the live registry with the scratch as their state dir
  and config (ctx `selfTest: true`: the plugin reads no config file for them);
- a budget (`BUDGET_S`): a call after it is not made, the run fails naming the time.

One self-test runs at a time per process (a second waits up to `BUSY_WAIT_S`). The answer:
`{"ok", "plugin", "version", "checks": [{"name", "ok", "detail"}], "duration_ms"}`; a plugin
without a scenario answers `ok: true`, no checks and `unsupported` (why).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import types
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from fleet.continuity import ids, private
from fleet.continuity.statelayout import StateLayout
from fleet.gateway.commands import CommandError, CommandRegistry
from fleet.gateway.hooks import MODIFYING_HOOKS, HookBus

SCENARIO = "selftest"  # the entry module's function: selftest(run) -> None
BUDGET_S = 20.0  # a scenario's calls; below the bridge's default deadline (25 s)
BUSY_WAIT_S = 30.0
DETAIL_MAX = 400  # characters of one check's detail
MAX_CHECKS = 40
_ONE_AT_A_TIME = threading.Lock()


class SelfTestError(RuntimeError):
    """The run cannot go on (out of time, a call outside the plugin); ends the scenario."""


def clip(value: Any, limit: int = DETAIL_MAX) -> str:
    """`value` as text of at most `limit` characters, saying how much was left out."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return text
    return text[:limit] + f"...[+{len(text) - limit} chars]"


def scenario_of(module: Optional[types.ModuleType]) -> Optional[Callable[[Any], Any]]:
    """The plugin entry's `selftest(run)`, None when it has none (an older plugin)."""
    fn = getattr(module, SCENARIO, None) if module is not None else None
    return fn if callable(fn) else None


class SelfTestRun:
    """What a scenario may use: its scratch, the plugin's hooks and commands, and `check`."""

    def __init__(self, plugin_id: str, version: str, root: Path, state_dir: Path,
                 hooks: HookBus, commands: CommandRegistry, config: Dict[str, Any],
                 injects: bool) -> None:
        self.plugin_id = plugin_id
        self.version = version
        self.root = root  # the scratch dir: the state dir the scenario's commands see
        self.state_dir = state_dir  # the host's, for what the plugin keeps there
        self.workspace = root / "workspace"
        self.token = os.urandom(4).hex()  # in keys and texts: this run's, no other's
        self.agent_id = f"fleet-selftest-{self.token}"
        self.config = dict(config)  # the plugin's config as its real hooks see it
        self.injects = injects  # whether the gateway lets this plugin inject prompt text
        self.checks: List[Dict[str, Any]] = []
        self._hooks = hooks
        self._commands = commands
        self._deadline = time.monotonic() + BUDGET_S

    def _in_time(self, what: str) -> None:
        if time.monotonic() > self._deadline:
            raise SelfTestError(f"out of time ({BUDGET_S:g} s) before {what}")

    def hook(self, name: str, event: Dict[str, Any],
             ctx: Dict[str, Any]) -> Tuple[Optional[Dict[str, Any]], List[str]]:
        """Fire hook `name` at this plugin's handlers only: (merged result or None, errors)."""
        self._in_time(name)
        if name in MODIFYING_HOOKS:
            merged, errors = self._hooks.run_modifying(name, event, ctx, plugin=self.plugin_id,
                                                       counted=False)
            return merged or None, errors
        return None, self._hooks.run_void(name, event, ctx, plugin=self.plugin_id,
                                          counted=False)

    def scratch_config(self) -> Dict[str, Any]:
        """An OpenClaw config with one agent, this run's, whose workspace is the scratch's."""
        return {"agents": {"list": [{"id": self.agent_id, "default": True,
                                     "workspace": str(self.workspace)}]}}

    def command(self, line: str) -> Tuple[bool, str]:
        """Run `/name args` of this plugin against the scratch: (answered without error, text)."""
        self._in_time(line)
        name = line.lstrip("/").split(" ", 1)[0].lower()
        owner = {c["name"]: c["plugin"] for c in self._commands.names()}.get(name)
        if owner != self.plugin_id:
            raise SelfTestError(f"/{name} is not a command of {self.plugin_id}")
        ctx = {"stateDir": str(self.root), "config": self.scratch_config(), "selfTest": True}
        try:
            return True, self._commands.dispatch(line, ctx)["text"]
        except CommandError as exc:
            return False, str(exc)

    def check(self, name: str, ok: bool, expected: str, found: Any = None) -> bool:
        """Record one check: `expected` says what it checked; a failed one also says what it
        found instead. Returns `ok`."""
        if ok:
            detail = clip(expected)
        else:
            detail = f"expected {clip(expected, DETAIL_MAX // 2)}"
            if found is not None:
                detail += f", found {clip(found, DETAIL_MAX // 2)}"
        self._record(name, bool(ok), detail)
        return bool(ok)

    def skip(self, name: str, why: str) -> None:
        """A check this host's config rules out (e.g. the plugin's feature is off): passed."""
        self._record(name, True, clip(f"skipped: {why}"))

    def _record(self, name: str, ok: bool, detail: str) -> None:
        if len(self.checks) < MAX_CHECKS:
            self.checks.append({"name": clip(name, 80), "ok": ok, "detail": detail})


def sweep(parent: Path) -> List[str]:
    """Remove the scratch dirs of processes that are gone (killed mid-run); their names."""
    removed = []
    try:
        names = os.listdir(str(parent))
    except OSError:
        return removed
    for name in names:
        parts = name.rsplit("-", 2)  # the plugin id may hold "-"; pid and suffix do not
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid == os.getpid() or _alive(pid):
            continue
        shutil.rmtree(str(parent / name), ignore_errors=True)
        removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, someone else's
        return True
    return True


def _scratch(state_dir: Path, plugin_id: str) -> Path:
    parent = StateLayout(state_dir).selftest_dir
    if parent.is_symlink():
        raise SelfTestError(f"{parent} is a symlink; fleet makes that dir itself")
    private.make_dir(parent)
    sweep(parent)
    # a new dir of its own, mode 0700 as `tempfile.mkdtemp` makes it, without importing
    # `tempfile` (and `random`) into every gateway for one name
    scratch = parent / f"{plugin_id}-{os.getpid()}-{ids.uuid4_hex()[:8]}"
    os.mkdir(str(scratch), 0o700)
    return scratch


def run(plugin_id: str, version: Optional[str], module: Optional[types.ModuleType],
        state_dir: Path, hooks: HookBus, commands: CommandRegistry,
        config: Dict[str, Any], injects: bool = True) -> Dict[str, Any]:
    """Run one plugin's scenario (see the module doc); never raises."""
    started = time.monotonic()
    answer: Dict[str, Any] = {"ok": False, "plugin": plugin_id, "version": version,
                              "checks": []}
    scenario = scenario_of(module)
    if scenario is None:
        answer.update(ok=True, unsupported=f"{plugin_id} has no self-test")
    elif not _ONE_AT_A_TIME.acquire(timeout=BUSY_WAIT_S):
        answer["checks"] = [{"name": "start", "ok": False, "detail": "another self-test ran "
                             f"for {BUSY_WAIT_S:g} s in this process; try again later"}]
    else:
        try:
            answer["checks"] = _scenario(scenario, plugin_id, version or "", state_dir, hooks,
                                         commands, config, injects)
        finally:
            _ONE_AT_A_TIME.release()
        answer["ok"] = bool(answer["checks"]) and all(c["ok"] for c in answer["checks"])
    answer["duration_ms"] = int((time.monotonic() - started) * 1000)
    return answer


def _scenario(scenario: Callable[[Any], Any], plugin_id: str, version: str, state_dir: Path,
              hooks: HookBus, commands: CommandRegistry, config: Dict[str, Any],
              injects: bool) -> List[Dict[str, Any]]:
    try:
        root = _scratch(state_dir, plugin_id)
    except (OSError, SelfTestError) as exc:
        return [{"name": "scratch", "ok": False,
                 "detail": clip(f"cannot make a scratch dir: {exc}")}]
    test = SelfTestRun(plugin_id, version, root, state_dir, hooks, commands, config, injects)
    try:
        scenario(test)
    except BaseException as exc:  # the plugin's failure, not the gateway's
        if isinstance(exc, KeyboardInterrupt):
            raise
        test.checks.append({"name": "scenario", "ok": False,
                            "detail": clip(f"{type(exc).__name__}: {exc}")})
    finally:
        shutil.rmtree(str(root), ignore_errors=True)
    return test.checks
