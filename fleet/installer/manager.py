"""Gateway managers: how a host's gateway is restarted, and how we learn that it is ready.

Why one place: a hand-made deploy restarts with `pkill -f <pattern>` + `nohup` over ssh. `pkill -f`
matches whole command lines, so it also kills the ssh session's own shell (whose `-c` string holds
the pattern) and the `nohup` after it never runs; and nothing signals readiness. Here every manager
restarts through a supervisor-style command (never `pkill -f`), every command has a deadline, and
readiness is the gateway's own `health` answer (its control socket, or a `probe` command
printing the same JSON), judged and waited for by fleet/gateway/process.py.

Managers (`--manager`, options via `--manager-opt k=v`):
- `fleet`    : our gateway, stopped by its pidfile and started as `python3 -m fleet.gateway
               --state-dir D run` from the release (PYTHONPATH = the resolved release dir) by
               the installer itself (fleet/gateway/process.py); opt `python`.
- `systemd`  : `systemctl --user restart <unit>` (opt `unit`, default `fleet-gateway.service`).
- `launchd`  : `launchctl kickstart -k gui/<uid>/<label>` (opt `label`,
               default `ai.openclaw.gateway`).
- `openclaw` : a real OpenClaw gateway: plugins loaded from the release through openclaw.json,
               activated by `plugins.reload`, `openclaw gateway restart` or a supervised
               `openclaw gateway run`; ready when each plugin answers its own
               `<id>.ready` (fleet/installer/openclawgw.py, its options there).
- `command`  : opt `restart` (shell command, required), optional `stop`.
Every manager accepts opt `probe` (a shell command printing health JSON) instead of the socket.
Commands get FLEET_STATE_DIR, FLEET_RELEASE and PYTHONPATH in their environment.

After readiness a deploy runs the plugins' self-tests (`selftest()`: our gateway's `selftest`
control op; OpenClaw: each plugin's `<id>.selftest`, fleet/installer/openclawgw.py), and `status`
shows their hook statistics (`hook_stats()`: the `stats` op; `<id>.stats`). A gateway that does
not know them (an older release) makes the self-test `unsupported` and the statistics None.
A manager whose readiness is a `probe` command has no socket to ask: its self-test is
`unsupported` and it shows no statistics.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from fleet.gateway import client, process
from fleet.gateway.layout import Layout
from fleet.installer import releasedirs, supervision


class ManagerError(RuntimeError):
    """A restart/stop command failed or timed out."""


STATS_TIMEOUT_S = 2.0  # `status`: the hook statistics of a gateway that answered its probe


def release_plugins(release: Optional[Path]) -> List[str]:
    """The plugin ids `release` ships (its `fleet_release.json`)."""
    meta = releasedirs.read_meta(release) if release is not None else None
    return sorted((meta or {}).get("plugins") or {})


def unknown_op(error: Any) -> bool:
    """Whether a control answer's error says the gateway has no such op (an older release)."""
    return isinstance(error, str) and error.startswith("unknown op")


def run_command(cmd: Union[str, Sequence[str]], env: Optional[Dict[str, str]] = None,
                timeout: float = 60.0, cwd: Optional[Path] = None) -> Tuple[int, str, str]:
    """Run with a deadline; output goes to temp files so a daemonised child can't hold a pipe.

    The working directory defaults to the release (or /) so that a `fleet` package in the
    caller's directory (a source checkout) can never shadow the release being started.
    """
    import tempfile  # only the command managers run commands: not on every install's path

    full_env = dict(os.environ)
    full_env.update(env or {})
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, shell=isinstance(cmd, str), env=full_env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True, cwd=str(cwd or "/"))
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait(timeout=10)
            raise ManagerError("command timed out after {:.0f}s: {}".format(
                timeout, cmd if isinstance(cmd, str) else " ".join(cmd))) from None
        out.seek(0)
        err.seek(0)
        return (rc, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"))


class Manager:
    """Restart/stop the gateway of one state dir; `probe()` returns its health or None."""

    name = "base"
    links_extensions = True  # <state>/extensions/<id> -> the active release's plugin dirs
    # unpack may hard-link the active release's unchanged files (releasedirs.unpack): a link
    # changes their inode's link count and ctime, which fleet's gateway never looks at
    shares_release_files = True

    def __init__(self, state_dir: Path, opts: Dict[str, str]):
        self.state_dir = state_dir
        self.opts = opts

    def env(self, release: Optional[Path]) -> Dict[str, str]:
        env = {"FLEET_STATE_DIR": str(self.state_dir)}
        if release is not None:
            env["FLEET_RELEASE"] = str(release)
            env["PYTHONPATH"] = str(release)
        return env

    def restart_cmd(self, release: Path, expect: Dict[str, str],
                    timeout: float) -> Union[str, List[str]]:
        raise NotImplementedError

    def stop_cmd(self, release: Optional[Path], timeout: float) -> Union[str, List[str], None]:
        return None

    def _run(self, cmd: Union[str, List[str]], release: Optional[Path], timeout: float,
             what: str) -> str:
        rc, out, err = run_command(cmd, self.env(release), timeout + 5, cwd=release)
        if rc != 0:
            tail = "\n".join((out + err).strip().splitlines()[-8:])
            raise ManagerError(f"{self.name} {what} failed (exit {rc}): {tail}")
        return out

    def restart(self, release: Path, expect: Dict[str, str], timeout: float) -> None:
        self._run(self.restart_cmd(release, expect, timeout), release, timeout, "restart")

    def stop(self, release: Optional[Path], timeout: float) -> None:
        cmd = self.stop_cmd(release, timeout)
        if cmd:
            self._run(cmd, release, timeout, "stop")

    def unconfigure(self, release: Optional[Path]) -> bool:
        """Make the gateway load none of fleet's plugins (`fleet remove`): the links fleet made
        in `<state>/extensions`; True when something changed."""
        if release is None:
            return False
        return bool(releasedirs.unlink_extensions(self.state_dir, release_plugins(release)))

    def stoppable(self) -> Optional[str]:
        """None when `stop` leaves the gateway stopped (`fleet stop`), else why it cannot."""
        if self.stop_cmd(None, 0.0):
            return None
        return (f"the {self.name} manager has no stop command here; give it one "
                "(gateway.options.stop) or stop the gateway with the service manager")

    def failure(self) -> Optional[str]:
        """Why a gateway this manager started can never become ready (it exited), or None."""
        return None

    def preflight(self, artifact: Path,
                  allow_unproven: bool = False) -> Tuple[Optional[str], List[str]]:
        """(why this host cannot take `artifact`, notes) before anything changes; (None, [])
        where the gateway takes any release (ours does). `allow_unproven`: the deploy accepts a
        gateway the release was not proven on (--allow-unproven-openclaw)."""
        return None, []

    def before_change(self) -> Optional[str]:
        """Why this manager could not make a deploy's change on this host (a file it must
        rewrite that it may not, or cannot read), found before anything changes; None where
        nothing stops it (ours: it rewrites nothing of the user's)."""
        return None

    def support(self, release: Optional[Path], health: Optional[dict]) -> Optional[dict]:
        """Whether the gateway here is one `release` was proven on (`{state, version,
        message}`, fleet.continuity.openclawrange), for status and doctor; None where any
        gateway version runs any release (ours)."""
        return None

    def log_tail(self) -> str:
        """The started gateway's recent log lines, for error messages ("" if unknown)."""
        return ""

    def supervision(self) -> Optional[dict]:
        """What this manager's supervisor says of the gateway (restarts, last exit, running),
        None where the manager has none of its own (systemd and launchd keep theirs)."""
        return None

    def selftest(self, release: Path, timeout: float) -> Dict[str, Any]:
        """Each plugin's self-test answer (fleet/installer/selftest.py says what one may be),
        asked of the running gateway's control socket within `timeout`."""
        ids = release_plugins(release)
        if self.opts.get("probe"):
            why = "this manager's readiness is a probe command: no control socket to ask"
            return {pid: {"unsupported": why} for pid in ids}
        try:
            resp = client.request(Layout(self.state_dir).socket, {"op": "selftest"},
                                  timeout_s=timeout, retry_s=0)
        except client.ClientError as exc:
            return {pid: {"error": str(exc)} for pid in ids}
        if not resp.get("ok"):
            error = resp.get("error")
            if unknown_op(error):
                why = "the gateway has no selftest op (a release older than the self-test)"
                return {pid: {"unsupported": why} for pid in ids}
            return {pid: {"error": f"{error}"} for pid in ids}
        result = resp.get("result")
        plugins = result.get("plugins") if isinstance(result, dict) else None
        if not isinstance(plugins, dict):
            return {pid: {"error": f"an answer without plugins: {result!r:.200}"} for pid in ids}
        return {pid: plugins.get(pid, {"error": "the gateway did not test it"}) for pid in
                sorted(set(ids) | set(plugins))}

    def hook_stats(self, release: Optional[Path],
                   health: Optional[dict]) -> Optional[Dict[str, Any]]:
        """Each plugin's hook statistics (`{id: {calls, errors, timeouts, restarts, since}}`),
        None when the gateway is down (no `health`) or does not answer them."""
        if health is None or self.opts.get("probe"):
            return None
        try:
            resp = client.request(Layout(self.state_dir).socket, {"op": "stats"},
                                  timeout_s=STATS_TIMEOUT_S, retry_s=0)
        except client.ClientError:
            return None
        result = resp.get("result") if resp.get("ok") else None
        plugins = result.get("plugins") if isinstance(result, dict) else None
        return plugins if isinstance(plugins, dict) else None

    def probe(self, release: Optional[Path] = None) -> Optional[dict]:
        cmd = self.opts.get("probe")
        if not cmd:
            return process.probe(Layout(self.state_dir))
        try:
            rc, out, _ = run_command(cmd, self.env(release), 10, cwd=release)
            data = json.loads(out) if rc == 0 else None
        except (ManagerError, ValueError):
            return None
        if isinstance(data, dict) and isinstance(data.get("result"), dict):
            data = data["result"]
        return data if isinstance(data, dict) else None


class FleetManager(Manager):
    """Our gateway, started under a supervisor by this process (fleet/installer/supervision.py:
    a gateway that fails after it was ready is started again, with backoff) and stopped with it
    (fleet/gateway/process.py): no wrapper interpreter; readiness is the installer's own health
    polling.

    Why not `python3 -m fleet.gateway restart`: that wrapper is one more interpreter start and
    the gateway CLI's imports (~80 ms CPU per restart on a small host), only to do what
    fleet.gateway.process does with what the installer has already loaded."""

    name = "fleet"

    def __init__(self, state_dir: Path, opts: Dict[str, str]):
        super().__init__(state_dir, opts)
        self.layout = Layout(state_dir)
        self.spawned: Optional[supervision.Started] = None

    def restart(self, release: Path, expect: Dict[str, str], timeout: float) -> None:
        self.stop(release, timeout)
        env = dict(os.environ)
        env.update(self.env(release))
        env["PYTHONPATH"] = str(release)
        env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            self.spawned = supervision.start(self.layout,
                                             self.opts.get("python", sys.executable), env)
        except OSError as exc:
            raise ManagerError(f"fleet restart failed: cannot start the gateway: {exc}") from exc

    def stop(self, release: Optional[Path], timeout: float) -> None:
        grace_s = min(timeout, process.STOP_GRACE_S)
        if self.spawned is not None:  # one we started that never became ready
            self.spawned.abandon(grace_s)
        try:
            process.stop(self.layout, grace_s)
        except (process.StopError, OSError) as exc:
            raise ManagerError(f"fleet stop failed: {exc}") from exc

    def stoppable(self) -> Optional[str]:
        return None  # its supervisor is stopped with it

    def failure(self) -> Optional[str]:
        gone = self.spawned.exited() if self.spawned is not None else None
        return gone + self.log_tail() if gone else None

    def log_tail(self) -> str:
        return self.spawned.log_tail() if self.spawned is not None else ""

    def supervision(self) -> Optional[dict]:
        return supervision.read_state(self.layout)


class SystemdManager(Manager):
    name = "systemd"

    def restart_cmd(self, release, expect, timeout):
        return ["systemctl", "--user", "restart", self.opts.get("unit", "fleet-gateway.service")]

    def stop_cmd(self, release, timeout):
        return ["systemctl", "--user", "stop", self.opts.get("unit", "fleet-gateway.service")]


class LaunchdManager(Manager):
    name = "launchd"

    def stoppable(self) -> Optional[str]:
        return ("launchd starts the gateway again (KeepAlive); unload it instead: launchctl "
                f"bootout gui/{os.getuid()}/{self.opts.get('label', 'ai.openclaw.gateway')}")

    def restart_cmd(self, release, expect, timeout):
        label = self.opts.get("label", "ai.openclaw.gateway")
        return ["launchctl", "kickstart", "-k", f"gui/{os.getuid()}/{label}"]


class CommandManager(Manager):
    name = "command"

    def restart_cmd(self, release, expect, timeout):
        cmd = self.opts.get("restart")
        if not cmd:
            raise ManagerError("manager 'command' needs --manager-opt restart='<shell command>'")
        return cmd

    def stop_cmd(self, release, timeout):
        return self.opts.get("stop")
