"""The shell lines the control side sends to a host: few round trips, same for ssh and local.

A deploy costs one command per host besides the fleet lease's take (which also answers a no-op
redeploy: fleet.deploy.lease): `install` (the installer on the stored artifact, which gives the
lease back when done), or, when the take said the host lacks the artifact, `upload_and_install`
with the artifact as its stdin (`patch_and_install` with a patch of the artifact the host's
current release came from, fleet.deploy.artifactpatch, when that is smaller). `check` (dry
runs) says whether the artifact with that SHA-256 is already there and prints the installed
release's status in the same round trip. All host work is done by the installer inside the
artifact (fleet.installer), never by ad-hoc shell here; commands run from `/` so a `fleet`
directory in the login directory can never shadow the release's package.
"""

from __future__ import annotations

import shlex

from fleet.continuity.statelayout import StateLayout
from fleet.deploy.artifactpatch import APPLY_PY
from fleet.deploy.connection import shell_path
from fleet.deploy.inventory import Host
from fleet.installer.protocol import ALLOW_UNPROVEN_OPENCLAW, FLEET_LEASE, LEASE_GIVE_BACK_ENV

HAVE, MISSING = "FLEET-HAVE-ARTIFACT", "FLEET-NO-ARTIFACT"
# How fleet's host processes start Python: without `site` (most of an interpreter start's CPU:
# site-packages' .pth files, sitecustomize), as they use the standard library only. ISOLATED
# also ignores PYTHON* variables and the user's site dir, where nothing is needed from them;
# NO_SITE keeps PYTHONPATH, which names the release to run.
NO_SITE = "-S"
ISOLATED = "-I -S"
NOT_INSTALLED = ('{"ok": true, "result": "status", "current": null, "installed": false, '
                 '"ready": false, "problem": "not installed"}')


class Command(str):
    """A shell line, plus what it asks of the host (`intent`: the installer's argv, the upload's
    size): a simulated host (lab/sim) does the same without a shell. Everywhere else a `str`."""

    intent: dict


def _command(text: str, **intent: object) -> Command:
    line = Command(text)
    line.intent = intent
    return line


def _in_state(rel: str) -> str:
    """A path of the state dir in a shell line that has set `$S` to it, double-quoted."""
    return f'"$S/{rel}"'


_INSTALLER_IN_CURRENT = _in_state(f"{StateLayout.CURRENT}/{StateLayout.RELEASE_INSTALLER}")


def common_args(host: Host, owner: str) -> list[str]:
    args = ["--manager", host.manager, "--owner", owner,
            "--timeout", str(int(host.timeouts.ready))]
    for key, value in sorted(host.manager_options.items()):
        args += ["--manager-opt", f"{key}={value}"]
    lock_wait = host.timeouts.lock
    if lock_wait:  # wait this long for a busy host lock before refusing
        args += ["--lock-wait", str(lock_wait)]
    return args


def _state(host: Host) -> str:
    return shell_path(host.state_dir)


def _installer_from_current(host: Host, sub: str, owner: str, extra: list[str]) -> Command:
    argv = [sub, "--state-dir", host.state_dir, *common_args(host, owner), *extra]
    args = " ".join(shlex.quote(a) for a in argv)
    return _command(
        f'S={_state(host)}; if [ -f {_INSTALLER_IN_CURRENT} ]; then '
        f'cd / && PYTHONPATH={_in_state(StateLayout.CURRENT)} exec {shlex.quote(host.python)} '
        f"{NO_SITE} -m fleet.installer {args}; else echo {shlex.quote(NOT_INSTALLED)}; fi",
        op="current", argv=argv)


def status(host: Host, owner: str) -> Command:
    return _installer_from_current(host, "status", owner, [])


def rollback(host: Host, owner: str, to: str | None, lease_run: str | None = None,
             via: str | None = None, run: str | None = None) -> Command:
    """`lease_run`: switch only while that run holds the host's fleet lease (an installer that
    knows `--fleet-lease` for rollback: one of a release built with this module). `via` (with
    `run`, the run's id): a release whose installer to run when the host has it unpacked, which
    knows that guard, so the rollback is guarded whatever the active release is (a rollout
    takes hosts back with its own release's installer); else the active release's, as without
    `via`."""
    extra = ["--to", to] if to else []
    fallback = _installer_from_current(
        host, "rollback", owner, extra + ([FLEET_LEASE, lease_run] if lease_run else []))
    if not via or not run:
        return fallback
    rel = f"{StateLayout.RELEASES}/{via}"
    argv = ["rollback", "--state-dir", host.state_dir, *common_args(host, owner), *extra,
            FLEET_LEASE, run]
    args = " ".join(shlex.quote(a) for a in argv)
    where = f'"$S"/{shlex.quote(rel)}'
    return _command(
        f'S={_state(host)}; if [ -f {where}/{StateLayout.RELEASE_INSTALLER} ]; then '
        f'cd / && PYTHONPATH={where} exec {shlex.quote(host.python)} {NO_SITE} -m fleet.installer '
        f"{args}; "
        f"else {fallback}; fi",
        op="release", release=via, argv=argv, fallback=fallback.intent)


def restart(host: Host, owner: str) -> Command:
    return _installer_from_current(host, "restart", owner, [])


def gateway(host: Host, owner: str, action: str) -> Command:
    """`stop` or `start` the host's gateway through its active release's installer."""
    return _installer_from_current(host, action, owner, [])


def remove(host: Host, owner: str) -> Command:
    """Take fleet off the host through its active release's installer (`fleet remove`);
    NOT_INSTALLED when there is none."""
    return _installer_from_current(host, "remove", owner, [])


def doctor(host: Host, owner: str) -> Command:
    """The installed release's `doctor` (read-only health); NOT_INSTALLED when there is none."""
    return _installer_from_current(host, "doctor", owner, [])


CHECK_PY = """\
import hashlib, os, sys
state, sha, create = os.path.expanduser(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
art = os.path.join(state, @ARTIFACT@.format(sha256=sha))
if create:
    os.makedirs(os.path.dirname(art), exist_ok=True)
try:
    with open(art, "rb") as fh:
        have = hashlib.sha256(fh.read()).hexdigest() == sha
except OSError:
    have = False
print("@HAVE@" if have else "@MISSING@", flush=True)
cur = os.path.join(state, @CURRENT@)
if os.path.isfile(os.path.join(cur, @RELEASE_INSTALLER@)):
    sys.path.insert(0, cur)
    from fleet.installer.cli import main
    sys.exit(main(["status"] + sys.argv[4:]))
print(@NOT_INSTALLED@)
"""
for _key, _value in (("@HAVE@", HAVE), ("@MISSING@", MISSING),
                     ("@NOT_INSTALLED@", repr(NOT_INSTALLED)),
                     ("@ARTIFACT@", repr(StateLayout.ARTIFACT)),
                     ("@CURRENT@", repr(StateLayout.CURRENT)),
                     ("@RELEASE_INSTALLER@", repr(StateLayout.RELEASE_INSTALLER))):
    CHECK_PY = CHECK_PY.replace(_key, _value)


def check(host: Host, sha256: str, owner: str, create: bool = True) -> str:
    """One Python process: make the artifact dir (unless a dry run), say HAVE/MISSING, status.

    HAVE only if the stored file really has this SHA-256, so a corrupt or partial upload is sent
    again instead of failing every later deploy.
    """
    args = [host.state_dir, sha256, "1" if create else "0", "--state-dir", host.state_dir,
            *common_args(host, owner)]
    return (f"cd / && exec {shlex.quote(host.python)} {ISOLATED} -c {shlex.quote(CHECK_PY)} "
            + " ".join(shlex.quote(a) for a in args))


def install(host: Host, sha256: str, owner: str, force: bool = False,
            if_present: int = 0, allow_unproven: bool = False,
            lease_run: str | None = None) -> Command:
    """The installer on the stored artifact. With `if_present=<artifact size>`: the installer
    only if a stored copy of that size is there, else MISSING (the control side uploads and
    calls again). Whether the host already runs the artifact, ready, was asked by the run's lease
    take (fleet.deploy.lease: a no-op redeploy never gets here), and the installer judges it
    again under its lock. `allow_unproven`: ALLOW_UNPROVEN_OPENCLAW; `lease_run`: the run's
    fleet lease, which the installer must still find before it switches (a run that gave up on
    a hung host releases it: that installer then changes nothing), given back by the installer
    when it is done (`lease_given_back` in its answer)."""
    args = ["install", "--state-dir", host.state_dir, "--sha256", sha256,
            *common_args(host, owner)]
    if force:
        args.append("--force")
    if allow_unproven:
        args.append(ALLOW_UNPROVEN_OPENCLAW)
    if lease_run:
        args += [FLEET_LEASE, lease_run]
    art = _in_state(StateLayout.ARTIFACT.format(sha256=sha256))
    run = _launch(host, art, args, lease_run)
    intent = {"op": "install", "argv": args, "sha256": sha256, "if_present": if_present}
    if not if_present:
        return _command(f"S={_state(host)}; {run}", **intent)
    # One round trip when the host has the artifact (a retry, a stored copy): no status, no
    # hash here; the installer verifies the SHA-256 itself. Otherwise say MISSING (dir made).
    art_dir = _in_state(StateLayout.ARTIFACTS)
    return _command(
        f'S={_state(host)}; if [ -f {art} ] && [ "$(wc -c < {art})" -eq {if_present} ]; '
        f'then {run}; else mkdir -p {art_dir} || exit 1; echo {MISSING}; fi', **intent)


def _launch(host: Host, program: str, args: list[str], lease_run: str | None) -> str:
    """`python3 <program> <args>` from `/`, as the installer runs; with the run's lease, the
    installer gives it back when done (no release process after it)."""
    quoted = " ".join(shlex.quote(a) for a in args)
    give_back = f"{LEASE_GIVE_BACK_ENV}=1 " if lease_run else ""
    return f"cd / && {give_back}exec {shlex.quote(host.python)} {ISOLATED} {program} {quoted}"


INCOMPLETE = "FLEET-UPLOAD-INCOMPLETE"


def upload_and_install(host: Host, sha256: str, size: int, owner: str,
                       force: bool = False, allow_unproven: bool = False,
                       lease_run: str | None = None) -> Command:
    """Take the artifact on stdin, then run the installer on it: one round trip and one channel
    for the upload and the install (fleet.deploy.connection's `send_and_run`).

    The bytes go to a temp name next to the final one (`*.part`, pruned by the installer when
    stale); only a file of exactly `size` bytes is renamed into place (atomic, same dir), so a
    connection dropped mid-upload leaves no artifact under its final name, and the temp file is
    removed. Anything short prints INCOMPLETE and exits 1 without running the installer. The
    SHA-256 is then checked by the installer before it unpacks anything, as after any upload.
    """
    artifact = StateLayout.ARTIFACT.format(sha256=sha256)
    final, part = _in_state(artifact), _in_state(f"{artifact}.$$.part")
    arts = _in_state(StateLayout.ARTIFACTS)  # made only when missing: a process less
    receive = (f'{{ [ -d {arts} ] || mkdir -p {arts}; }} && cat > {part} && '
               f'[ "$(wc -c < {part})" -eq {int(size)} ] && mv -f {part} {final} '
               f"|| {{ rm -f {part}; echo {INCOMPLETE}; exit 1; }}")
    run = install(host, sha256, owner, force, allow_unproven=allow_unproven,
                  lease_run=lease_run)
    return _command(f"S={_state(host)}; {receive}; {run}", op="upload", size=int(size),
                    install=run.intent)


def patch_and_install(host: Host, sha256: str, size: int, base_sha256: str, owner: str,
                      force: bool = False, allow_unproven: bool = False,
                      lease_run: str | None = None) -> Command:
    """As upload_and_install, with a patch on stdin instead of the artifact: one Python process
    rebuilds the artifact from it and the stored `base_sha256` artifact
    (fleet.deploy.artifactpatch) into a temp name, renames it into place only when it has
    exactly this size and SHA-256, and runs its installer as `install` would. A patch that does
    not rebuild this artifact leaves nothing, prints PATCH_FAILED and exits 1 without running
    the installer: the control side then sends the artifact whole."""
    artifact = StateLayout.ARTIFACT.format(sha256=sha256)
    final, part = _in_state(artifact), _in_state(f"{artifact}.$$.part")
    base = _in_state(StateLayout.ARTIFACT.format(sha256=base_sha256))
    run = install(host, sha256, owner, force, allow_unproven=allow_unproven,
                  lease_run=lease_run)
    program = (f"-c {shlex.quote(APPLY_PY)} {base} {part} {final} {shlex.quote(sha256)} "
               f"{int(size)}")
    return _command(f"S={_state(host)}; {_launch(host, program, run.intent['argv'], lease_run)}",
                    op="patch", size=int(size), base=base_sha256, install=run.intent)
