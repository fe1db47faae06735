"""Entry point of the artifact: `python3 fleet-<v>.pyz --version | install | status | rollback |
restart | doctor`.

Every subcommand prints exactly one JSON object on stdout (progress goes to stderr as
`{"step": ...}` lines) and exits 0 only on success, so the control side can parse one answer per
host. Bad arguments exit 2 with a message naming the flag and the fix.

The answer's fields are documented in fleet/installer/protocol.py (the control side reads them
with its `InstallerResult`); `doctor` exits with its `exit`: 0 healthy, 1 warnings, 2 critical.
Extra flags beyond docs/architecture.md: --owner (audit/lock), --timeout (restart and readiness
deadline), --lease (lock lease), --lock-wait, --keep (releases kept), --artifact,
--allow-unproven-openclaw (protocol.ALLOW_UNPROVEN_OPENCLAW), --fleet-lease (protocol.FLEET_LEASE).
The fault seam for tests is described in fleet/installer/faults.py.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from fleet.continuity.statelayout import StateLayout
from fleet.installer.protocol import (
    ALLOW_UNPROVEN_OPENCLAW,
    FLEET_LEASE,
    FLEET_MANAGER,
    LEASE_GIVE_BACK_ENV,
    MANAGERS,
    MAX_LEASE_S,
    MAX_WAIT_S,
    READY_TIMEOUT_S,
    STEP_SLACK_S,
    read_only_s,
    wait_problem,
    worst_case_s,
)


def read_manifest() -> dict:
    """The fleet_manifest.json embedded at the artifact's root (empty outside an artifact)."""
    import zipfile  # only `--version` reads it here (the supervisor never does)

    archive = sys.argv[0]
    try:
        with zipfile.ZipFile(archive) as zf:
            return json.loads(zf.read(StateLayout.MANIFEST).decode("utf-8"))
    except (OSError, KeyError, zipfile.BadZipFile, ValueError):
        return {}


class UsageError(Exception):
    pass


def _pairs(items: List[str], flag: str) -> Dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} {item!r}: expected key=value")
        out[key] = value
    return out


def seconds(text: str, maximum: float = MAX_WAIT_S) -> float:
    """A duration flag: a number of seconds from 0 to `maximum` (argparse names the flag in
    the error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds") from None
    problem = wait_problem(value, maximum)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def lease_seconds(text: str) -> float:
    """`--lease`: seconds, at most MAX_LEASE_S."""
    return seconds(text, MAX_LEASE_S)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fleet-<version>.pyz", description=__doc__)
    parser.add_argument("--version", action="store_true", help="print the embedded manifest")
    sub = parser.add_subparsers(dest="command")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", default=os.environ.get("OPENCLAW_STATE_DIR", "~/.openclaw"))
    common.add_argument("--manager", default=FLEET_MANAGER, choices=MANAGERS)
    common.add_argument("--manager-opt", action="append", default=[], metavar="K=V")
    common.add_argument("--owner", default=None, help="who runs this (audit and lock)")
    common.add_argument("--timeout", type=seconds, default=READY_TIMEOUT_S,
                        help="seconds for each restart and readiness wait (at most a day)")
    common.add_argument("--lease", type=lease_seconds, default=None,
                        help="lock lease in seconds (default: 900, or longer than the worst "
                             "case of restart + switch-back with this --timeout; at most 7 "
                             "days)")
    common.add_argument("--lock-wait", type=seconds, default=0.0,
                        help="seconds to wait for a busy lock before refusing (at most a day)")
    inst = sub.add_parser("install", parents=[common])
    inst.add_argument("--sha256", required=True)
    inst.add_argument("--artifact", default=None, help="default: this .pyz")
    inst.add_argument("--expect", action="append", default=[], metavar="ID=VERSION")
    inst.add_argument("--force", action="store_true", help="restart even if already active")
    inst.add_argument("--keep", type=int, default=5, help="releases to keep")
    inst.add_argument(FLEET_LEASE, dest="fleet_lease", default=None, metavar="RUN",
                      help="switch only while the deploy run RUN holds this host's fleet lease")
    inst.add_argument(ALLOW_UNPROVEN_OPENCLAW, dest="allow_unproven_openclaw",
                      action="store_true", help="go ahead on an OpenClaw this release was not "
                      "proven on (never on one older than it supports)")
    sub.add_parser("status", parents=[common])
    rb = sub.add_parser("rollback", parents=[common])
    rb.add_argument("--to", default=None, help="version, release dir name or SHA-256 prefix (4+ "
                    "hex digits); ambiguous ones are refused")
    rb.add_argument(FLEET_LEASE, dest="fleet_lease", default=None, metavar="RUN",
                    help="switch only while the run RUN holds this host's fleet lease")
    sub.add_parser("restart", parents=[common])
    sub.add_parser("stop", parents=[common], help="stop the gateway and leave it stopped")
    sub.add_parser("start", parents=[common], help="start a stopped gateway, wait until ready")
    sub.add_parser("remove", parents=[common], help="stop the gateway, take fleet's plugins out "
                   "of its config, delete fleet's releases and files; the agents' data stays")
    sub.add_parser("doctor", parents=[common], help="host and continuity health; changes nothing")
    sub.add_parser("supervise", parents=[common], help="run the gateway and start it again when "
                   "it fails (what the fleet manager starts; fleet/installer/supervision.py)")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    parser = _parser()
    args = parser.parse_args(args_list)
    if args.version:
        manifest = read_manifest()
        print(json.dumps({"version": manifest.get("version"),
                          "components": manifest.get("components", {})}, sort_keys=True))
        return 0
    if not args.command:
        parser.print_usage(sys.stderr)
        return 2
    if args.command == "supervise":  # a long-lived process of its own, not a command
        from fleet.installer import supervision

        return supervision.main(Path(os.path.expanduser(args.state_dir)).absolute())
    if args.command in READ_ONLY:
        # a hang-up ends it, even when its caller ignored SIGHUP (nohup) and that was inherited
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        _end_by(read_only_s(args.timeout), args.command)
    else:
        # A dropped ssh connection must not stop a host half-way: finish the transaction (its
        # outcome is in the audit log and `status`) even if nobody is left to read the answer.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    from fleet.installer.manager import ManagerError  # not before: `supervise` needs none of it

    try:
        result = run(args)
    except (UsageError, ManagerError) as exc:
        result = {"ok": False, "result": "error", "reason": str(exc)}
        _emit(result)
        return 2
    _emit(result)
    if args.command == "doctor" and result.get("ok"):
        return int(result.get("exit", 2))
    return 0 if result.get("ok") else 1


READ_ONLY = ("status", "doctor")  # change nothing: they may end at any moment


def _end_by(seconds: float, command: str) -> None:
    """End this process (answer included) after `seconds`: a read-only command abandoned by its
    caller (a dropped connection, a control side past its own timeout) does not stay behind.
    A hang-up (SIGHUP) ends it too, as it ends any plain command."""
    def expired(signum: int, frame: Any) -> None:
        _emit({"ok": False, "result": "error", "reason": f"{command} did not finish within "
                                                         f"{seconds:.0f} s (2 x --timeout + "
                                                         f"{STEP_SLACK_S:.0f} s) and gave up"})
        os._exit(1)  # threads or a child holding on must not keep it alive

    signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))


def _emit(result: dict) -> None:
    try:
        print(json.dumps(result, sort_keys=True, default=str), flush=True)
    except (OSError, ValueError):
        pass


def run(args: argparse.Namespace) -> dict:
    state_dir = Path(os.path.expanduser(args.state_dir)).absolute()
    from fleet.installer import transaction
    from fleet.installer.lock import DEFAULT_LEASE_S
    from fleet.installer.managers import make_manager

    manager = make_manager(args.manager, state_dir, _pairs(args.manager_opt, "--manager-opt"))
    owner = args.owner or transaction.default_owner()
    if args.lease is None:  # the lease must outlive our own worst case, or a peer takes over
        args.lease = max(DEFAULT_LEASE_S, worst_case_s(args.timeout) + 120)
    if args.command == "status":
        return transaction.status(state_dir, manager)
    if args.command == "doctor":
        # only `doctor` needs it, and with it most of fleet.continuity: importing it at the top
        # would add tens of ms to every install's start-up (docs/bench/log.md)
        from fleet.installer import doctor

        return doctor.run(state_dir, manager)
    if args.command == "install":
        if args.keep < 2:
            raise UsageError(f"--keep {args.keep}: keep at least 2 (active and previous)")
        artifact = Path(args.artifact or sys.argv[0]).absolute()
        return transaction.install(state_dir, artifact, args.sha256, manager, owner,
                                   _pairs(args.expect, "--expect"), force=args.force,
                                   timeout=args.timeout, keep=args.keep, lease_s=args.lease,
                                   lock_wait=args.lock_wait,
                                   allow_unproven=args.allow_unproven_openclaw,
                                   fleet_run=args.fleet_lease,
                                   give_back=os.environ.get(LEASE_GIVE_BACK_ENV) == "1")
    if args.command == "rollback":
        return transaction.rollback(state_dir, manager, owner, to=args.to,
                                    timeout=args.timeout, lease_s=args.lease,
                                    lock_wait=args.lock_wait, fleet_run=args.fleet_lease)
    if args.command in ("stop", "start", "remove"):
        act = {"stop": transaction.stop, "start": transaction.start,
               "remove": transaction.remove}[args.command]
        return act(state_dir, manager, owner, timeout=args.timeout, lease_s=args.lease,
                   lock_wait=args.lock_wait)
    return transaction.restart(state_dir, manager, owner, timeout=args.timeout,
                               lease_s=args.lease, lock_wait=args.lock_wait)
