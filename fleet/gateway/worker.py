"""The Python worker behind a plugin's OpenClaw entry (`index.js` -> `fleet/plugins/bridge.mjs`).

OpenClaw is a Node.js gateway; the continuity logic is Python, written once. The JavaScript
entry starts this worker (one per plugin, long-lived) and forwards each hook and command as one
JSON line on stdin; each answer is one JSON line on stdout. The worker loads the plugin exactly as
`fleet.gateway` does (manifest, config schema with defaults, `import_entry`, `register(api)`,
the same hook bus and command registry), so both gateways run the same code.

Protocol (one JSON object per line, UTF-8):

    worker -> bridge  {"ready": true, "pid", "python", "plugin", "version", "hooks", "commands"}
                      or {"fatal": "why"} and exit (the plugin cannot load here)
    bridge -> worker  {"id": n, "op": "hook", "hook": name, "event": {}, "ctx": {},
                       "pluginConfig": {}, "config": {"agents": ..., "plugins": {"entries": ..}}}
                      {"id": n, "op": "command", "command": "mc", "ctx": {"args", "sessionKey"?},
                       "pluginConfig": {}, "config": {...}}
                      {"id": n, "op": "probe", "pluginConfig": {}, "config": {...}}
                      {"id": n, "op": "selftest", "pluginConfig": {}, "config": {...}}
                      {"id": n, "op": "stats"}
                      {"id": n, "op": "ping"}
    worker -> bridge  {"ack": n}   as soon as request n is read (before it runs: a request
                      the worker died without acknowledging may be sent to a new worker)
                      {"id": n, "ok": true, "result": ..., "errors": [..]}
                      (a hook's answer also carries "stats": this worker's counts, see below)
                      {"id": n, "ok": false, "error": "why"}
                      {"log": "info"|"warn"|"error", "msg": str}   (the plugin's own log lines,
                      and once, after the ready line, a warning when the OpenClaw it serves
                      (`--openclaw-version`) is not proven for its release)

`probe` is what the gateway RPC `<plugin id>.ready` sends (readiness of a deploy): a no-op hook
(PROBE_HOOK, which no plugin handles) taken through the same path as every void hook, context
checked included, answered with what the ready line says (plugin, version, pid, ...). `ping` is
answered by the reader thread itself, so it tells only that the worker still reads.

`selftest` is what the gateway RPC `<plugin id>.selftest` sends (a deploy's gate after readiness):
the plugin's own scenario (its entry's `selftest(run)`) through this worker's hook bus and command
registry, on a scratch workspace under the state dir (fleet/gateway/selftest.py), answered with
`{"ok", "plugin", "version", "checks": [{"name", "ok", "detail"}], "duration_ms"}` (`ok: false`
is a failed self-test, not a failed request). `stats` is answered by the reader thread like
`ping`: `{"plugin", "pid", "calls", "errors", "timeouts", "since"}`, the plugin's hook handler
calls since this worker started, those that raised and those past the bus's time limit; the
self-test's calls are not counted. Every hook answer carries the same counts (`stats`: calls,
errors, timeouts) so the bridge keeps them when this worker dies; it adds what only it sees
(calls past its deadline, restarts) for `<plugin id>.stats`.

Nothing a client sends can stop the worker: a bad line is answered (or logged) and skipped, a
line longer than `MAX_LINE` is discarded, a handler that raises is caught. It exits when stdin
closes.

Where calls run: a modifying hook (`before_prompt_build`: the agent waits for its answer) runs in
the reader thread itself, its handlers called directly: no handoff to a pool thread and no thread
per handler, the two scheduler waits that dominated this hook on a busy host. Its deadline is the
bridge's: a handler that hangs stops the reader, the bridge's call times out (fail open), its
ping goes unread and it kills and restarts the worker. Void hooks and commands (checkpoints with
fsyncs, slow and not awaited by the prompt) go to a pool thread, each handler time-limited by the
hook bus, so they never hold up the next prompt.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional

from fleet.continuity import paths
from fleet.continuity.openclawrange import PROVEN, CompatError, Support
from fleet.continuity.schema import validate as validate_config
from fleet.gateway import selftest as plugin_selftest
from fleet.gateway.api import PluginApi
from fleet.gateway.commands import CommandError, CommandRegistry
from fleet.gateway.hooks import MODIFYING_HOOKS, HookBus
from fleet.gateway.loader import describe, find_register, import_entry
from fleet.gateway.manifest import PluginLoadError, entry_file, validate_manifest

MAX_LINE = 8 * 1024 * 1024 + 4096  # the bridge never sends more than 8 MiB per request
MAX_REPLY = 4 * 1024 * 1024  # the bridge drops longer lines; answer an error instead
MAX_LOG = 4000
THREADS = 8
HOOK_TIMEOUT_S = 9.0  # below the bridge's shortest default deadline (10 s)
PROBE_HOOK = "fleet_probe"  # no plugin registers it: running it is a real no-op hook


class Output:
    """stdout, one whole JSON line at a time from any thread."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.closed = False

    def send(self, obj: Dict[str, Any]) -> None:
        try:
            data = json.dumps(obj, ensure_ascii=False, default=str)
        except (TypeError, ValueError) as exc:
            data = json.dumps({"id": obj.get("id"), "ok": False,
                               "error": f"answer is not JSON: {exc}"})
        raw = data.encode("utf-8", "replace")
        if len(raw) > MAX_REPLY:
            raw = json.dumps({"id": obj.get("id"), "ok": False,
                              "error": f"answer larger than {MAX_REPLY} bytes"}).encode()
        with self._lock:
            if self.closed:
                return
            try:
                self._stream.write(raw + b"\n")
                self._stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                self.closed = True  # the bridge is gone; stdin's EOF ends the loop


class ForwardLogs(logging.Handler):
    """The plugin's `api.logger` lines, sent to the bridge (which logs them through OpenClaw's)."""

    LEVELS = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn"}

    def __init__(self, out: Output, prefix: str) -> None:
        super().__init__(logging.INFO)
        self.out = out
        self.prefix = prefix

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:  # a malformed log call must not break a hook
            msg = str(record.msg)
        if msg.startswith(self.prefix):
            msg = msg[len(self.prefix):]  # OpenClaw's logger names the plugin itself
        level = self.LEVELS.get(record.levelno, "error")
        self.out.send({"log": level, "msg": msg[:MAX_LOG]})


class Host:
    """One plugin loaded as `fleet.gateway` loads it, and the calls the bridge forwards."""

    def __init__(self, plugin_dir: Path, plugin_id: str, state_dir: Path) -> None:
        self.dir = plugin_dir
        self.id = plugin_id
        self.state_dir = state_dir
        self.hooks = HookBus(HOOK_TIMEOUT_S)
        self.commands = CommandRegistry(HOOK_TIMEOUT_S * 2)
        self.manifest: Dict[str, Any] = {}
        self._config: Optional[Dict[str, Any]] = None
        self._plugin_config: Dict[str, Any] = {}
        self._lock = threading.Lock()
        self.module: Optional[Any] = None  # the plugin's entry module (its `selftest`)
        # the OpenClaw this worker serves against its release's proof ({state, version,
        # message}; `check_openclaw`), for `/mc doctor` (command ctx `openclawSupport`)
        self.openclaw: Optional[Dict[str, str]] = None

    def load(self) -> None:
        """Raises PluginLoadError (or the entry's own error) when the plugin cannot run here."""
        self.manifest = validate_manifest(self.dir, match_dir_name=False)
        if self.manifest["id"] != self.id:
            raise PluginLoadError(f"{self.dir / 'openclaw.plugin.json'}: id "
                                  f"{self.manifest['id']!r} is not {self.id!r}")
        self._plugin_config = self.validated({})
        entry = entry_file(self.dir, self.id)
        try:
            module = import_entry(self.id, self.dir, entry)
            register = find_register(module)
            api = PluginApi(self.id, self.manifest["version"], self.state_dir, self.config,
                            self.plugin_config, self.hooks, self.commands, root_dir=self.dir)
            register(api)
            self.module = module
        except PluginLoadError:
            raise
        except Exception as exc:
            raise PluginLoadError(describe(exc, entry)) from exc

    def check_openclaw(self, version: str) -> Optional[str]:
        """Place the OpenClaw this worker runs in (the bridge's `api.runtime.version`) against
        the release's declared range and proof; the warning to log once when it is not proven
        (the plugin keeps running), else None."""
        release = self.dir.resolve().parents[2]  # <release>/fleet/plugins/<pkg>
        plugin = f"{self.id} {self.manifest.get('version')}"
        try:
            verdict = Support.of_release(release).classify(version)
        except CompatError as exc:
            return (f"{plugin} cannot tell whether OpenClaw {version} is one its release "
                    f"supports: {exc}")
        self.openclaw = verdict.as_dict()
        if verdict.state == PROVEN:
            return None
        return (f"{plugin} runs in OpenClaw {version}, {verdict.words} for its release "
                f"({release.name}): {verdict.message}. It keeps running; to converge, run "
                "`invoke doctor` and `invoke deploy` (it re-checks each host, and says which "
                "need --allow-unproven-openclaw or a fleet release proven on this OpenClaw)")

    def validated(self, raw: Any) -> Dict[str, Any]:
        where = f"plugins.entries.{self.id}.config"
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ValueError(f"{where}: must be an object")
        try:
            return validate_config(raw, self.manifest["configSchema"])
        except ValueError as exc:
            text = str(exc)
            raise ValueError(text if text.startswith("plugins.") else f"{where}: {text}") from exc

    def config(self) -> Dict[str, Any]:
        """OpenClaw's config as the bridge passed it, else read from the config file."""
        with self._lock:
            if self._config is not None:
                return self._config
        return paths.load_config(paths.resolve_config_path(state_dir=self.state_dir))

    def plugin_config(self) -> Dict[str, Any]:
        with self._lock:
            return dict(self._plugin_config)

    def take_context(self, req: Dict[str, Any]) -> None:
        cfg = req.get("config")
        plugin_cfg = self.validated(req.get("pluginConfig"))
        with self._lock:
            if isinstance(cfg, dict):
                self._config = cfg
            self._plugin_config = plugin_cfg

    def handle(self, req: Dict[str, Any]) -> Dict[str, Any]:
        op = req.get("op")
        if op not in ("hook", "command", "probe", "selftest"):
            return {"ok": False, "error": f"unknown op {op!r} (hook, command, probe, selftest, "
                                          "stats, ping)"}
        self.take_context(req)
        if op == "hook":
            return self.hook(req)
        if op == "probe":
            return self.probe()
        if op == "selftest":
            return self.selftest()
        return self.command(req)

    def stats(self) -> Dict[str, Any]:
        """The `stats` op's answer: the plugin's hook counts since this worker started."""
        return {"plugin": self.id, "pid": os.getpid(), **self.hooks.stats([self.id])[self.id]}

    def selftest(self) -> Dict[str, Any]:
        """The plugin's self-test through this worker's bus and registry (a scratch under the
        state dir this worker was started with, never one a request names)."""
        answer = plugin_selftest.run(self.id, self.manifest.get("version"), self.module,
                              self.state_dir, self.hooks, self.commands, self.plugin_config())
        return {"ok": True, "result": answer}

    def describe(self) -> Dict[str, Any]:
        """What this worker runs: the ready line's fields (and a probe's answer)."""
        return {"pid": os.getpid(), "python": ".".join(str(v) for v in sys.version_info[:3]),
                "plugin": self.id, "version": self.manifest.get("version"),
                "hooks": self.hooks.summary(),
                "commands": [c["name"] for c in self.commands.names()]}

    def probe(self) -> Dict[str, Any]:
        errors = self.hooks.run_void(PROBE_HOOK, {}, {})
        return {"ok": not errors, "result": self.describe(), "errors": errors}

    def hook(self, req: Dict[str, Any]) -> Dict[str, Any]:
        name = req.get("hook")
        event = req.get("event")
        ctx = req.get("ctx")
        if not isinstance(name, str):
            return {"ok": False, "error": "hook needs a 'hook' name"}
        event = event if isinstance(event, dict) else {}
        ctx = ctx if isinstance(ctx, dict) else {}
        if name in MODIFYING_HOOKS:
            merged, errors = self.hooks.run_modifying(name, event, ctx, inline=True)
            result = merged or None
        else:
            errors, result = self.hooks.run_void(name, event, ctx), None
        return {"ok": True, "result": result, "errors": errors,
                "stats": self.hooks.counts(self.id)}

    def command(self, req: Dict[str, Any]) -> Dict[str, Any]:
        name = req.get("command")
        ctx = req.get("ctx") if isinstance(req.get("ctx"), dict) else {}
        args = ctx.get("args") if isinstance(ctx.get("args"), str) else ""
        base: Dict[str, Any] = {"stateDir": str(self.state_dir), "config": self.config()}
        if self.openclaw is not None:
            base["openclawSupport"] = dict(self.openclaw)
        key = ctx.get("sessionKey")
        if isinstance(key, str) and key.strip():
            base["sessionKey"] = key.strip().lower()
        try:
            out = self.commands.dispatch(f"/{name} {args}".rstrip(), base)
        except CommandError as exc:
            return {"ok": True, "result": {"text": f"MC error: {exc}"}}
        return {"ok": True, "result": {"text": out["text"]}}


def answer(host: Host, out: Output, req: Dict[str, Any]) -> None:
    rid = req.get("id")
    try:
        reply = host.handle(req)
    except BaseException as exc:  # nothing a request carries may end the worker
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            reply = {"ok": False, "error": f"{type(exc).__name__} in handler"}
        else:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    reply["id"] = rid
    out.send(reply)


def read_line(stream: Any) -> Optional[bytes]:
    """One line (without newline), b"" for a skipped over-long line, None at EOF."""
    line = stream.readline(MAX_LINE)
    if not line:
        return None
    if line.endswith(b"\n"):
        return line[:-1]
    while True:  # longer than MAX_LINE: discard through the next newline
        rest = stream.readline(MAX_LINE)
        if not rest or rest.endswith(b"\n"):
            return b""


def serve(host: Host, out: Output, stdin: Any) -> None:
    pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="worker")
    try:
        while True:
            raw = read_line(stdin)
            if raw is None:
                break
            if raw == b"":
                out.send({"log": "error", "msg": f"[bridge] request longer than {MAX_LINE} "
                                                  "bytes discarded"})
                continue
            try:
                req = json.loads(raw.decode("utf-8", "replace"))
            except ValueError as exc:
                out.send({"log": "error", "msg": f"[bridge] request is not JSON: {exc}"})
                continue
            if not isinstance(req, dict):
                out.send({"log": "error", "msg": "[bridge] request is not a JSON object"})
                continue
            if req.get("op") == "ping":
                out.send({"id": req.get("id"), "ok": True, "result": {"pid": os.getpid()}})
                continue
            if req.get("op") == "stats":  # counters only: no plugin code, no wait
                out.send({"id": req.get("id"), "ok": True, "result": host.stats()})
                continue
            if req.get("id") is not None:
                out.send({"ack": req.get("id")})
            if req.get("op") == "hook" and req.get("hook") in MODIFYING_HOOKS:
                answer(host, out, req)  # inline: see "Where calls run" above
            else:
                pool.submit(answer, host, out, req)
    finally:
        pool.shutdown(wait=True)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="fleet.gateway.worker")
    parser.add_argument("--plugin-dir", required=True)
    parser.add_argument("--plugin-id", required=True)
    parser.add_argument("--state-dir", default=None)
    parser.add_argument("--openclaw-version", default=None,
                        help="the OpenClaw this worker serves (the bridge's api.runtime.version)")
    opts = parser.parse_args(argv)
    out = Output(sys.stdout.buffer)
    root = logging.getLogger()
    root.handlers[:] = [ForwardLogs(out, f"[{opts.plugin_id}] ")]
    root.setLevel(logging.INFO)
    state_dir = Path(opts.state_dir) if opts.state_dir else paths.resolve_state_dir()
    host = Host(Path(opts.plugin_dir), opts.plugin_id, state_dir)
    try:
        host.load()
    except BaseException as exc:
        why = str(exc) if isinstance(exc, PluginLoadError) else f"{type(exc).__name__}: {exc}"
        out.send({"fatal": f"plugin {opts.plugin_id} cannot load from {host.dir}: {why}"})
        return 2
    out.send({"ready": True, **host.describe()})
    warning = host.check_openclaw(opts.openclaw_version) if opts.openclaw_version else None
    if warning:
        out.send({"log": "warn", "msg": warning[:MAX_LOG]})
    serve(host, out, sys.stdin.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
