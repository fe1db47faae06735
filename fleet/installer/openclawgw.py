"""The `openclaw` gateway manager: deploy fleet's plugins into a real OpenClaw gateway.

What an activation does (`restart()`; the transaction calls it after switching `current`):
1. `openclaw.json` loads the release's plugin dirs and enables them (fleet/installer/
   openclawconfig.py); the candidate is checked by OpenClaw itself (`openclaw config validate`,
   or the verdict it already gave on an equivalent config, see `validated()`) before it replaces
   the file, so a config OpenClaw would refuse is never put in place.
2. Activation, fastest first: when the file changed (a new release) and the running gateway
   already knows these plugins, it reloads them (`plugins.reload` RPC); its answer names a
   plugin that throws at load at once. Otherwise the
   gateway restarts: `openclaw gateway restart` where OpenClaw runs as the user's service
   (mode `service`), or, on hosts without a service (sandbox, harness), fleet's own supervised
   `openclaw gateway run` (mode `supervised`: pidfile, SIGTERM, SIGKILL after a deadline).
Readiness (`probe()`): each fleet plugin answers its own `<id>.ready` at the release's version;
then a deploy runs each plugin's `<id>.selftest` (`selftest()`), and `status` reads each one's
`<id>.stats` (`hook_stats()`); a plugin whose bridge does not know them (an older release) makes
the self-test `unsupported` and has no statistics.
What else a gateway can tell differs between OpenClaw releases; one record per host says what
(`capabilities()`, fleet/installer/openclawcaps.py). A plugin that fails to load fails the deploy
as soon as the gateway says so, whichever way it does: the `plugins.reload` answer, the
`plugins.list` runtime error, or, on every release, its own log line, read from where this
activation began (fleet/installer/openclawlog.py), before the gateway even reports ready; a
ready gateway without a runtime listing that does not know `<id>.ready` did not load it. RPCs
go straight to the gateway's socket
(fleet/installer/openclawrpc.py, milliseconds) and through `openclaw gateway call` (a CLI boot,
seconds) only where that cannot work (`call()`).

Options (inventory `gateway.options`, all strings): `mode` service|supervised (default service),
`openclaw` (the CLI: an executable, or the `openclaw.mjs` entry when `node` is given), `node`,
`port` (else openclaw.json's gateway.port, else 18789), `home` (HOME for OpenClaw), `config`
(default <state>/openclaw.json), `bind` (supervised; default loopback), `stop_grace` (seconds
before SIGKILL; default 60), `cli_timeout` (seconds per CLI call or RPC; default 120), `rpc`
direct|cli (default direct), `validate` known|always (default known), `env.NAME` (extra environment
for every OpenClaw process). OpenClaw's state dir is the host's state dir (OPENCLAW_STATE_DIR).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from fleet.continuity import detached, paths, regularfile, store
from fleet.continuity.openclawrange import OUTSIDE, PROVEN, CompatError, Support
from fleet.continuity.statelayout import StateLayout
from fleet.installer import (
    openclawcaps,
    openclawcli,
    openclawconfig,
    openclawlog,
    openclawrpc,
    releasedirs,
)
from fleet.installer.manager import Manager, ManagerError
from fleet.installer.protocol import openclaw_note, openclaw_refusal, wait_problem

DEFAULT_PORT = 18789
ACTIVE = "active"
DIRECT = "direct"
VALIDATED_KEEP = 16  # verdicts remembered (openclaw-validated.json)
STATS_BUDGET_S = 5.0  # `status`: every plugin's `<id>.stats`, direct RPC only (no CLI boot)
CONFIG_ATTEMPTS = 3  # read-validate-commit rounds when the file keeps changing meanwhile


def _seconds(opts: Dict[str, str], key: str, default: float) -> float:
    """A duration option (inventory `gateway.options`), 0 to MAX_WAIT_S seconds, or a
    ManagerError naming the option."""
    raw = opts.get(key)
    if raw is None or raw == "":
        return default
    try:
        problem = wait_problem(float(raw))
    except ValueError:
        problem = "expected a number of seconds"
    if problem:
        raise ManagerError(f"openclaw manager: option {key}={raw!r}: {problem}")
    return float(raw)


class OpenclawManager(Manager):
    """Plugins of one OpenClaw state dir: config, activation, readiness (see module doc)."""

    name = "openclaw"
    links_extensions = False  # OpenClaw loads from plugins.load.paths, see openclawconfig
    # OpenClaw watches and snapshots the plugin files it loads (their link count and ctime
    # among them): a new release's unpack leaves the running release's inodes alone
    shares_release_files = False

    def __init__(self, state_dir: Path, opts: Dict[str, str]):
        super().__init__(state_dir, opts)
        self.mode = opts.get("mode", "service")
        if self.mode not in ("service", "supervised"):
            raise ManagerError(f"openclaw manager: option mode={self.mode!r}; use service or "
                               "supervised")
        self.config_path = Path(os.path.expanduser(opts.get("config") or
                                                   str(state_dir / "openclaw.json")))
        self.cli_timeout = _seconds(opts, "cli_timeout", 120.0)
        self.stop_grace = _seconds(opts, "stop_grace", 60.0)
        self.process = SupervisedGateway(state_dir, self) if self.mode == "supervised" else None
        self._version: Optional[str] = None  # the CLI's
        self._gateway_version: Optional[str] = None  # the running gateway's (its hello-ok)
        self.validation: Optional[str] = None  # how the last new config was validated
        self._replaced: Optional[dict] = None  # the config content configure() last replaced
        self._known: Optional[Dict[str, dict]] = None  # plugins the running gateway knows
        self._hello: Dict[str, Any] = {}  # the running gateway's last hello-ok
        self._caps: Optional[openclawcaps.Capabilities] = None  # what it can tell (see there)
        self._watch: Optional[openclawlog.LogWatch] = None  # its log since the activation began
        self._logged: Dict[str, str] = {}  # plugin id -> load error its log named meanwhile
        # DIRECT, or "cli (<why the direct client cannot be used>)"; option rpc=cli forces it
        rpc = opts.get("rpc", DIRECT)
        if rpc not in (DIRECT, "cli"):
            raise ManagerError(f"openclaw manager: option rpc={rpc!r}; use direct or cli")
        self.rpc_path = DIRECT if rpc == DIRECT else "cli (option rpc=cli)"
        self.validate = opts.get("validate", "known")
        if self.validate not in ("known", "always"):
            raise ManagerError(f"openclaw manager: option validate={self.validate!r}; use known "
                               "(OpenClaw's verdicts remembered) or always")

    # -- the OpenClaw CLI --------------------------------------------------------------
    def argv(self, *args: str) -> List[str]:
        return openclawcli.cli_argv(self.opts, *args)

    def oc_env(self) -> Dict[str, str]:
        env = {"OPENCLAW_STATE_DIR": str(self.state_dir),
               "OPENCLAW_CONFIG_PATH": str(self.config_path),
               "OPENCLAW_GATEWAY_PORT": str(self.port()), "NO_COLOR": "1"}
        env.update(openclawcli.cli_env(self.opts))
        return env

    def full_env(self, env: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """The environment an OpenClaw process of this host sees."""
        full = dict(os.environ)
        full.update(self.oc_env())
        full.update(env or {})
        return full

    def cli(self, *args: str, timeout: Optional[float] = None,
            env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
        full = self.full_env(env)
        limit = timeout or self.cli_timeout
        try:
            return subprocess.run(self.argv(*args), env=full, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=limit,
                                  cwd=str(self.state_dir), start_new_session=True)
        except subprocess.TimeoutExpired:
            raise ManagerError(f"`openclaw {' '.join(args[:3])}` did not answer within "
                               f"{limit:.0f}s") from None
        except OSError as exc:
            raise ManagerError(f"cannot run the OpenClaw CLI {self.argv()[0]}: {exc}; set the "
                               "inventory's gateway.options openclaw (and node)") from None

    def call(self, method: str, params: Optional[dict] = None,
             timeout: Optional[float] = None) -> dict:
        """One gateway RPC; returns its result, or raises RpcError with the gateway's error.

        Straight over the gateway's socket (openclawrpc: milliseconds) where that works; through
        `openclaw gateway call` (a CLI boot, seconds) where it cannot, `self.rpc_path` says why.
        """
        limit = timeout or self.cli_timeout
        if self.rpc_path == DIRECT:
            try:
                return self.call_direct(method, params, limit)
            except openclawrpc.Unsupported as exc:
                self.rpc_path = f"cli ({exc})"
        return self.call_cli(method, params, limit)

    def call_direct(self, method: str, params: Optional[dict], limit: float) -> dict:
        """`call` over the gateway's WebSocket; a busy gateway (retryable) is asked again."""
        try:
            auth = openclawrpc.auth_for(openclawconfig.load(self.config_path), self.full_env())
        except openclawconfig.ConfigError as exc:
            raise openclawrpc.Unsupported(str(exc)) from None
        deadline = time.monotonic() + limit
        while True:
            try:
                with openclawrpc.GatewayRpc(self.port(), auth) as rpc:
                    self._hello = rpc.open(max(deadline - time.monotonic(), 0.1))
                    server = self._hello.get("server")
                    if isinstance(server, dict) and server.get("version"):
                        self._gateway_version = str(server["version"])
                    return rpc.call(method, params, max(deadline - time.monotonic(), 0.1))
            except openclawrpc.CallError as exc:
                # e.g. "Another plugin or config operation is already running" while the
                # gateway's own config hot reload applies the file fleet just wrote
                wait = float(exc.error.get("retryAfterMs") or 500) / 1000.0
                if exc.error.get("retryable") and time.monotonic() + wait < deadline:
                    time.sleep(min(max(wait, 0.05), 5.0))
                    continue
                raise RpcError(method, exc.message, exc.error) from None
            except OSError as exc:  # unreachable, closed, timed out: as the CLI would fail
                raise RpcError(method, str(exc), {}) from None

    def call_cli(self, method: str, params: Optional[dict], limit: float) -> dict:
        """`call` through `openclaw gateway call` (the user's device identity and secrets)."""
        args = ["gateway", "call", method, "--json", "--timeout", str(int(limit * 1000))]
        if params is not None:
            args += ["--params", json.dumps(params)]
        proc = self.cli(*args, timeout=limit + 30)
        try:
            answer = json.loads(proc.stdout)
        except ValueError:
            answer = None
        if proc.returncode == 0 and isinstance(answer, dict) and answer.get("ok") is not False:
            return answer
        error = (answer or {}).get("error") if isinstance(answer, dict) else None
        message = (error or {}).get("message") if isinstance(error, dict) else None
        raise RpcError(method, message or _tail(proc.stdout + proc.stderr), error or {})

    def version(self) -> Optional[str]:
        """OpenClaw's version: the running gateway's when fleet has talked to it, else the CLI's."""
        return self._gateway_version or self.cli_version()

    def running_version(self, timeout: float = 60.0, direct_only: bool = False) -> Optional[str]:
        """The running gateway's own version (`status`: `runtimeVersion`, in 2026.4.24 and
        2026.9.6), None when no gateway answers. `direct_only`: never through the CLI (a boot,
        seconds), None where the direct RPC cannot be used."""
        if not self.http_ready(min(2.0, timeout)):
            return None
        try:
            status = (self.call_direct("status", None, timeout) if direct_only
                      else self.call("status", timeout=timeout))
        except (RpcError, ManagerError, openclawrpc.Unsupported):
            return self._gateway_version
        found = status.get("runtimeVersion")
        if isinstance(found, str) and found:
            self._gateway_version = found
        return self._gateway_version

    def found_version(self) -> Tuple[Optional[str], str]:
        """(this host's OpenClaw version, whose it is): the running gateway's (as it said when
        fleet last talked to it in this run, e.g. a readiness probe just before), else the
        CLI's."""
        running = self._gateway_version or self.running_version()
        if running:
            return running, "the running gateway"
        return self.cli_version(), "the OpenClaw CLI (no gateway answers)"

    def preflight(self, artifact: Path,
                  allow_unproven: bool = False) -> Tuple[Optional[str], List[str]]:
        """The release's OpenClaw support (its plugins' package.json and its proof, read from
        the artifact) against this host's OpenClaw, before anything on the host changes:
        (refusal, notes). Proven goes ahead; too old is refused; anything else is refused unless
        `allow_unproven`, and then noted."""
        try:
            support = Support.of_artifact(artifact)
        except CompatError as exc:
            return f"cannot read the OpenClaw versions this release supports: {exc}", []
        found, whose = self.found_version()
        if found is None:
            return None, [f"cannot tell which OpenClaw runs here; the release: "
                          f"{support.describe()}"]
        verdict = support.classify(found)
        where = f"{whose} here is OpenClaw {found}"
        if not verdict.accepted(allow_unproven):
            return openclaw_refusal(where, verdict.message, not verdict.too_old), []
        return None, [] if verdict.state == PROVEN else [openclaw_note(where, verdict.message)]

    def before_change(self) -> Optional[str]:
        """openclaw.json as a deploy will rewrite it: readable as fleet reads it, and neither
        it nor its directory read-only (openclawconfig.load, check_writable); said before the
        release is unpacked, so the refusal leaves the host as it was."""
        target = paths.config_write_target(self.config_path)
        try:
            openclawconfig.load(target)
            openclawconfig.check_writable(target)
        except openclawconfig.ConfigError as exc:
            return f"{exc}; nothing was changed"
        return None

    def support(self, release: Optional[Path], health: Optional[dict]) -> Optional[dict]:
        """This host's OpenClaw against the proof of `release` (the active one), for status and
        doctor: `{state, version, message}`; None without a release or a version to compare."""
        if release is None:
            return None
        version = (health or {}).get("openclaw") or self.cli_version()
        if not version:
            return None
        try:
            return Support.of_release(release).classify(str(version)).as_dict()
        except CompatError as exc:
            return {"state": OUTSIDE, "version": str(version),
                    "message": f"cannot read the OpenClaw versions {release.name} supports: "
                               f"{exc}"}

    def cli_version(self) -> Optional[str]:
        """The CLI's version (fleet/installer/openclawcli.py), asked once."""
        if self._version is None:
            self._version = openclawcli.cli_version(self.opts, self.oc_env(),
                                                    str(self.state_dir), 60.0)
        return self._version

    # -- where the gateway listens -------------------------------------------------------
    def port(self) -> int:
        if self.opts.get("port"):
            return int(self.opts["port"])
        try:
            configured = (openclawconfig.load(self.config_path).get("gateway") or {}).get("port")
        except openclawconfig.ConfigError:
            configured = None
        return int(configured) if isinstance(configured, int) else DEFAULT_PORT

    def http_ready(self, timeout: float = 2.0) -> bool:
        """The gateway's own unauthenticated readiness probe (`/readyz`) on loopback."""
        url = f"http://127.0.0.1:{self.port()}/readyz"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    # -- configuration -------------------------------------------------------------------
    def plugin_dirs(self, release: Path) -> Dict[str, str]:
        meta = releasedirs.read_meta(release) or {}
        return {pid: str(release / StateLayout.RELEASE_PLUGINS / pkg)
                for pid, pkg in sorted((meta.get("plugins") or {}).items())}

    def configure(self, release: Path) -> bool:
        """Point openclaw.json at `release`'s plugins; True when the file changed.

        The candidate is validated without holding the config's lock (a validation boots
        OpenClaw's CLI: seconds); the commit takes the lock `/mc settings` takes and goes in only
        if the file is still what the candidate was made from. An edit made meanwhile (a user's
        `/mc settings`) is not overwritten: fleet's change is made again on the new content and
        validated again. Through a symlinked openclaw.json the linked file is replaced, the link
        kept."""
        dirs = self.plugin_dirs(release)
        root = str(StateLayout(self.state_dir).releases_dir)
        return self._edit_config(lambda cur: openclawconfig.with_plugins(cur, dirs, root),
                                 release)

    def unconfigure(self, release: Optional[Path]) -> bool:
        """Take fleet's plugins out of openclaw.json (`fleet remove`), as `configure` edits
        it, the result validated by OpenClaw; True when the file changed."""
        super().unconfigure(release)
        ids = list(self.plugin_dirs(release)) if release is not None else []
        root = str(StateLayout(self.state_dir).releases_dir)
        if not self.config_path.exists():
            return False
        return self._edit_config(lambda cur: openclawconfig.without_plugins(cur, ids, root),
                                 None)

    def _edit_config(self, change: Callable[[dict], dict], release: Optional[Path]) -> bool:
        """openclaw.json rewritten as `change` makes it (see `configure`); `release`: the
        release whose plugins the result loads (None: fleet's plugins taken out)."""
        target = paths.config_write_target(self.config_path)
        with_what = "with fleet's plugin entries" if release else "without fleet's plugins"
        for _ in range(CONFIG_ATTEMPTS):
            try:
                current = openclawconfig.load(target)
            except openclawconfig.ConfigError as exc:
                raise ManagerError(str(exc)) from None
            wanted = change(current)
            if wanted == current:
                return False
            try:  # a rollback or restart comes here without the install's before_change
                openclawconfig.check_writable(target)
            except openclawconfig.ConfigError as exc:
                raise ManagerError(f"{exc}; {self.config_path} was not changed") from None
            candidate = openclawconfig.write_candidate(target, wanted)
            try:
                # Going back (a rollback in this same transaction) to the content this manager
                # replaced: it was in place and served before, so it is not validated again.
                if wanted == self._replaced:
                    problem = None
                elif release is None:
                    problem = self.invalid(candidate)
                else:
                    problem = self.validated(candidate, wanted, release)
                if problem:
                    before = self.invalid(target) if target.exists() else None
                    if before:
                        raise ManagerError(f"{self.config_path} is invalid already, before "
                                           f"fleet's change: {before}; fix it (`openclaw config "
                                           "validate`, `openclaw doctor --fix`) and run again")
                    raise ManagerError(f"OpenClaw refuses {self.config_path} {with_what}: "
                                       f"{problem}; nothing was written")
                with store.locked(target):
                    try:
                        unchanged = openclawconfig.load(target) == current
                    except openclawconfig.ConfigError:
                        unchanged = False  # the next round says what is wrong with it now
                    if not unchanged:
                        continue  # edited while OpenClaw validated: again, on the new content
                    openclawconfig.commit(candidate, target)
                self._replaced = current
                return True
            finally:
                openclawconfig.discard(candidate)
        raise ManagerError(f"{self.config_path} changed {CONFIG_ATTEMPTS} times while fleet "
                           "updated it; nothing of fleet's was written; run again")

    def validated(self, candidate: Path, wanted: dict, release: Path) -> Optional[str]:
        """`invalid(candidate)`, unless OpenClaw already accepted a config that it must judge the
        same way (openclawconfig.validation_key): each `config validate` boots OpenClaw's CLI,
        the one boot left in a deploy (4 s idle, 15-30 s on a busy 2-core host)."""
        openclaw = self.cli_version()
        key = openclawconfig.validation_key(wanted, self.plugin_dirs(release),
                                            str(StateLayout(self.state_dir).releases_dir),
                                            openclaw) if openclaw else None
        store = StateLayout(self.state_dir).openclaw_validated
        try:
            known = json.loads(regularfile.read_text(store, follow=False))
            known = [k for k in known if isinstance(k, str)] if isinstance(known, list) else []
        except (OSError, ValueError):
            known = []
        if key is not None and key in known and self.validate == "known":
            self.validation = "cached"
            return None
        self.validation = "openclaw config validate"
        problem = self.invalid(candidate)
        if problem is None and key is not None:
            tmp = store.with_name(store.name + ".tmp")
            try:  # a cache: losing it costs one validation, never correctness
                tmp.write_text(json.dumps(([key] + known)[:VALIDATED_KEEP]), encoding="utf-8")
                os.replace(str(tmp), str(store))
            except OSError:
                pass
        return problem

    def invalid(self, path: Path) -> Optional[str]:
        """OpenClaw's own verdict on a config file: None when valid, else its issues."""
        proc = self.cli("config", "validate", "--json", env={"OPENCLAW_CONFIG_PATH": str(path)})
        try:
            verdict = json.loads(proc.stdout)
        except ValueError:
            verdict = None
        if proc.returncode == 0 and (not isinstance(verdict, dict)
                                     or verdict.get("valid") is not False):
            return None
        issues = verdict.get("issues") if isinstance(verdict, dict) else None
        if isinstance(issues, list) and issues:
            return "; ".join(f"{i.get('path', '?')}: {i.get('message', i)}"
                             if isinstance(i, dict) else str(i) for i in issues[:5])
        return _tail(proc.stdout + proc.stderr) or f"exit {proc.returncode}"

    # -- what the running gateway can tell ---------------------------------------------------
    def inventory(self) -> Tuple[openclawcaps.Capabilities, Optional[dict]]:
        """(what the running gateway can tell, its `plugins.list` answer or None where it has
        none). The capability record (fleet/installer/openclawcaps.py) is detected once, again
        only when another OpenClaw answers (a service restarted on an upgrade). Raises RpcError
        or ManagerError when the gateway does not answer."""
        caps = self._caps
        if (caps is not None and caps.listing == openclawcaps.NO_LISTING
                and caps.version == self._gateway_version):
            return caps, None
        try:
            listing: Optional[dict] = self.call("plugins.list", timeout=60)
        except RpcError as exc:
            if not unknown_method(exc):
                raise
            listing = None
        if caps is None or caps.version != self._gateway_version:
            hello = self._hello if self.rpc_path == DIRECT else {}
            caps = self._caps = openclawcaps.detect(hello, listing)
        return caps, listing

    # -- activation ----------------------------------------------------------------------
    def restart(self, release: Path, expect: Dict[str, str], timeout: float) -> None:
        releasedirs.unlink_extensions(self.state_dir, list(self.plugin_dirs(release)))
        caps = self._caps
        # only a gateway that can reload needs asking what it knows (a rollback right after a
        # logged load error then does not wait on a gateway still booting)
        if self._known is None and (caps is None or caps.reload) and self.http_ready():
            self._known = self.known_plugins()
        known = self._known  # the same gateway when restart() runs again (a rollback)
        changed = self.configure(release)
        ids = list(self.plugin_dirs(release))
        self.watch_log()
        # A reload applies a new release's plugin dirs; the same release again (`invoke
        # restart`, a forced deploy) gets a real restart.
        if changed and known is not None and all(i in known for i in ids):
            try:
                self.call("plugins.reload", {"plugins": [{"pluginId": i} for i in ids]},
                          timeout=max(timeout, 30.0))
                return
            except RpcError as exc:
                if "plugin load failed" in exc.message or "failed during" in exc.message:
                    raise ManagerError(f"plugin failed to load: {exc.message}") from None
                # anything else (e.g. a reload this gateway cannot do): restart it instead
        self._known = None  # another gateway from here on
        if self.process is not None:
            self.process.stop(self.stop_grace)
            self.process.start()
            return
        self._run(self.argv("gateway", "restart"), None, timeout, "gateway restart")

    def known_plugins(self) -> Optional[Dict[str, dict]]:
        """The plugins the running gateway lists, where it can reload them (else None)."""
        try:
            caps, listing = self.inventory()
        except (RpcError, ManagerError):
            return None
        if not caps.reload or listing is None:
            return None
        return {str(p.get("id")): p for p in listing.get("plugins") or [] if isinstance(p, dict)}

    def log_files(self) -> List[Path]:
        """Where the gateway logs (fleet/installer/openclawlog.py): its console as supervised
        mode captures it, and OpenClaw's file log."""
        try:
            config = openclawconfig.load(self.config_path)
        except openclawconfig.ConfigError:
            config = {}
        home = os.path.expanduser(self.opts["home"]) if self.opts.get("home") else None
        files = openclawlog.file_logs(config, home)
        return ([self.process.log] if self.process is not None else []) + files

    def watch_log(self) -> None:
        """From now on, what the gateway logs is about this activation: read it from here."""
        self._watch = openclawlog.LogWatch(self.log_files)
        self._logged = {}

    def logged_failures(self, release: Optional[Path]) -> Dict[str, str]:
        """{plugin id: error} for the release's plugins that the gateway logged as failing to
        load since the activation began ({} outside an activation)."""
        if self._watch is None or release is None:
            return {}
        dirs = self.plugin_dirs(release)
        found = openclawlog.load_failures(self._watch.look(), list(dirs), list(dirs.values()))
        for plugin_id, error in found.items():
            self._logged.setdefault(plugin_id, error)  # its first failure is the cause
        return {pid: err for pid, err in self._logged.items() if pid in dirs}

    def env(self, release: Optional[Path]) -> Dict[str, str]:
        env = super().env(release)
        env.update(self.oc_env())
        return env

    def stop(self, release: Optional[Path], timeout: float) -> None:
        if self.process is not None:
            self.process.stop(self.stop_grace)
            return
        self._run(self.argv("gateway", "stop"), None, timeout, "gateway stop")

    def stoppable(self) -> Optional[str]:
        return None  # its own process, or `openclaw gateway stop`

    def failure(self) -> Optional[str]:
        return self.process.exited() if self.process is not None else None

    def log_tail(self) -> str:
        return self.process.log_tail() if self.process is not None else ""

    # -- readiness -----------------------------------------------------------------------
    def probe(self, release: Optional[Path] = None) -> Optional[dict]:
        """Health in the installer's shape: each fleet plugin's own answer to `<id>.ready` (its
        worker started and probed: the version it runs), with what the gateway can tell of its
        plugins (see `capabilities`). During an activation a plugin the gateway logged as failing
        to load is reported at once, even before `/readyz` answers."""
        ours = list(self.plugin_dirs(release)) if release is not None else []
        pid = self.process.pid() if self.process else None
        # the log before and after /readyz, which a gateway still booting may hold for seconds
        logged = self.logged_failures(release)
        ready = not logged and self.http_ready()
        logged = logged or self.logged_failures(release)
        if logged:
            return {"ready": True, "openclaw": self.version(), "gateway_pid": pid,
                    "versions": {}, "rpc": self.rpc_path,
                    "plugins": {p: ({"loaded": False, "error": logged[p]} if p in logged else
                                    {"loaded": None, "status": "not probed"}) for p in ours}}
        if not ready:
            return None
        try:
            caps, listing = self.inventory()
        except (RpcError, ManagerError):
            return None
        if listing is not None:
            health = health_from_listing(listing, ours, self.version(), pid,
                                         runtime=caps.runtime_listing)
        else:
            health = {"ready": True, "openclaw": self.version(), "gateway_pid": pid,
                      "versions": {}, "plugins": {p: {"loaded": None, "status": "not probed"}
                                                  for p in ours}}
        for plugin_id in ours:
            info = health["plugins"][plugin_id]
            if info.get("loaded") is False:
                continue  # the inventory names its error already
            self.confirm(plugin_id, info, health["versions"], caps, release)
        health["rpc"] = self.rpc_path
        health["capabilities"] = caps.describe()
        return health

    def confirm(self, plugin_id: str, info: Dict[str, Any], versions: Dict[str, str],
                caps: openclawcaps.Capabilities, release: Optional[Path]) -> None:
        """Ask the plugin itself (`<id>.ready`, fleet/plugins/bridge.mjs) and fold its answer
        into `info` and `versions`: the version its worker runs, or why it cannot run. A ready
        gateway that does not know the method did not load the plugin, unless its inventory
        says the plugin is still on its way (`caps.runtime_listing`); the error is what its log
        says."""
        versions.pop(plugin_id, None)
        try:
            answer = self.call(f"{plugin_id}.ready", timeout=60)
        except RpcError as exc:
            details = exc.error.get("details")
            if isinstance(details, dict) and details.get("final") is True:
                info.update(loaded=False, error=exc.message)
            elif unknown_method(exc) and caps.version != self._gateway_version:
                # another OpenClaw answers now (a service restarted on an upgrade): the next
                # round reads what it can tell before judging
                info.update(loaded=None, status=f"not ready: OpenClaw {self._gateway_version} "
                            "answers now")
            elif unknown_method(exc) and not caps.runtime_listing:
                logged = self.logged_failures(release).get(plugin_id)
                info.update(loaded=False, error=logged or
                            f"the gateway does not know {plugin_id}.ready and logged no load "
                            f"error for it (see `openclaw logs`)")
            else:
                info.update(loaded=None, status=f"not ready: {exc.message}")
            return
        except ManagerError as exc:
            info.update(loaded=None, status=f"not ready: {exc}")
            return
        version = answer.get("version")
        info.update(loaded=True, version=version, worker=answer.get("pid"),
                    python=answer.get("python"))
        if not caps.runtime_listing:  # its answer is all there is to say: it runs
            info["status"] = ACTIVE
        if version is not None:
            versions[plugin_id] = str(version)


    # -- the self-test gate and hook statistics ----------------------------------------------
    def selftest(self, release: Path, timeout: float) -> Dict[str, Any]:
        """Each plugin's `<id>.selftest` answer (fleet/installer/selftest.py says what one may
        be), all within `timeout`."""
        deadline = time.monotonic() + timeout
        answers: Dict[str, Any] = {}
        for plugin_id in self.plugin_dirs(release):
            left = deadline - time.monotonic()
            if left <= 0:
                answers[plugin_id] = {"error": f"no time left ({timeout:.0f} s) to ask it"}
                continue
            try:
                answer = self.call(f"{plugin_id}.selftest", timeout=left)
            except RpcError as exc:
                if unknown_method(exc):
                    answers[plugin_id] = {"unsupported": f"the gateway does not know "
                                                         f"{plugin_id}.selftest (a release "
                                                         "older than the self-test)"}
                else:
                    answers[plugin_id] = {"error": exc.message}
                continue
            except ManagerError as exc:
                answers[plugin_id] = {"error": str(exc)}
                continue
            answers[plugin_id] = answer
        return answers

    def hook_stats(self, release: Optional[Path],
                   health: Optional[dict]) -> Optional[Dict[str, Any]]:
        """Each plugin's `<id>.stats`, within STATS_BUDGET_S in all (a read-only `status` keeps
        its bound); None when the gateway does not answer (or no plugin knows the method)."""
        if health is None or release is None:
            return None
        deadline = time.monotonic() + STATS_BUDGET_S
        found: Dict[str, Any] = {}
        for plugin_id in self.plugin_dirs(release):
            left = deadline - time.monotonic()
            if left <= 0.1:
                break
            try:
                answer = self.call_direct(f"{plugin_id}.stats", None, left)
            except (RpcError, ManagerError, openclawrpc.Unsupported):
                continue
            found[plugin_id] = {k: answer.get(k) for k in ("calls", "errors", "timeouts",
                                                           "restarts", "since")}
        return found or None


def installed_openclaw(state_dir: str, opts: Dict[str, str],
                       budget: float) -> Optional[Dict[str, str]]:
    """`{version, source}` of the OpenClaw this host runs, within `budget` seconds: the running
    gateway's own (its `hello-ok` over the gateway's socket; never `openclaw gateway call`, a CLI
    boot), else the CLI's; None when neither can tell. The fleet lease's take of a deploy asks
    the active release's installer this (fleet/deploy/lease.py), so the control side can refuse
    a host before it sends the artifact."""
    manager = OpenclawManager(Path(state_dir), dict(opts))
    deadline = time.monotonic() + budget
    running = manager.running_version(budget / 2, direct_only=True)
    if running:
        return {"version": running, "source": "gateway"}
    found = openclawcli.cli_version(opts, manager.oc_env(), str(manager.state_dir),
                                    max(deadline - time.monotonic(), 0.5))
    return {"version": found, "source": "cli"} if found else None


def unknown_method(exc: RpcError) -> bool:
    """Whether the gateway does not know the method (an older OpenClaw, or a plugin whose
    method was never registered because it did not load)."""
    return "unknown method" in exc.message


def health_from_listing(listing: dict, ours: List[str], openclaw_version: Optional[str],
                        pid: Optional[int], runtime: bool = True) -> dict:
    """{openclaw, versions, plugins, ...} for the plugins `ours` from a `plugins.list` answer.

    `runtime`: the listing carries each plugin's runtime state (openclawcaps.RUNTIME). Then
    `versions` holds only plugins that are active, so a plugin still loading is "missing"
    (readiness keeps waiting). Without it (a catalog listing) the listing's version is what is
    on disk, not what runs: versions and state are left to the plugins' own answers. Either way
    a load error, a catalog error or an error diagnostic naming a plugin is an error (readiness
    fails at once). The gateway pid is `gateway_pid`: a reload keeps the same pid, so it must
    not read as "the old gateway is still answering".
    """
    found = {str(p.get("id")): p for p in listing.get("plugins") or [] if isinstance(p, dict)}
    diagnostics = [d for d in listing.get("diagnostics") or [] if isinstance(d, dict)
                   and d.get("level", "error") == "error"]
    plugins: Dict[str, Any] = {}
    versions: Dict[str, str] = {}
    for plugin_id in ours:
        entry = found.get(plugin_id)
        if entry is None:
            plugins[plugin_id] = {"loaded": None, "status": "not discovered"}
            continue
        state = entry.get("runtime") if isinstance(entry.get("runtime"), dict) else {}
        status = state.get("state") if runtime else None
        info: Dict[str, Any] = {"version": entry.get("version"), "status": status,
                                "enabled": entry.get("enabled"), "origin": entry.get("origin")}
        named = [str(d.get("message")) for d in diagnostics
                 if d.get("pluginId") == plugin_id or plugin_id in str(d.get("message", ""))]
        error = state.get("error") or entry.get("error") or "; ".join(named)
        if not error and entry.get("state") == "error":
            error = "OpenClaw lists it in state error"
        if error:
            info.update(loaded=False, error=str(error))
        elif entry.get("enabled") is False:
            info.update(loaded=False, error="disabled in openclaw.json")
        elif status == ACTIVE:
            info["loaded"] = True
            versions[plugin_id] = str(entry.get("version"))
        else:
            info["loaded"] = None
        plugins[plugin_id] = info
    return {"ready": True, "openclaw": openclaw_version, "gateway_pid": pid,
            "generation": listing.get("generation"), "versions": versions, "plugins": plugins}


class RpcError(RuntimeError):
    def __init__(self, method: str, message: str, error: dict):
        super().__init__(f"{method}: {message}")
        self.method, self.message, self.error = method, message, error


def _tail(text: str, lines: int = 6) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


class SupervisedGateway:
    """`openclaw gateway run` started and stopped by fleet, for hosts without a service.

    A detached child (fleet.continuity.detached): its pidfile (`<state>/fleet/openclaw-gateway.
    pid`, fleet's one pidfile record) holds the pid and, where /proc exists, the process's start
    time, so a pid reused after a crash is never taken for our gateway. The gateway runs in its
    own session (its helpers are in its process group): stop is SIGTERM to the gateway, then
    SIGKILL to the group after the grace period (and to stragglers of a terminated one).
    """

    def __init__(self, state_dir: Path, manager: OpenclawManager):
        self.manager = manager
        self.pidfile = StateLayout(state_dir).openclaw_pidfile
        self.log = StateLayout(state_dir).openclaw_log
        self.child: Optional[detached.Child] = None

    def pid(self) -> Optional[int]:
        return detached.recorded_pid(self.pidfile)

    def start(self) -> int:
        args = self.manager.argv("gateway", "run", "--port", str(self.manager.port()),
                                 "--bind", self.manager.opts.get("bind", "loopback"),
                                 "--allow-unconfigured")
        env = dict(os.environ)
        env.update(self.manager.oc_env())
        env.setdefault("OPENCLAW_NO_RESPAWN", "1")  # restarts stay in this pid
        try:
            self.child = detached.Child(args, self.log, env=env, cwd=env.get("HOME") or "/",
                                        pidfile=self.pidfile)
        except OSError as exc:
            raise ManagerError(f"cannot start `openclaw gateway run` ({args[0]}): {exc}") from None
        return self.child.pid

    def stop(self, grace_s: float) -> Optional[str]:
        pid = self.pid()
        if pid is None:
            return None
        mine = self.child if self.child is not None and self.child.pid == pid else None
        try:
            how = (mine.stop(grace_s, group=True) if mine is not None
                   else detached.stop(pid, grace_s, group=True, kill_wait_s=10.0))
        except detached.StopError as exc:
            raise ManagerError(f"OpenClaw gateway {exc}") from None
        try:
            self.pidfile.unlink()
        except OSError:
            pass
        return how

    def exited(self) -> Optional[str]:
        code = self.child.exit_code() if self.child is not None else None
        if code is None:
            return None
        return (f"`openclaw gateway run` exited with code {code} before it was "
                f"ready{self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        return self.child.log_tail(lines) if self.child is not None else ""
