"""The deploy API the tasks call (and that Python callers, the harness and benchmarks can call).

`deploy`, `status`, `rollback` and `restart` each run one per-host function through the runner
and return a list of HostResult (inventory order). The per-host functions connect, send the few
commands in fleet.deploy.commands, and turn the installer's one JSON answer into a HostResult.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import math
import re
import socket
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fleet.continuity.openclawrange import CompatError, Support
from fleet.continuity.statelayout import StateLayout, release_name
from fleet.deploy import artifactpatch, collector, commands, hostkeys, lease
from fleet.deploy.connection import ConnectionError_, Connections, connect, open_files_limit
from fleet.deploy.inventory import Host
from fleet.deploy.plan import plan_host
from fleet.deploy.runner import HostResult, Progress, RunOptions, check_parallel, run
from fleet.installer.protocol import (
    HostStatus,
    InstallerAnswerError,
    InstallerResult,
    is_sha_mismatch,
    openclaw_refusal,
    release_summary,
    worst_case_s,
)

ProgressSink = Callable[[str, str, str], None]


@dataclass(frozen=True)
class ArtifactRef:
    path: Path
    sha256: str
    version: str
    components: dict
    reused: bool = False  # an intact earlier build from the same sources was used as is


def load_artifact(path: str | Path) -> ArtifactRef:
    """An existing .pyz: its SHA-256 and embedded manifest."""
    path = Path(path).absolute()
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        with zipfile.ZipFile(path) as zf:
            manifest = json.loads(zf.read(StateLayout.MANIFEST))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not a fleet artifact ({exc}); build one with "
                         "`invoke build` (or `fleet build`), or pass another --artifact") from None
    return ArtifactRef(path, digest, str(manifest["version"]), manifest.get("components", {}))


def build_artifact(root: Path, out_dir: Path) -> ArtifactRef:
    """Reuse the build in `out_dir` if it matches the sources in `root`, else build it.

    Builds are reproducible, so either way the SHA-256 names exactly these sources and hosts
    that already have it get no upload and no restart.
    """
    from fleet.release.artifact import ensure_artifact

    art, reused = ensure_artifact(root, out_dir)
    return ArtifactRef(Path(art.path), art.sha256, str(art.version), dict(art.components),
                       reused)


def default_owner() -> str:
    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def command_timeout(host: Host) -> float:
    return host.timeouts.command


def install_timeout(host: Host) -> float:
    """Room for the installer's worst case: restart + readiness, then switch-back restart +
    readiness, so the control side never cuts a host off in the middle of its rollback."""
    return max(command_timeout(host), worst_case_s(host.timeouts.ready) + 30) + host.timeouts.lock


def deadline_for(host: Host) -> float:
    """A host is abandoned after connect + transfer + check + install + slack."""
    return (host.timeouts.connect + host.timeouts.transfer + command_timeout(host)
            + install_timeout(host) + 30)


def parse_json(stdout: str) -> dict | None:
    """The installer's JSON object (its last line that parses as one)."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


class _Timer:
    """Announces each control-side step and records how long it took (benchmarks read these)."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.steps: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        self.progress(name, "")
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.steps[name] = round(time.monotonic() - t0, 4)


def _failure(host: Host, exc: BaseException, timer: _Timer, t0: float) -> HostResult:
    note = str(exc) if isinstance(exc, ConnectionError_) else f"{type(exc).__name__}: {exc}"
    kind = exc.kind if isinstance(exc, ConnectionError_) else "failed"
    return HostResult(host.name, kind, False, note=note, steps=timer.steps,
                      duration_s=time.monotonic() - t0)


def stderr_tail(stderr: str, lines: int = 5) -> str:
    """The host's last stderr lines, without the installer's own `{"step": ...}` lines."""
    kept = [line.strip() for line in stderr.strip().splitlines()
            if line.strip() and not line.lstrip().startswith('{"step"')]
    return " | ".join(kept[-lines:])[-600:]


def _installer_result(host: Host, res, timer: _Timer, t0: float, what: str,
                      status: bool = False, absent: str | None = None) -> HostResult:
    """The installer's answer as a HostResult; `status`: a status answer becomes `ok` with the
    active release and, if the gateway is not ready, why not; `absent`: the (ok) result of a
    host with nothing installed, else that is a failure."""
    data = parse_json(res.stdout)
    try:
        answer = None if data is None else InstallerResult.from_dict(data, host.name)
    except InstallerAnswerError as exc:
        return HostResult(host.name, "failed", False, steps=timer.steps,
                          duration_s=time.monotonic() - t0,
                          note=f"{what} gave an answer fleet cannot read: {exc}",
                          data={"exit_code": res.exit_code, "answer": data})
    if answer is None and res.exit_code == 2 and f"invalid choice: '{what}'" in res.stderr:
        return HostResult(host.name, "failed", False, steps=timer.steps,
                          duration_s=time.monotonic() - t0,
                          note=f"the release active on {host.name} predates `{what}` (its "
                               f"installer does not know it); deploy this version of fleet "
                               f"there first, then {what} again",
                          data={"exit_code": res.exit_code})
    if answer is None:
        tail = stderr_tail(res.stderr) or " ".join(res.stdout.strip().splitlines()[-3:])[:300]
        return HostResult(host.name, "failed", False, steps=timer.steps,
                          duration_s=time.monotonic() - t0,
                          note=f"{what} failed on the host (exit {res.exit_code}): {tail}",
                          data={"exit_code": res.exit_code, "stderr_tail": tail})
    if absent and answer.result == "status" and data.get("installed") is False:
        return HostResult(host.name, absent, True, steps=timer.steps,
                          duration_s=time.monotonic() - t0,
                          note=f"no release is installed on {host.name}", data=data)
    if not status and answer.result == "status" and data.get("installed") is False:
        # the shell's answer where no release is installed (commands.NOT_INSTALLED): nothing
        # to restart or roll back; was reported `status`, ok
        return HostResult(host.name, "failed", False, steps=timer.steps,
                          duration_s=time.monotonic() - t0,
                          note=f"nothing to {what}: no release is installed on {host.name}; "
                               "deploy one first", data=data)
    if status and answer.status is not None:
        current = answer.status.current
        return HostResult(host.name, "ok", answer.ok, from_release=current, to_release=current,
                          duration_s=time.monotonic() - t0,
                          note="" if answer.status.ready else str(answer.status.problem or ""),
                          steps=timer.steps, data=answer.data, status=answer.status)
    steps = dict(timer.steps)
    steps.update({f"host.{k}": v for k, v in answer.steps.items()})
    notes = [n for n in [answer.reason, *answer.notes] if n]
    if answer.result == "failed" and stderr_tail(res.stderr):
        answer.data["stderr_tail"] = stderr_tail(res.stderr)
        notes.append(f"host stderr: {answer.data['stderr_tail']}")
    return HostResult(host.name, answer.result, answer.ok, from_release=answer.from_release,
                      to_release=answer.to_release, duration_s=time.monotonic() - t0,
                      note="; ".join(notes), steps=steps, data=answer.data)


def _reason(answer: dict | None) -> str:
    """The reason an installer answer gives ("" for none, or for an answer fleet cannot read:
    `_installer_result` reports that one)."""
    try:
        return "" if answer is None else InstallerResult.from_dict(answer).reason
    except InstallerAnswerError:
        return ""


def _step_relay(progress: Progress, what: str = "install") -> Callable[[str], None]:
    """Relays the installer's `{"step": ...}` stderr lines as `<what>: <step>` progress."""

    def relay(line: str) -> None:
        try:
            step = json.loads(line).get("step")
        except (ValueError, AttributeError):
            return
        if step:
            progress(f"{what}: {step}", "")

    return relay


def _open(host: Host, conns: Connections | None):
    return conns.get(host) if conns is not None else connect(host)


def _done(host: Host, conn, conns: Connections | None, failed: bool) -> None:
    """Close a connection of its own; a shared one stays open unless it failed."""
    if conns is None:
        if conn is not None:
            conn.close()
    elif failed:
        conns.drop(host)


def deploy_host(host: Host, artifact: ArtifactRef, progress: Progress, owner: str,
                force: bool = False, dry_run: bool = False,
                conns: Connections | None = None, stored: str | None = None,
                allow_unproven: bool = False, lease_run: str | None = None,
                give_up: Callable[[], None] | None = None,
                base: artifactpatch.Base | None = None) -> HostResult:
    """Check, upload if the host lacks this SHA, run the installer; or only plan (dry run).
    With `conns`, over the run's shared connection to the host (see Connections); `stored`:
    what the host said of the artifact when the lease was taken (fleet.deploy.lease);
    `allow_unproven`: the installer's ALLOW_UNPROVEN_OPENCLAW; `lease_run`: the run's fleet
    lease, which the installer must still find on the host when it switches; `give_up`: gives
    that lease back on this host when the installer's answer never came (it may still be at
    work there, and must not switch once fleet has stopped waiting), before the read-back;
    `base`: the artifact the host's current release came from, which the upload may patch."""
    t0 = time.monotonic()
    timer = _Timer(progress)
    conn = None
    failed = True
    try:
        with timer.step("connect"):
            conn = _open(host, conns)
        if not dry_run:
            try:
                result = _install_host(host, artifact, progress, owner, force, conn, timer, t0,
                                       stored, allow_unproven, lease_run, base)
            except ConnectionError_ as exc:  # dropped mid-upload or mid-install
                if conns is not None:
                    conns.drop(host)
                result = _failure(host, exc, timer, t0)
            if not result.ok and _unanswered(result):  # say what the host runs now
                if give_up is not None:
                    give_up()
                _read_back(host, result, owner, conns)
            failed = False  # a dropped connection was dropped above
            return result
        with timer.step("check"):
            res = conn.run(commands.check(host, artifact.sha256, owner, create=not dry_run),
                           command_timeout(host))
        lines = res.stdout.strip().splitlines()
        if res.exit_code != 0 or not lines or lines[0] not in (commands.HAVE, commands.MISSING):
            tail = " ".join((res.stdout + res.stderr).strip().splitlines()[-3:])
            raise ConnectionError_(f"{host.name}: check failed (exit {res.exit_code}): "
                                   f"{tail[:300]}")
        have = lines[0] == commands.HAVE
        answer = parse_json("\n".join(lines[1:]))
        try:
            status = HostStatus() if answer is None else HostStatus.from_dict(answer, host.name)
        except InstallerAnswerError as exc:
            raise ConnectionError_(f"check gave a status fleet cannot read: {exc}") from None
        plan = plan_host(host.name, status, have, artifact.version, artifact.sha256,
                         artifact.path.stat().st_size, force)
        failed = False
        return HostResult(host.name, "planned", plan.action != "blocked",
                          from_release=status.current,
                          to_release={"release": plan.target},
                          duration_s=time.monotonic() - t0, note=plan.describe(),
                          steps=timer.steps, data={"plan": plan.as_dict(), "status": status.data},
                          status=status)
    except Exception as exc:
        return _failure(host, exc, timer, t0)
    finally:
        _done(host, conn, conns, failed)


def _install_host(host: Host, artifact: ArtifactRef, progress: Progress, owner: str,
                  force: bool, conn, timer: _Timer, t0: float,
                  stored: str | None = None, allow_unproven: bool = False,
                  lease_run: str | None = None,
                  base: artifactpatch.Base | None = None) -> HostResult:
    """Run the installer on the stored artifact; upload first only when the host lacks it (or
    the stored copy is not this artifact). 1 round trip for a redeploy; for a new release 1
    (upload and install in one, when the lease take said the host lacks the artifact) or 2; no
    status or hash process: the installer verifies the SHA-256 itself."""
    if stored == "missing":  # said by the lease take, under this run's lease: nothing to try
        return _upload_and_install(host, artifact, progress, owner, force, conn, timer, t0,
                                   allow_unproven, lease_run, base)
    with timer.step("install"):
        res = conn.run(commands.install(host, artifact.sha256, owner, force,
                                        if_present=artifact.path.stat().st_size,
                                        allow_unproven=allow_unproven, lease_run=lease_run),
                       install_timeout(host), on_stderr_line=_step_relay(progress))
    first = (res.stdout.strip().splitlines() or [""])[0]
    answer = parse_json(res.stdout)
    reason = _reason(answer)
    # MISSING, or a stored copy that is not this artifact: its SHA-256 differs, or it is so
    # damaged Python cannot even run it as a zipapp. Upload it again and install once more.
    # (An installer that died without answering for any other reason is not retried.)
    unrunnable = answer is None and res.exit_code != 0 and re.search(
        r"zip|__main__", res.stderr, re.IGNORECASE) is not None
    if first == commands.MISSING or unrunnable or is_sha_mismatch(reason):
        return _upload_and_install(host, artifact, progress, owner, force, conn, timer, t0,
                                   allow_unproven, lease_run)
    result = _installer_result(host, res, timer, t0, "installer")
    result.data["uploaded"] = False
    return result


READ_BACK_S = 30.0  # at most, for the status read after an install that gave no answer


def _unanswered(result: HostResult) -> bool:
    """An install that ended without the installer's answer: the connection dropped, or the
    installer died (killed, power cut) and printed nothing; the host may have switched."""
    return (result.result == "failed" and result.from_release is None
            and result.to_release is None)


def _read_back(host: Host, result: HostResult, owner: str, conns: Connections | None) -> None:
    """Fill in what the host runs after an unanswered install (`to` and a note), read with the
    installed release's `status` over a fresh connection; nothing when it cannot be read. A
    report of `- -> - failed` for a host that did switch would hide what runs there."""
    conn = None
    try:
        conn = _open(host, conns)
        res = conn.run(commands.status(host, owner), min(command_timeout(host), READ_BACK_S))
        answer = InstallerResult.from_dict(parse_json(res.stdout), host.name)
    except Exception:  # unreadable: the report stays as it was
        if conns is not None:
            conns.drop(host)
        elif conn is not None:
            conn.close()
        return
    if conns is None:
        conn.close()
    found = answer.status
    if found is None:
        return
    result.to_release = found.current
    state = "gateway ready" if found.ready else f"gateway not ready: {found.problem or '?'}"
    runs = (found.current or {}).get("release") or "no release"
    lock = found.lock
    held = "" if lock is None else (
        f"; the installer's lock is still there ({lock.owner}, pid {lock.pid}"
        + (f", stale: {lock.stale})" if lock.stale else ", still running)"))
    result.note = (result.note + "; " if result.note else "") + (
        f"read afterwards, the host runs {runs} ({state}){held}")
    result.data["host_after"] = {"current": found.current, "ready": found.ready,
                                 "problem": found.problem,
                                 "lock": None if lock is None else lock.owner}


def _upload_and_install(host: Host, artifact: ArtifactRef, progress: Progress, owner: str,
                        force: bool, conn, timer: _Timer, t0: float,
                        allow_unproven: bool = False, lease_run: str | None = None,
                        base: artifactpatch.Base | None = None) -> HostResult:
    """Send the artifact as the stdin of the command that stores it and runs the installer
    (commands.upload_and_install): one round trip; the steps `upload` (until the host has every
    byte) and `install` (the rest) are timed apart. With `base` (what the host's current
    release came from), a patch of it instead when that saves at least half the bytes
    (fleet.deploy.artifactpatch); a patch the host cannot rebuild the artifact from is followed
    by the whole artifact, in a second round trip."""
    size = artifact.path.stat().st_size
    patch = artifactpatch.plan(artifact.path, base)
    sent = {"uploaded": True, "upload_bytes": size, "patched_from": None}
    if patch is not None:
        res = _send(conn, host, progress, timer, patch.data, commands.patch_and_install(
            host, artifact.sha256, size, patch.base_sha256, owner, force, allow_unproven,
            lease_run))
        sent.update(upload_bytes=len(patch.data), patched_from=patch.base_sha256)
        if _last_line(res.stdout) == artifactpatch.PATCH_FAILED:
            why = stderr_tail(res.stderr) or "the rebuilt artifact was not the one built"
            res = _send(conn, host, progress, timer, artifact.path, commands.upload_and_install(
                host, artifact.sha256, size, owner, force, allow_unproven, lease_run))
            sent.update(upload_bytes=len(patch.data) + size, patched_from=None,
                        patch_failed=why)
    else:
        res = _send(conn, host, progress, timer, artifact.path, commands.upload_and_install(
            host, artifact.sha256, size, owner, force, allow_unproven, lease_run))
    if _last_line(res.stdout) == commands.INCOMPLETE:
        said = stderr_tail(res.stderr)  # e.g. the artifacts dir could not be made or written
        raise ConnectionError_(f"{host.name}: upload of {artifact.path.name} failed: the host "
                               f"did not store all {size} bytes (nothing was installed)"
                               + (f": {said}" if said else ""))
    result = _installer_result(host, res, timer, t0, "installer")
    result.data.update(sent)
    return result


def _last_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[-1]


def _send(conn, host: Host, progress: Progress, timer: _Timer, source: Path | bytes,
          command: str):
    """One upload round trip (`source` as the stdin of `command`), its time added to the steps
    `upload` (until every byte is sent) and `install` (the rest)."""
    progress("upload", "")
    started = [time.monotonic()]
    steps = timer.steps

    def add(step: str) -> None:
        steps[step] = round(steps.get(step, 0.0) + time.monotonic() - started[0], 4)
        started[0] = time.monotonic()

    done = []

    def sent() -> None:
        done.append(True)
        add("upload")
        progress("install", "")

    try:
        return conn.send_and_run(source, command, host.timeouts.transfer, install_timeout(host),
                                 on_stderr_line=_step_relay(progress), on_sent=sent)
    finally:  # the step under way when it ended: still the upload, or the install after it
        add("install" if done else "upload")


def _simple_host(host: Host, progress: Progress, command: str, what: str,
                 relay: bool = False, timeout: float | None = None,
                 status: bool = False, conns: Connections | None = None,
                 absent: str | None = None) -> HostResult:
    t0 = time.monotonic()
    timer = _Timer(progress)
    conn = None
    failed = True
    try:
        with timer.step("connect"):
            conn = _open(host, conns)
        with timer.step(what):
            res = conn.run(command, timeout or command_timeout(host),
                           on_stderr_line=_step_relay(progress, what) if relay else None)
        failed = False
        return _installer_result(host, res, timer, t0, what, status, absent)
    except Exception as exc:
        return _failure(host, exc, timer, t0)
    finally:
        _done(host, conn, conns, failed)


def _run(hosts: list[Host], work, sink: ProgressSink, options: RunOptions | None,
         deadline: Callable[[Host], float] = deadline_for):
    options = options or RunOptions()
    options.deadline = deadline
    return run(hosts, work, sink, options)


def lease_time(hosts: list[Host], options: RunOptions | None,
               deadline: Callable[[Host], float] = deadline_for) -> float:
    """How long a run's fleet lease lasts if the run dies: every batch at its slowest host's
    deadline, plus a margin. A finished run releases it at once."""
    parallel = max(1, (options or RunOptions()).parallel or 1)
    rounds = max(1, math.ceil(len(hosts) / parallel))
    return rounds * max((deadline(h) for h in hosts), default=600.0) + 60.0


def leased(hosts: list[Host], owner: str, options: RunOptions | None,
           work: Callable[[Host, Progress, Connections, lease.Lease], HostResult],
           sink: ProgressSink,
           deadline: Callable[[Host], float] = deadline_for) -> list[HostResult]:
    """`work` on every host under the fleet lease, as a restart runs (see `_leased`): refused as
    a whole where a maintenance lock or another run holds a host. `deadline`: how long a host
    may take (it sizes the lease)."""
    return _leased(hosts, owner, options, work, sink, deadline=deadline)


def _leased(hosts: list[Host], owner: str, options: RunOptions | None,
            work: Callable[[Host, Progress, Connections, lease.Lease], HostResult],
            sink: ProgressSink, artifact: ArtifactRef | None = None,
            unchanged: bool = False,
            deadline: Callable[[Host], float] = deadline_for) -> list[HostResult]:
    """Run `work(host, progress, conns, lease)` on every host holding the fleet lease there; refused
    as a whole if another run holds it anywhere (fleet.deploy.lease). A host whose take
    answered late is worked on once its own take is decided; one the take could not reach is
    reported, not tried again. One connection per host (`conns`) serves the take, the work and
    the release. With `artifact`, the take also asks each host whether it has it
    (`Lease.artifact`), and with `unchanged` whether it already runs it, ready (`Lease.unchanged`:
    no lease taken there, `work` decides what to report)."""
    check_parallel((options or RunOptions()).parallel)  # before any host is leased
    try:  # one socket per host from the take to the release: the default 1,024 is too few
        open_files_limit(hosts)
    except ValueError as exc:
        return [HostResult(h.name, "refused", False, note=f"run refused: {exc}") for h in hosts]
    conns = Connections()
    probe = None if artifact is None else (artifact.sha256, artifact.path.stat().st_size)
    with collector.full_collections_deferred():  # connections are no garbage until the end
        try:
            same = (release_name(artifact.version, artifact.sha256)
                    if artifact and unchanged else None)
            held = lease.take(hosts, owner, lease_time(hosts, options, deadline), conns, probe,
                              same)
            if held.refused:
                first = next(iter(held.refusals.values()))
                return [HostResult(h.name, "refused", False,
                                   note=held.refusals.get(h.name) or f"run refused: {first}")
                        for h in hosts]
            return _run_leased(hosts, held, work, conns, sink, options, deadline)
        finally:
            conns.close()


def _run_leased(hosts: list[Host], held: lease.Lease,
                work: Callable[[Host, Progress, Connections, lease.Lease], HostResult],
                conns: Connections, sink: ProgressSink, options: RunOptions | None,
                deadline: Callable[[Host], float] = deadline_for) -> list[HostResult]:
    """`work` on every host once its lease is decided (see `_leased`); the lease is given back
    at the end, over the same connections."""

    def gated(host: Host, progress: Progress) -> HostResult:
        t0 = time.monotonic()
        blocked = held.wait(host)
        if isinstance(blocked, lease.Unreached):
            res = _failure(host, blocked.cause, _Timer(progress), t0)
            res.note += " (while taking the fleet lease; not tried again)"
            return res
        if blocked is not None:
            return HostResult(host.name, "refused", False, note=blocked,
                              duration_s=time.monotonic() - t0)
        why = held.unanswered.get(host.name)
        if why is not None:  # never change a host without its lease
            return HostResult(host.name, "failed", False,
                              note=f"taking the fleet lease on this host failed ({why}); "
                                   "nothing was changed on it",
                              duration_s=time.monotonic() - t0)
        return work(host, progress, conns, held)

    try:
        return _run(hosts, gated, sink, options, deadline)
    finally:
        lease.release(held, conns)


def deploy(hosts: list[Host], artifact: ArtifactRef, sink: ProgressSink,
           options: RunOptions | None = None, force: bool = False, dry_run: bool = False,
           owner: str | None = None, allow_unproven_openclaw: bool = False) -> list[HostResult]:
    """Deploy `artifact` to `hosts`. An OpenClaw host whose OpenClaw the release was not proven
    on is refused before the upload, unless `allow_unproven_openclaw` (never one older than the
    release supports); its installer checks again (OpenClaw may change meanwhile)."""
    owner = owner or default_owner()
    support = _SupportOf(artifact)

    def work(h: Host, p: Progress, conns: Connections | None = None,
             held: lease.Lease | None = None) -> HostResult:
        stored = held.artifact.get(h.name) if held is not None else None
        base = held.base.get(h.name) if held is not None else None
        if held is not None and h.name in held.unchanged:  # said by the take: nothing to do
            return _unchanged(h, held.unchanged[h.name], held.answered_s.get(h.name, 0.0), {})
        if held is not None:
            refused = _refused_before_upload(h, held, support, allow_unproven_openclaw, owner)
            if refused is not None:
                return refused
        give_up = None if held is None else lambda: lease.release_host(held, h, conns)
        result = deploy_host(h, artifact, p, owner, force, dry_run, conns, stored,
                             allow_unproven_openclaw, held.run_id if held is not None else None,
                             give_up, base)
        if held is not None and result.data.get("lease_given_back") is True:
            held.given_back.add(h.name)  # by its installer: nothing left to release there
        return result

    if dry_run:
        with hostkeys.not_recording():  # a dry run writes nothing, known_hosts included
            return _run(hosts, work, sink, options)
    return _leased(hosts, owner, options, work, sink, artifact, unchanged=not force)


def _unchanged(host: Host, meta: dict, duration_s: float, steps: dict) -> HostResult:
    """The report of a host that already runs the artifact, ready: `meta` is its active
    release's fleet_release.json, as the read-only check found it."""
    name = release_name(str(meta.get("version")), str(meta.get("sha256", "")))
    current = release_summary({**meta, "release": name})
    return HostResult(host.name, "unchanged", True, from_release=current, to_release=current,
                      duration_s=duration_s, note="already active and ready (checked read-only)",
                      steps=steps, data={"uploaded": False, "restarted": False,
                                         "fast_path": True})


class _SupportOf:
    """The artifact's OpenClaw support, read from it once, when an OpenClaw host asks."""

    def __init__(self, artifact: ArtifactRef):
        self.artifact = artifact
        self.read: Support | None = None

    def __call__(self) -> Support:
        if self.read is None:
            self.read = Support.of_artifact(self.artifact.path)
        return self.read


def _refused_before_upload(host: Host, held: lease.Lease, support: Callable[[], Support],
                           allow_unproven: bool, owner: str) -> HostResult | None:
    """The refusal of an OpenClaw host whose take said which OpenClaw it runs, when the release
    does not accept it (fleet.continuity.openclawrange: too old, or not proven and no
    `allow_unproven`): decided here, before anything is sent. The host's audit line goes with
    the lease's release (`Lease.audit`). None: go on (its installer checks again)."""
    found = held.openclaw.get(host.name)
    if found is None:
        return None
    whose = ("its running gateway" if found.get("source") == "gateway"
             else "its OpenClaw CLI (no gateway answers)")
    where = f"host {host.name}: {whose} is OpenClaw {found['version']}"
    try:
        verdict = support().classify(str(found["version"]))
    except CompatError as exc:
        verdict, reason = None, f"cannot read the OpenClaw versions this release supports: {exc}"
    else:
        if verdict.accepted(allow_unproven):
            return None
        reason = openclaw_refusal(where, verdict.message, not verdict.too_old)
    held.audit[host.name] = {"action": "install", "result": "refused", "reason": reason,
                             "who": owner, "to": None, "duration_s": 0.0}
    return HostResult(host.name, "refused", False, note=reason,
                      data={"uploaded": False, "openclaw": found,
                            "openclaw_support": verdict.as_dict() if verdict else None})


def status(hosts: list[Host], sink: ProgressSink, options: RunOptions | None = None,
           owner: str | None = None) -> list[HostResult]:
    owner = owner or default_owner()
    return _run(hosts, lambda h, p: _simple_host(h, p, commands.status(h, owner), "status",
                                                 status=True), sink, options)


def rollback(hosts: list[Host], sink: ProgressSink, options: RunOptions | None = None,
             to: str | dict[str, str | None] | None = None,
             owner: str | None = None, guarded: frozenset = frozenset(),
             via: str | None = None) -> list[HostResult]:
    """Switch back to the previous release, or to `to`: one release for every host, or a
    release per host name (a rollout returns each host to the release it ran before).
    `guarded`: hosts whose installer (their current release's) knows the rollback's
    `--fleet-lease`, so that one this run abandons never switches after it (an older installer
    would refuse the flag). `via`: a release whose installer runs the rollback where the host
    has it, always with that guard (`commands.rollback`)."""
    owner = owner or default_owner()

    def target(h: Host) -> str | None:
        return to.get(h.name) if isinstance(to, dict) else to

    return _leased(hosts, owner, options, lambda h, p, conns, held: _simple_host(
        h, p, commands.rollback(h, owner, target(h),
                                held.run_id if h.name in guarded else None,
                                via=via, run=held.run_id),
        "rollback", True, install_timeout(h), conns=conns), sink)


def gateway(hosts: list[Host], action: str, sink: ProgressSink,
            options: RunOptions | None = None, owner: str | None = None) -> list[HostResult]:
    """`stop` (leave the gateway stopped) or `start` (start it, wait until ready) on every
    host, under the fleet lease and the host lock as a restart."""
    owner = owner or default_owner()
    return _leased(hosts, owner, options, lambda h, p, conns, _held: _simple_host(
        h, p, commands.gateway(h, owner, action), action, True, install_timeout(h),
        conns=conns), sink)


def remove(hosts: list[Host], sink: ProgressSink, options: RunOptions | None = None,
           owner: str | None = None) -> list[HostResult]:
    """Take fleet off every host (stop the gateway, fleet's plugins out of its config, fleet's
    files deleted), under the fleet lease and the host lock; a host with nothing installed is
    `absent`, which is what a remove wants."""
    owner = owner or default_owner()
    return _leased(hosts, owner, options, lambda h, p, conns, _held: _simple_host(
        h, p, commands.remove(h, owner), "remove", True, install_timeout(h), conns=conns,
        absent="absent"), sink)


def restart(hosts: list[Host], sink: ProgressSink, options: RunOptions | None = None,
            owner: str | None = None) -> list[HostResult]:
    owner = owner or default_owner()
    return _leased(hosts, owner, options, lambda h, p, conns, _held: _simple_host(
        h, p, commands.restart(h, owner), "restart", True, install_timeout(h),
        conns=conns), sink)
