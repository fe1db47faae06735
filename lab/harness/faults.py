"""Faults injected into harness hosts, each a context manager that heals on exit.

Faults act at deterministic seams rather than after sleeps: the installer's fault files
(`<state>/fleet/faults/<step>` holding `hold`) stop a deploy exactly at a step, the host-init loop
restarts sshd on demand, and the full-disk fault needs a host whose state dir is a small tmpfs.
Every fault confirms it took effect before yielding, so a test never passes on a fault that
silently did nothing.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import threading
import time
from collections.abc import Iterator

from fleet.continuity.statelayout import StateLayout
from lab.harness import hosts
from lab.harness.run import Harness

FAULT_TIMEOUT_S = 60.0
_ARTIFACT_RE = re.compile(r"^[0-9a-f]{64}\.pyz$")  # final names only, never the upload's temp
STOP_FILE = "/run/fleet-harness/sshd.stop"


class FaultError(RuntimeError):
    """A fault could not be injected or confirmed; the test cannot rely on it."""


def _until(check, timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise FaultError(f"{what} not observed within {timeout:.0f}s")
        time.sleep(interval)


INSTALLER_STEPS = ("lock", "verify", "unpack", "switch", "restart", "ready", "audit", "prune")


def _fault_file(host: hosts.Host, step: str) -> str:
    return f"{host.state_dir}/{StateLayout.FAULTS}/{step}"


def set_step_fault(host: hosts.Host, step: str, action: str) -> None:
    """Write the installer fault file for `step` (owned by the host's user)."""
    path = _fault_file(host, step)
    host.exec_ok(f"mkdir -p {shlex.quote(path.rsplit('/', 1)[0])} && "
                 f"printf '%s\\n' {shlex.quote(action)} > {shlex.quote(path)}", user=host.user)


def clear_step_fault(host: hosts.Host, step: str) -> None:
    path = shlex.quote(_fault_file(host, step))
    host.exec_ok(f"rm -f {path} {path}.held", user="root")


PAUSE_TRIES = 5


def _pause(host: hosts.Host) -> None:
    """`docker pause`, tried again when the cgroup freezer gives up ("unable to freeze", seen
    on a machine whose load is far above its cores): a test fault must not fail by itself."""
    import docker  # noqa: PLC0415

    for attempt in range(PAUSE_TRIES):
        try:
            host.container.pause()
            return
        except docker.errors.APIError as exc:
            if "unable to freeze" not in str(exc) or attempt == PAUSE_TRIES - 1:
                raise
            time.sleep(1.0)


@contextlib.contextmanager
def paused(host: hosts.Host) -> Iterator[hosts.Host]:
    """Freeze every process of the host (a hung machine); the SSH banner stops answering."""
    _pause(host)
    try:
        if hosts.banner_ok(host.port, timeout=2.0):
            raise FaultError(f"{host.name}: still answers SSH while paused")
        yield host
    finally:
        host.container.unpause()


def restart_sshd(host: hosts.Host) -> None:
    """Kill the sshd listener; host-init starts a new one (with the current host key)."""
    since = time.time()
    host.exec_ok("kill $(cat /run/sshd.pid)", timeout=10)
    hosts.wait_listening(host, timeout=FAULT_TIMEOUT_S, since=since)


@contextlib.contextmanager
def sshd_stopped(host: hosts.Host) -> Iterator[hosts.Host]:
    """sshd down while the host and its gateway stay up; heals by letting host-init restart it."""
    host.exec_ok(f"touch {STOP_FILE} && kill $(cat /run/sshd.pid)", timeout=10)
    try:
        _until(lambda: not hosts.banner_ok(host.port, timeout=1.0), 15, f"{host.name} sshd stop")
        yield host
    finally:
        since = time.time()
        host.exec(f"rm -f {STOP_FILE}", timeout=10)
        hosts.wait_listening(host, timeout=FAULT_TIMEOUT_S, since=since)


@contextlib.contextmanager
def host_key_changed(host: hosts.Host) -> Iterator[str]:
    """The host presents a new host key (as after a reinstall); yields the new `type key`.

    The run's known_hosts keeps the old key, so strict clients must refuse the host. On exit the
    original key is restored and sshd restarted with it.
    """
    old_key = host.host_key
    key = "/etc/ssh/ssh_host_ed25519_key"
    host.exec_ok(f"cp -p {key} /run/fleet-harness/old_key && cp -p {key}.pub "
                 f"/run/fleet-harness/old_key.pub && rm -f {key} {key}.pub && "
                 f"ssh-keygen -q -t ed25519 -N '' -f {key}", timeout=20)
    try:
        restart_sshd(host)
        if host.host_key == old_key:
            raise FaultError(f"{host.name}: host key did not change")
        yield host.host_key
    finally:
        host.exec(f"cp -p /run/fleet-harness/old_key {key} && "
                  f"cp -p /run/fleet-harness/old_key.pub {key}.pub", timeout=10)
        restart_sshd(host)
        if host.host_key != old_key:
            raise FaultError(f"{host.name}: original host key not restored")


@contextlib.contextmanager
def disk_full(host: hosts.Host, leave_kb: int = 0) -> Iterator[int]:
    """Fill the host's state dir (a tmpfs: HostSpec.state_tmpfs_mb) up to `leave_kb` free.

    Yields the free space left in KB. Refuses hosts whose state dir is not a tmpfs, so it can never
    fill the machine's real disk.
    """
    if not host.spec.state_tmpfs_mb:
        raise FaultError(f"{host.name}: state dir is not a tmpfs (start it with state_tmpfs_mb)")
    state = shlex.quote(host.state_dir)
    fill = shlex.quote(f"{host.state_dir}/.harness-fill")
    fstype = host.exec_ok(f"stat -f -c %T {state}", timeout=10).strip()
    if fstype != "tmpfs":
        raise FaultError(f"{host.name}: {host.state_dir} is {fstype}, not tmpfs")

    def free_kb() -> int:
        return int(host.exec_ok(f"df -Pk {state} | awk 'NR==2 {{print $4}}'", timeout=10))

    size_kb = max(free_kb() - leave_kb, 0)
    host.exec(f"fallocate -l {size_kb}K {fill} || dd if=/dev/zero of={fill} bs=1K "
              f"count={size_kb} 2>/dev/null", timeout=60)
    try:
        left = free_kb()
        if left > leave_kb + 64:
            raise FaultError(f"{host.name}: state dir still has {left} KB free")
        yield left
    finally:
        host.exec(f"rm -f {fill}", timeout=10)


def _artifacts(host: hosts.Host) -> set[str]:
    art_dir = f"{host.state_dir}/{StateLayout.ARTIFACTS}"
    result = host.exec(f"ls {shlex.quote(art_dir)}", timeout=10)
    return {name for name in result.stdout.split() if _ARTIFACT_RE.match(name)}


class _Watcher:
    """Polls a host in a thread until a condition holds, then acts once; errors are kept."""

    def __init__(self, check, act, timeout: float) -> None:
        self.triggered = threading.Event()  # the condition held and the action started
        self.done = threading.Event()  # the action finished
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(check, act, timeout), daemon=True)
        self._thread.start()

    def _loop(self, check, act, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        try:
            while not self._stop.is_set():
                if check():
                    self.triggered.set()
                    act()
                    self.done.set()
                    return
                if time.monotonic() > deadline:
                    raise FaultError(f"fault trigger not reached within {timeout:.0f}s")
                time.sleep(0.1)
        except BaseException as exc:  # reported by the context manager
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)


class KillAtStep:
    """What kill_at_step yields: whether the kill happened (`killed`), and any watcher error."""

    def __init__(self, watcher: _Watcher) -> None:
        self._watcher = watcher

    @property
    def killed(self) -> bool:
        """Whether the host was killed. The deploy can notice the dead host before the engine
        confirms the kill (a busy Docker engine takes its time), so a started kill is waited
        for (bounded)."""
        if not self._watcher.triggered.is_set():
            return False
        return self._watcher.done.wait(FAULT_TIMEOUT_S)

    def wait(self, timeout: float = FAULT_TIMEOUT_S) -> bool:
        return self._watcher.done.wait(timeout)


@contextlib.contextmanager
def kill_at_step(harness: Harness, name: str, step: str = "restart",
                 timeout: float = FAULT_TIMEOUT_S) -> Iterator[KillAtStep]:
    """Kill the whole host (container SIGKILL) while its installer holds at `step`.

    Any installer step works: the installer marks `<faults>/<step>.held` while it holds there, so
    the kill lands exactly at that step. On exit the host is started again (same port and host
    key) and the fault file removed; the gateway is not restarted, as after a real power cut.
    """
    if step not in INSTALLER_STEPS:
        raise FaultError(f"kill_at_step: unknown installer step {step!r}; "
                         f"one of {', '.join(INSTALLER_STEPS)}")
    host = harness.hosts[name]
    held = shlex.quote(_fault_file(host, step) + ".held")

    def reached() -> bool:
        return host.exec(f"test -e {held}", timeout=10).ok

    set_step_fault(host, step, "hold")
    watcher = _Watcher(reached, lambda: host.container.kill(), timeout)
    try:
        yield KillAtStep(watcher)
    finally:
        watcher.stop()
        if host.status() != "running":
            harness.restart_host(host)
        clear_step_fault(host, step)
    if watcher.error is not None:
        raise FaultError(f"{name}: kill at {step} failed: {watcher.error}")


@contextlib.contextmanager
def corrupt_artifact(host: hosts.Host, timeout: float = FAULT_TIMEOUT_S) -> Iterator[_Watcher]:
    """Damage the next artifact uploaded to the host after the upload, before the installer's
    hash check: the installer holds at `verify`, 16 bytes in the middle of the file are
    overwritten, then the hold is released.
    """
    before = _artifacts(host)
    art_dir = f"{host.state_dir}/{StateLayout.ARTIFACTS}"

    def reached() -> bool:
        return bool(_artifacts(host) - before) and host.exec(
            "pgrep -f -- ' install ' >/dev/null", timeout=10).ok

    def corrupt() -> None:
        for name in sorted(_artifacts(host) - before):
            path = shlex.quote(f"{art_dir}/{name}")
            host.exec_ok(
                f"size=$(stat -c %s {path}); head -c 16 /dev/zero | tr '\\0' '\\377' | "
                f"dd of={path} bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null", timeout=10)
        clear_step_fault(host, "verify")

    set_step_fault(host, "verify", "hold")
    watcher = _Watcher(reached, corrupt, timeout)
    try:
        yield watcher
    finally:
        watcher.stop()
        clear_step_fault(host, "verify")
    if watcher.error is not None:
        raise FaultError(f"{host.name}: corrupting the artifact failed: {watcher.error}")
