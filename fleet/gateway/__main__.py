"""`python3 -m fleet.gateway` / `fleet-gateway`: run, start, stop, restart, status, call, init."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from fleet.continuity.paths import resolve_state_dir
from fleet.gateway import client, daemon, process
from fleet.gateway.layout import Layout

if TYPE_CHECKING:
    import argparse

MAX_SECONDS = 86400.0  # a day, as the installer's waits (fleet/installer/protocol.py)


def seconds(text: str) -> float:
    """A `--timeout`/`--retry` value: 0 to a day of seconds (1e300 overflowed the waits);
    argparse names the flag in the error."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds") from None
    if not 0 <= value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r}: use 0 to {MAX_SECONDS:.0f} seconds "
                                         "(a day)")
    return value


def _parser() -> argparse.ArgumentParser:
    import argparse  # not for a gateway the spawner starts (`main`)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", default=argparse.SUPPRESS,
                        help="OpenClaw state dir (default: OPENCLAW_STATE_DIR, "
                             "$OPENCLAW_HOME/.openclaw, ~/.openclaw)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print one JSON object")
    p = argparse.ArgumentParser(prog="fleet-gateway", parents=[common],
                                description="The fleet gateway: plugin host and agent sessions.")
    sub = p.add_subparsers(dest="cmd", metavar="command")
    sub.required = True
    sub.add_parser("run", parents=[common], help="run in the foreground")
    for name in ("start", "restart"):
        sp = sub.add_parser(name, parents=[common], help=f"{name} detached; wait until ready")
        sp.add_argument("--expect", action="append", default=[], metavar="ID=VERSION",
                        help="fail unless this plugin runs at this version (repeatable)")
        sp.add_argument("--timeout", type=seconds, default=30.0, help="readiness deadline (s)")
        sp.add_argument("--release", type=Path, default=None, metavar="DIR",
                        help="run the fleet package under DIR (default: the one running this "
                             "command); its realpath is used, so a later switch of a "
                             "`current` symlink does not change the running code")
    sp = sub.add_parser("stop", parents=[common], help="SIGTERM, then SIGKILL after --timeout")
    sp.add_argument("--timeout", type=seconds, default=daemon.STOP_GRACE_S)
    sub.add_parser("status", parents=[common], help="pid, uptime, versions, plugin health")
    sp = sub.add_parser(
        "call", parents=[common], help="send one request to the control socket",
        formatter_class=argparse.RawDescriptionHelpFormatter, description=CALL_HELP)
    sp.add_argument("op", help="health, session.start, session.turn, subagent.spawn, command, ...")
    sp.add_argument("args", nargs="*", metavar="key=value|key:=json",
                    help="request arguments: key=value sends a string, key:=json sends JSON")
    sp.add_argument("--json-args", help="request arguments as a JSON object ('-' = stdin)")
    sp.add_argument("--timeout", type=seconds, default=client.DEFAULT_TIMEOUT_S)
    sp.add_argument("--retry", type=seconds, default=client.DEFAULT_RETRY_S,
                    help="keep retrying a missing/refusing socket this long (s)")
    sp.add_argument("--pretty", action="store_true")
    sp = sub.add_parser("init", parents=[common], help="create a dev state dir, link plugins")
    sp.add_argument("--link-plugins-from", type=Path, default=None, metavar="DIR")
    return p


CALL_HELP = """\
Send one request to the gateway's control socket and print the answer.

Arguments:
  key=value       a string:           prompt="Ship the deploy pipeline"
  key:=json       any JSON value:     'steps:=["Working on it."]'  count:=3  dry:=true
  --json-args OBJ a JSON object as the base (- reads it from stdin); key=... items override it

Output: `command` (a `/mc ...` text command) prints the command's text as text; every other op
prints the JSON response. --json prints the JSON response for every op (for scripts).
Exit status: 0 ok, 1 the gateway answered not ok, 3 the gateway is not reachable.

Examples:
  python3 -m fleet.gateway call session.start agentId=main
  python3 -m fleet.gateway call command command="/mc state"
  python3 -m fleet.gateway call --json command command="/mc state"
"""


def parse_call_args(items: List[str], json_args: Optional[str]) -> Dict[str, Any]:
    """`key=value` is a string, `key:=value` is JSON; --json-args gives the base object."""
    args: Dict[str, Any] = {}
    if json_args is not None:
        raw = sys.stdin.read() if json_args == "-" else json_args
        try:
            base = json.loads(raw)
        except ValueError as exc:
            raise SystemExit(f"error: --json-args is not valid JSON: {exc}") from exc
        if not isinstance(base, dict):
            raise SystemExit("error: --json-args must be a JSON object")
        args.update(base)
    for item in items:
        if ":=" in item and item.index(":=") < item.index("=") + 1:
            key, _, raw = item.partition(":=")
            try:
                args[key] = json.loads(raw)
            except ValueError as exc:
                raise SystemExit(f"error: {item!r}: value after ':=' is not JSON: {exc}") from exc
        elif "=" in item:
            key, _, value = item.partition("=")
            args[key] = value
        else:
            raise SystemExit(f"error: {item!r}: use key=value (string) or key:=json")
    return args


def _emit(data: Dict[str, Any], as_json: bool, text: str, stream=None) -> None:
    """JSON always goes to stdout (one object, for scripts); text errors go to `stream`."""
    if as_json:
        print(json.dumps(data, sort_keys=True))
    else:
        print(text, file=stream or sys.stdout)


def _health_line(h: Dict[str, Any]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in sorted((h.get("versions") or {}).items()))
    return (f"gateway pid {h.get('pid')} ready: {versions or 'no plugins'} "
            f"(release {h.get('release')}, uptime {h.get('uptime_s')}s)")


def _cmd_status(layout: Layout, as_json: bool) -> int:
    st = daemon.status(layout)
    if not st["running"]:
        _emit(st, as_json, f"gateway is not running (state dir {layout.state_dir})")
        return 3
    health = st.get("health")
    if not health:
        _emit(st, as_json, f"gateway pid {st['pid']} is running but not answering: "
                           f"{st.get('error')}")
        return 1
    lines = [_health_line(health)]
    for pid, info in sorted((health.get("plugins") or {}).items()):
        state = "loaded" if info.get("loaded") else (
            f"FAILED: {info.get('error')}" if info.get("error") else "disabled")
        lines.append(f"  {pid} {info.get('version')}: {state}")
    _emit(st, as_json, "\n".join(lines))
    return 0 if health.get("ready") else 1


def _cmd_call(layout: Layout, ns: argparse.Namespace) -> int:
    payload = parse_call_args(ns.args, ns.json_args)
    payload["op"] = ns.op
    as_text = ns.op == "command" and not getattr(ns, "json", False)
    try:
        resp = client.request(layout.socket, payload, ns.timeout, ns.retry)
    except client.ClientError as exc:
        if as_text:
            print(f"error: {exc}", file=sys.stderr)
        else:
            print(json.dumps({"ok": False, "error": str(exc)}))
        return 3
    text = _command_text(resp) if as_text else None
    if text is not None:
        print(text)
    elif as_text and not resp.get("ok"):
        print(f"error: {resp.get('error')}", file=sys.stderr)
    else:
        print(json.dumps(resp, indent=2 if ns.pretty else None, ensure_ascii=False))
    return 0 if resp.get("ok") else 1


def _command_text(resp: Dict[str, Any]) -> Optional[str]:
    """The text of a successful `command` answer (`{"text": ...}`), else None (print JSON)."""
    result = resp.get("result")
    if resp.get("ok") and isinstance(result, dict) and isinstance(result.get("text"), str):
        return result["text"].rstrip("\n")
    return None


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spawned = process.spawned_state_dir(args)
    if spawned is not None:  # `--state-dir D run`, as every spawner starts a gateway
        ns: Any = SimpleNamespace(cmd="run", state_dir=spawned, json=False)
    else:
        ns = _parser().parse_args(args)
    os.umask(os.umask(0o077) | 0o077)  # what the gateway creates is private, whatever the umask
    as_json = getattr(ns, "json", False)
    state_dir = getattr(ns, "state_dir", None)
    layout = Layout(Path(state_dir).expanduser() if state_dir else resolve_state_dir())
    try:
        if ns.cmd == "run":
            return daemon.run(layout)
        if ns.cmd == "start":
            h = daemon.start(layout, daemon.parse_expects(ns.expect), ns.timeout, ns.release)
            _emit(h, as_json, _health_line(h) + f" in {h['ready_s']}s")
            return 0
        if ns.cmd == "restart":
            h = daemon.restart(layout, daemon.parse_expects(ns.expect), ns.timeout,
                               root=ns.release)
            _emit(h, as_json, f"{h['previous']['message']}; " + _health_line(h)
                  + f" (restart took {h['restart_s']}s)")
            return 0
        if ns.cmd == "stop":
            res = daemon.stop(layout, ns.timeout)
            _emit(res, as_json, res["message"])
            return 0
        if ns.cmd == "status":
            return _cmd_status(layout, as_json)
        if ns.cmd == "call":
            return _cmd_call(layout, ns)
        if ns.cmd == "init":
            from fleet.gateway.scaffold import init  # only `init` needs sessions and transcripts

            res = init(layout, ns.link_plugins_from)
            links = ", ".join(f"{k} ({v})" for k, v in sorted(res["plugins"].items()))
            _emit(res, as_json, f"state dir {res['stateDir']} ready; plugins: {links or 'none'}")
            return 0
    except (daemon.DaemonError, RuntimeError, ValueError, OSError) as exc:
        _emit({"ok": False, "error": str(exc)}, as_json, f"error: {exc}", sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
