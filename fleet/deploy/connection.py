"""How the control side talks to a host: ssh (paramiko) or local (subprocess), one small interface.

Both run a shell command with a deadline (optionally streaming stderr lines, which carry the
installer's `{"step": ...}` progress), also with a file as its stdin (`send_and_run`: the upload,
which the command stores under a temp name and renames only when complete, so a host never sees
a partial artifact under its final name). Every wait is bounded: connect, banner, auth,
each command, each transfer.

Each ssh hop is paramiko's SSHClient (`_Hop`: its key files, timeouts, and a ProxyJump chain
as a direct-tcpip channel of the hop before), not Fabric's `Connection`: building one merged
invoke's config layers and cloned a Fabric Config per hop (~0.6 ms of CPU per hop measured
alone; ~19% of a 64-host no-op deploy's profiled control-side CPU), for nothing fleet used, since
fleet reads ssh_config itself (fleet.deploy.sshconfig), sets the host-key policy itself
(fleet.deploy.hostkeys) and runs commands on channels itself (below). Figures in
docs/bench/log.md, "Control-side cost per host: the loop, the readers, the hop". What is per
process or per run, not per host: the parsed identity files (`_cached_key`), ssh_config
(`Connections`) and known_hosts (fleet.deploy.hostkeys).
"""

from __future__ import annotations

import codecs
import functools
import io
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.deploy import hostkeys, runtime
from fleet.deploy.inventory import Host
from fleet.terminal.text import visible

LineCallback = Callable[[str], None]
# Paramiko logs a dropped socket ("Socket exception: ...", "Error reading SSH protocol banner")
# at ERROR; with no handler Python prints that to stderr beside our own report of the same
# failure. Ours names the host and the cause, so paramiko's copy is dropped.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

# What kind of failure a ConnectionError_ is (the host's result in the report)
UNREACHABLE, AUTH_FAILED, HOST_KEY, FAILED = "unreachable", "auth_failed", "host_key", "failed"


_echo_lock = threading.Lock()
_echo_stream: list = []  # [stream] while `echo_commands` is on


def echo_commands(on: bool, stream: Any = None) -> None:
    """`-v` (`fleet -v`, or Invoke's own `-e`/`--echo`): print each command sent to a host and
    how it ended, on stderr, as Ansible's `-vvv` shows what it runs. The command is shown
    escaped, as every host's text (fleet.terminal.text)."""
    _echo_stream[:] = [stream] if on else []


def _echoed(method: Callable) -> Callable:
    """A connection's command method that, under `echo_commands`, prints `<host> $ <command>`
    before and `<host> exit N after Ts` (or the error) after."""

    def run(self, command: str, *args: Any, **kwargs: Any) -> Any:
        if not _echo_stream:
            return method(self, command, *args, **kwargs)
        def say(text: str) -> None:
            stream = _echo_stream[0] if _echo_stream and _echo_stream[0] else sys.stderr
            with _echo_lock:
                stream.write(f"{visible(self.host.name)} {text}\n")
                stream.flush()

        say(f"$ {visible(command)}")
        started = time.monotonic()
        try:
            result = method(self, command, *args, **kwargs)
        except BaseException as exc:
            say(f"failed after {time.monotonic() - started:.2f}s: {visible(str(exc))}")
            raise
        say(f"exit {result.exit_code} after {time.monotonic() - started:.2f}s")
        return result

    return run


class ConnectionError_(RuntimeError):
    """Connecting, a command or a transfer failed; the message names the host and the cause,
    `kind` says which failure it is (unreachable, auth_failed, host_key or failed)."""

    def __init__(self, message: str, kind: str = FAILED):
        super().__init__(message)
        self.kind = kind


def failure_kind(exc: BaseException) -> str:
    """Classify an error from opening an ssh connection."""
    import paramiko  # noqa: PLC0415

    if isinstance(exc, (hostkeys.HostKeyError, paramiko.BadHostKeyException)):
        return HOST_KEY
    if isinstance(exc, paramiko.AuthenticationException):
        return AUTH_FAILED
    if isinstance(exc, (OSError, EOFError, paramiko.SSHException)):
        return UNREACHABLE  # DNS, refused, timeouts, banner/handshake failures
    return FAILED


@dataclass
class CommandResult:
    exit_code: int
    stdout: str
    stderr: str


def shell_path(path: str) -> str:
    """Quote a host path for sh, keeping a leading `~/` expandable."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


class _LineWriter(io.TextIOBase):
    """A stream that hands complete lines to a callback (for live progress)."""

    def __init__(self, callback: LineCallback | None):
        self.callback = callback
        self.buf = ""
        self.text = []

    def write(self, s: str) -> int:
        self.text.append(s)
        self.buf += s
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            if self.callback:
                self.callback(line)
        return len(s)


class LocalConnection:
    """A host on this machine (a Mac driven where it sits, the sandbox): same commands, no ssh."""

    def __init__(self, host: Host):
        self.host = host
        self._running: set[subprocess.Popen] = set()

    def open(self) -> None:
        return None

    def run(self, command: str, timeout: float,
            on_stderr_line: LineCallback | None = None) -> CommandResult:
        return self._run(command, timeout, on_stderr_line, subprocess.DEVNULL)

    def send_and_run(self, local: Path | bytes, command: str, transfer_timeout: float,
                     timeout: float, on_stderr_line: LineCallback | None = None,
                     on_sent: Callable[[], None] | None = None) -> CommandResult:
        """`command` with the file `local` (or these bytes) as its stdin (see
        SshConnection.send_and_run); here the command reads the file itself."""
        try:
            if isinstance(local, bytes):
                stdin = tempfile.TemporaryFile()  # noqa: SIM115  (closed below)
                stdin.write(local)
                stdin.seek(0)
            else:
                stdin = open(local, "rb")  # noqa: SIM115  (closed below, once the command ended)
        except OSError as exc:
            raise ConnectionError_(f"{self.host.name}: upload of {_source_name(local)} failed: "
                                   f"{_describe(exc)}") from exc
        with stdin:
            if on_sent is not None:
                on_sent()
            return self._run(command, transfer_timeout + timeout, on_stderr_line, stdin)

    @_echoed
    def _run(self, command: str, timeout: float, on_stderr_line: LineCallback | None,
             stdin) -> CommandResult:
        proc = subprocess.Popen(["sh", "-c", command], stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        self._running.add(proc)
        try:
            return self._wait(proc, command, timeout, on_stderr_line)
        finally:
            self._running.discard(proc)

    def _wait(self, proc: subprocess.Popen, command: str, timeout: float,
              on_stderr_line: LineCallback | None) -> CommandResult:
        out: list[bytes] = []
        err = _LineWriter(on_stderr_line)
        readers = [threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True),
                   threading.Thread(target=self._pump, args=(proc.stderr, err), daemon=True)]
        for thread in readers:
            thread.start()
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Hang up, as a dropped ssh session would: plain commands die, while an installer
            # (which ignores SIGHUP) finishes its transaction on its own. Never wait long.
            try:
                os.killpg(proc.pid, signal.SIGHUP)
                proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
            raise ConnectionError_(f"{self.host.name}: command timed out after {timeout:.0f}s "
                                   f"(abandoned): {command[:120]}") from None
        for thread in readers:
            thread.join(timeout=5)
        return CommandResult(code, b"".join(out).decode("utf-8", "replace"), "".join(err.text))

    @staticmethod
    def _pump(stream, writer: _LineWriter) -> None:
        for raw in iter(stream.readline, b""):
            writer.write(raw.decode("utf-8", "replace"))

    def close(self) -> None:
        """Hang up on commands still running, as closing an ssh session would."""
        for proc in list(self._running):
            try:
                os.killpg(proc.pid, signal.SIGHUP)
            except OSError:
                pass

    def is_active(self) -> bool:
        return True


_KEYS: dict[tuple, tuple[tuple, Any]] = {}
_KEYS_LOCK = threading.Lock()


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _cached_key(load: Callable[[], Any], filename: str, klass: type, password: Any) -> Any:
    """A private key from `load`, once per process per file, key class and passphrase (again
    when the file or its `-cert.pub` changes); a key class that cannot read the file fails
    again at once, with the same error.

    Paramiko reads and parses each identity file on every connection, and tries each key class
    in turn (an Ed25519 file is parsed as RSA and ECDSA first, failing). A parsed key is not
    changed by using it, so every connection may sign with the same object."""
    import paramiko  # noqa: PLC0415

    path = filename[:-len("-cert.pub")] if filename.endswith("-cert.pub") else filename
    stamp = (_stamp(path), _stamp(path + "-cert.pub"))
    cache_key = (filename, klass, password)
    with _KEYS_LOCK:
        hit = _KEYS.get(cache_key)
    if hit is not None and hit[0] == stamp:
        ok, value = hit[1]
        if ok:
            return value
        raise value[0](*value[1])  # a fresh exception: one raised twice grows its traceback
    try:
        key = load()
    except paramiko.SSHException as exc:  # not this class's file (or a wrong passphrase)
        if stamp[0] is not None:
            with _KEYS_LOCK:
                _KEYS[cache_key] = (stamp, (False, (type(exc), exc.args)))
        raise
    if stamp[0] is not None:
        with _KEYS_LOCK:
            _KEYS[cache_key] = (stamp, (True, key))
    return key


@functools.lru_cache(maxsize=1)
def _client_class() -> type:
    """paramiko's SSHClient with identity files parsed once per process (`_cached_key`)."""
    import paramiko  # noqa: PLC0415

    class KeyCachingClient(paramiko.SSHClient):
        def _key_from_filepath(self, filename, klass, password):
            parent = super()._key_from_filepath
            return _cached_key(lambda: parent(filename, klass, password), filename, klass,
                               password)

    return KeyCachingClient


class SshConnection:
    """A host over ssh (paramiko), with verified host keys and deadlines everywhere.

    The address, user, keys, jump host and host-key trust come from the inventory, then
    `~/.ssh/config` (fleet.deploy.sshconfig): the file is applied exactly once, by those
    rules."""

    def __init__(self, host: Host, ssh_config: Any = None):
        self.host = host
        self.conn = None
        self.target = None
        self.ssh_config = ssh_config  # sshconfig.SshConfig of the run; None: read it here

    def _hop(self, target, gateway: _Hop | None = None) -> _Hop:
        timeout = self.host.timeouts.connect
        kwargs = {"hostname": target.hostname, "port": target.port, "username": target.user,
                  "timeout": timeout, "banner_timeout": timeout, "auth_timeout": timeout,
                  "channel_timeout": timeout,
                  "transport_factory": functools.partial(aead_first_transport, check_s=timeout)}
        if gateway is None:  # through a jump host the "socket" is an ssh channel (_Hop.open)
            kwargs["sock"] = nodelay_socket(target.hostname, target.port, timeout)
        if target.identity_files:
            kwargs["key_filename"] = list(target.identity_files)
        client = _client_class()()  # paramiko's default policy (reject) until hostkeys.apply
        known_types = hostkeys.apply(client, target.known_hosts, target.policy,
                                     target.hostname, target.port)
        if known_types is not None:  # an @cert-authority line matches: certificates first
            kwargs["transport_factory"] = functools.partial(
                aead_first_transport, certificate_first=known_types, check_s=timeout)
        return _Hop(client, kwargs, gateway)

    def _chain(self, target, made: list) -> _Hop:
        """The connection to `target` through its jump hosts (`ProxyJump a,b`: a, then b
        through a, then the target through b), each hop with its own host-key check."""
        gateway = self._chain(target.jump, made) if target.jump is not None else None
        hop = self._hop(target, gateway)
        made.append(hop)
        return hop

    def open(self) -> None:
        from fleet.deploy import sshconfig  # noqa: PLC0415

        made: list = []
        where = f"{self.host.host}:{self.host.port}"
        known = self.host.known_hosts
        try:
            self.target = target = sshconfig.resolve(self.host, self.ssh_config)
            where, known = target.describe(), target.known_hosts
            self.conn = self._chain(target, made)
            self.conn.open()
            for hop in made:  # the jump hosts' transports too (paramiko's default: 10 wakes/s)
                _quiet_transport(hop.client.get_transport())
        except sshconfig.SshConfigError as exc:
            raise ConnectionError_(str(exc), FAILED) from None
        except Exception as exc:
            for hop in made:
                hop.close()
            reason = hostkeys.explain(exc, known)
            raise ConnectionError_(f"{self.host.name}: cannot connect to {where}: "
                                   f"{reason or _describe(exc)}", failure_kind(exc)) from exc

    def run(self, command: str, timeout: float,
            on_stderr_line: LineCallback | None = None) -> CommandResult:
        """Run `command` in a new channel of the open connection; stdout and stderr are read
        with blocking reads until the command ends or `timeout` passes.

        Not Fabric's `Connection.run`: its runner polls every 10 ms while a command runs
        (invoke's `Runner.wait`), ~6 ms of control-side CPU per second per host in flight,
        which made a 64-host deploy cost the control side more than the ssh handshakes."""
        return self._exec(command, timeout, on_stderr_line)

    def send_and_run(self, local: Path | bytes, command: str, transfer_timeout: float,
                     timeout: float, on_stderr_line: LineCallback | None = None,
                     on_sent: Callable[[], None] | None = None) -> CommandResult:
        """Run `command` with the bytes of `local` (a file, or bytes) as its stdin, then end of
        input: an upload
        and the command that takes it in (fleet.deploy.commands.upload_and_install) in one
        round trip, and no SFTP session (its open, stat and per-chunk acknowledgements).

        Sending must end within `transfer_timeout` (else "upload of <file> failed", as a failed
        SFTP upload said); `on_sent()` is called then, and the command has `timeout` more. The
        command is what keeps a cut-off upload from its final name (it renames a complete file
        only)."""
        return self._exec(command, timeout, on_stderr_line, (local, transfer_timeout), on_sent)

    @_echoed
    def _exec(self, command: str, timeout: float, on_stderr_line: LineCallback | None,
              upload: tuple[Path, float] | None = None,
              on_sent: Callable[[], None] | None = None) -> CommandResult:
        deadline = time.monotonic() + timeout
        streams = _Streams(on_stderr_line)
        chan = None
        sending = upload is not None  # a failure until the file is sent is the upload's
        try:
            opening = min(timeout, 30.0) if upload is None else min(upload[1], 30.0)
            chan = self.conn.client.get_transport().open_session(timeout=opening)
            streams.watch(chan)
            chan.exec_command(command)
            if upload is not None:
                self._send(chan, *upload, streams)
                sending = False
                deadline = time.monotonic() + timeout
                if on_sent is not None:
                    on_sent()
            chan.shutdown_write()  # no (more) stdin, as `in_stream=False`
            while not streams.drain(chan):
                left = deadline - time.monotonic()
                if left <= 0 or not streams.wait(left):
                    raise socket.timeout("deadline")
            if not chan.status_event.wait(max(0.0, deadline - time.monotonic())):
                raise socket.timeout("no exit status")
        except Exception as exc:
            if chan is not None:  # what the host said before it stopped (reading)
                streams.settle(chan, 1.0 if sending else 0.0)
                chan.close()
            if sending:
                cause = exc.cause if isinstance(exc, _SendFailed) else exc
                said = " ".join(streams.stderr().split())[-300:]
                raise ConnectionError_(f"{self.host.name}: upload of {_source_name(upload[0])} "
                                       "failed: "
                                       f"{_describe(cause)}" + (f" (host: {said})" if said else
                                                                "")) from cause
            if isinstance(exc, socket.timeout):
                raise ConnectionError_(f"{self.host.name}: command timed out after "
                                       f"{timeout:.0f}s: {command[:120]}") from None
            raise ConnectionError_(f"{self.host.name}: command failed: {_describe(exc)}") from exc
        chan.close()
        return CommandResult(chan.exit_status, streams.stdout(), streams.stderr())

    @staticmethod
    def _send(chan, local: Path | bytes, timeout: float, streams: _Streams) -> None:
        """Write the file (or bytes) to the channel's stdin within `timeout` (blocking on the
        window), taking in what the command says between writes (its progress, live)."""
        end = time.monotonic() + timeout
        try:
            with io.BytesIO(local) if isinstance(local, bytes) else open(local, "rb") as fh:
                while True:
                    chunk = fh.read(SEND_CHUNK)
                    if not chunk:
                        return
                    left = end - time.monotonic()
                    if left <= 0:
                        raise socket.timeout(f"timed out after {timeout:.0f}s")
                    chan.settimeout(left)
                    chan.sendall(chunk)
                    streams.drain(chan)
        except Exception as exc:
            raise _SendFailed(exc) from exc

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def is_active(self) -> bool:
        """Whether the ssh transport is still up (a reused connection may have dropped)."""
        transport = self.conn.client.get_transport() if self.conn is not None else None
        return bool(transport is not None and transport.is_active())


class _Hop:
    """One ssh hop: paramiko's SSHClient, what it connects with (`connect_kwargs`: address,
    user, identity files, timeouts, the socket or, through `gateway`, a direct-tcpip channel
    of the hop before), opened by `open()` after the host-key policy is in place."""

    def __init__(self, client: Any, connect_kwargs: dict, gateway: _Hop | None) -> None:
        self.client = client
        self.connect_kwargs = connect_kwargs
        self.gateway = gateway

    def open(self) -> None:
        kwargs = self.connect_kwargs
        if self.gateway is not None:
            self.gateway.open()
            kwargs["sock"] = self.gateway.client.get_transport().open_channel(
                "direct-tcpip", (kwargs["hostname"], int(kwargs["port"])), ("", 0),
                timeout=kwargs["timeout"])
        self.client.connect(**kwargs)

    def close(self) -> None:
        """Close this hop, its socket and the hops before it (a jump host's session ends with
        the connection through it)."""
        for hop in self._hops():
            _wake_reader(hop.client.get_transport())
            close_quietly(hop.client)
            close_quietly(hop.connect_kwargs.get("sock"))

    def _hops(self) -> list[_Hop]:
        hops, hop = [], self
        while hop is not None:
            hops.append(hop)
            hop = hop.gateway
        return hops


def close_quietly(conn: Any) -> None:
    """Close `conn` (None: nothing to do) ignoring its errors: closing happens on the way out,
    often after the transport broke, and must not hide the error being reported."""
    if conn is None:
        return
    try:
        conn.close()
    except Exception:
        pass


def _wake_reader(transport: Any) -> None:
    """Shut the transport's socket down before it is closed.

    Its reader thread waits in `recv` with no timeout (`_quiet_transport`), and closing a
    socket does not wake a `recv` already waiting on it: the thread, the connection's objects
    and the host's ssh session would live on after every close (a run's thousand connections,
    or each of a long-lived worker's). A shutdown ends that `recv` at once (end of file), so the
    thread ends and the host sees the connection close now. A jump host's "socket" is a paramiko
    channel, whose `shutdown` sends its end of file; its reader keeps a timeout."""
    sock = getattr(transport, "sock", None)
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError, EOFError):  # already closed or broken: nothing to wake
        pass


IDLE_CHECK_S = 30.0  # how often a jump host's channel's reader wakes (`_quiet_transport`)
AEAD_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def aead_first_transport(sock, disabled_algorithms=None,
                         certificate_first: tuple[str, ...] | None = None,
                         check_s: float | None = None):
    """A paramiko Transport that offers AES-GCM first (then paramiko's usual list, so a server
    without it still connects) and waits without polling (`_transport_class`). With
    `certificate_first` (the plain key types known for the host), one that asks for the host's
    certificate first (hostkeys.CertificateFirstTransport). `check_s`: the host's connect
    timeout, which bounds how often the handshake looks at its deadlines (HANDSHAKE_CHECK_S).

    With paramiko's default, AES-CTR + HMAC-SHA2, every packet received is checked by
    `util.constant_time_bytes_eq`, a Python loop over the MAC's bytes: 14% of a 32-host deploy's
    control-side CPU in a profile. AES-GCM authenticates inside the cipher (OpenSSL, via
    `cryptography`), so no MAC is computed or compared in Python."""
    transport = _transport_class(certificate_first is not None)(
        sock, disabled_algorithms=disabled_algorithms, check_s=check_s)
    if certificate_first is not None:
        transport.known_types = certificate_first
    options = transport.get_security_options()
    offered = tuple(options.ciphers)
    first = tuple(c for c in AEAD_CIPHERS if c in offered)
    options.ciphers = first + tuple(c for c in offered if c not in first)
    return transport


HANDSHAKE_CHECK_S = 1.0  # at most, between a handshake's looks at its deadlines (see below)


@functools.lru_cache(maxsize=2)
def _transport_class(certificate_first: bool) -> type:
    """paramiko's Transport (or hostkeys.CertificateFirstTransport) that waits for its
    handshake without waking ten times a second.

    Paramiko polls: its reader thread reads the socket with a 0.1 s timeout until fleet quiets
    it after the connect (`_quiet_transport`), the connecting thread waits for the key exchange
    and for the authentication in 0.1 s steps, and a timer thread per connection marks the
    handshake's deadline. A handshake is short alone, but hosts that connect at once queue for
    the hosts' and this machine's CPU: at 512 rack hosts, 128 taking the lease at once, a
    connect took seconds and those wake-ups were a control-side cost per host that grew with
    the fleet (docs/bench/log.md, "Control-side cost per host: what grew with the fleet"). Here
    the connecting thread waits on the event paramiko sets when the step ends or the transport
    dies, bounded by the step's own timeout; the reader looks at the deadlines every
    HANDSHAKE_CHECK_S (less for a connect timeout under 10 s); the handshake's deadline is a
    time, not a thread. Each deadline is kept: a timeout is noticed within one check. A host's
    debug message is read only when paramiko's log would show it."""
    import paramiko  # noqa: PLC0415

    base = hostkeys.CertificateFirstTransport if certificate_first else paramiko.Transport

    class QuietTransport(base):
        def __init__(self, sock, *args: Any, check_s: float | None = None,
                     **kwargs: Any) -> None:
            # read by Transport.__init__ as the socket's timeout
            self._active_check_timeout = min(HANDSHAKE_CHECK_S, max(0.1, (check_s or 10) / 10))
            super().__init__(sock, *args, packetizer_class=_deadline_packetizer(), **kwargs)

        def start_client(self, event=None, timeout=None):
            if event is not None:
                return super().start_client(event, timeout)
            done = threading.Event()
            super().start_client(done)
            done.wait(timeout)  # set by paramiko when the key exchange ends or the thread dies
            if not self.active:
                exc = self.get_exception()
                raise exc if exc is not None else paramiko.SSHException("Negotiation failed.")
            return None  # a timeout: as paramiko, the caller finds no session ("No existing ...")

        def auth_publickey(self, username, key, event=None):
            if event is not None:
                return super().auth_publickey(username, key, event)
            done = threading.Event()
            super().auth_publickey(username, key, done)
            # set by paramiko's auth handler on an answer, or when the transport dies
            if not done.wait(self.auth_timeout):
                raise paramiko.AuthenticationException("Authentication timeout.")
            return self.auth_handler.wait_for_response(done)  # done: returns (or raises) at once

        def _parse_debug(self, m):
            # A host's SSH_MSG_DEBUG (OpenSSH sends one at each login: the key's options) is
            # only ever logged at DEBUG, but paramiko first escapes it byte by byte in a Python
            # loop of bytes concatenations, ~55 us for sshd's 106-byte notice: ~0.5% of a
            # host's control-side CPU, spent on a line nobody sees. Unread unless that log is on.
            if self.logger.isEnabledFor(logging.DEBUG):
                super()._parse_debug(m)

    return QuietTransport


@functools.lru_cache(maxsize=1)
def _deadline_packetizer() -> type:
    """paramiko's Packetizer with the handshake's deadline kept as a time instead of a
    `threading.Timer` (a thread started and cancelled per connection). Same answers:
    `handshake_timed_out` is true once the deadline passed and until the handshake completes."""
    from paramiko.packet import Packetizer  # noqa: PLC0415

    class DeadlinePacketizer(Packetizer):
        _handshake_end: float | None = None
        _handshake_done = False

        def start_handshake(self, timeout):
            if self._handshake_end is None:
                self._handshake_end = time.monotonic() + float(timeout)

        def handshake_timed_out(self):
            return (self._handshake_end is not None and not self._handshake_done
                    and time.monotonic() >= self._handshake_end)

        def complete_handshake(self):
            if self._handshake_end is not None:
                self._handshake_done = True

    return DeadlinePacketizer


SEND_CHUNK = 1 << 18  # bytes read from the file per send; paramiko splits them into packets


class _SendFailed(Exception):
    """Sending a command's stdin failed (reported as the upload's failure)."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause



def _quiet_transport(transport) -> None:
    """Let the transport's reader thread wait for the host's next packet instead of waking ten
    times a second.

    Paramiko's reader polls its socket with a 0.1 s timeout to notice a close
    (`Transport._active_check_timeout`); with 32 hosts in flight for 78 s on a loaded machine
    those wake-ups were ~1 s of the control side's 1.4 s of CPU. Any timeout is a cost per
    host that grows with the fleet: a run holds every host's connection from its lease take to
    its release at the end, so a thousand hosts' readers sit idle for most of a four-minute run,
    and at one wake per 30 s (~70 us of CPU each) that was 6.6 wakes and ~0.5 ms per host at
    1,000 hosts, none at 64 (docs/bench/log.md, "What grows from 64 to 1,000 hosts at the same
    pace"). So a socket's reader waits with no timeout: a close still ends it at once
    (`_wake_reader` shuts the socket down under it, which also ends a `send` blocked on a host
    that stopped reading), a host that closes ends it, and paramiko checks for a rekey as
    packets pass; fleet sets no keepalive. A jump host's channel (the "socket" of the hop
    after it) keeps IDLE_CHECK_S: shutting a channel down does not wake its reader."""
    sock = getattr(transport, "sock", None)
    if sock is None:
        return
    try:
        sock.settimeout(None if isinstance(sock, socket.socket) else IDLE_CHECK_S)
    except (OSError, AttributeError):  # an exotic socket: the default stays
        pass


class _Ready:
    """Set while a channel's stdout or stderr has data or has ended: paramiko sets and clears
    each stream's flag (`BufferedPipe.set_event`), and the caller waits on both at once.

    Why not a thread per stream, or `chan.fileno()` and select: a thread per command cost its
    start and its wake-ups on every stderr packet, and a channel's fileno is two more pipe
    descriptors per host in flight. One condition needs neither."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._flags = [False, False]
        self.sides = (_Flag(self, 0), _Flag(self, 1))

    def flag(self, side: int, on: bool) -> None:
        with self._cond:
            self._flags[side] = on
            if on:
                self._cond.notify_all()

    def wait(self, timeout: float) -> bool:
        """Whether either stream is ready within `timeout` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self._flags[0] or self._flags[1], timeout)


class _Flag:
    """One stream's side of a _Ready, as the event paramiko's BufferedPipe sets and clears."""

    def __init__(self, ready: _Ready, side: int) -> None:
        self.ready, self.side = ready, side

    def set(self) -> None:
        self.ready.flag(self.side, True)

    def clear(self) -> None:
        self.ready.flag(self.side, False)


class _Streams:
    """A command's stdout and stderr, read in the calling thread as they arrive: stderr lines
    go to the callback (the installer's progress), stdout is kept whole."""

    def __init__(self, on_stderr_line: LineCallback | None) -> None:
        self._ready = _Ready()
        self._out: list[bytes] = []
        self._err = _LineWriter(on_stderr_line)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._ended = False

    def watch(self, chan) -> None:
        chan.in_buffer.set_event(self._ready.sides[0])
        chan.in_stderr_buffer.set_event(self._ready.sides[1])

    def wait(self, timeout: float) -> bool:
        return self._ready.wait(timeout)

    def drain(self, chan) -> bool:
        """Take in what has arrived, without waiting; True once both streams have ended."""
        ended = chan.eof_received or chan.closed  # before the reads: all data is buffered then
        try:
            while chan.recv_ready():
                self._out.append(chan.recv(1 << 20))
            while chan.recv_stderr_ready():
                self._err.write(self._decoder.decode(chan.recv_stderr(1 << 20)))
        except (OSError, EOFError):  # the channel broke: the caller reports it
            return False
        if ended and not self._ended:
            self._ended = True
            self._err.write(self._decoder.decode(b"", final=True))
        return ended

    def settle(self, chan, wait: float) -> None:
        """After a failure: take in what has arrived, waiting up to `wait` seconds for the
        streams to end; never raises (the failure is what gets reported)."""
        end = time.monotonic() + wait
        try:
            while not self.drain(chan):
                left = end - time.monotonic()
                if left <= 0 or not self.wait(left):
                    return
        except Exception:
            return

    def stdout(self) -> str:
        return b"".join(self._out).decode("utf-8", "replace")

    def stderr(self) -> str:
        return "".join(self._err.text)


def _source_name(local: Path | bytes) -> str:
    """What an upload sent, in its error: the file's name, or a patch (bytes)."""
    return "a patch" if isinstance(local, bytes) else local.name


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def nodelay_socket(host: str, port: int, timeout: float) -> socket.socket:
    """A connected TCP socket with Nagle's algorithm off.

    Paramiko sets no socket options; with Nagle on, a small SSH packet sent while an earlier one
    is unacknowledged waits for the peer's delayed ACK (~40 ms on Linux): measured on the harness,
    connect 72 -> 31 ms and each further channel open 43 -> 0.6 ms with TCP_NODELAY.
    """
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:  # not a TCP socket after all (exotic platforms): correctness is unaffected
        pass
    return sock


FD_RESERVE = 64  # descriptors the process keeps for itself: its files, pipes, logs, DNS
MACOS_OPEN_MAX = 10240  # macOS refuses a soft limit above OPEN_MAX when the hard one is infinite


def open_files_limit(hosts: list[Host]) -> int:
    """Raise this process's soft limit of open files to its hard limit, and return it.

    A changing run keeps one ssh connection per host open from the lease take to the release,
    so a fleet of 1,000 hosts needs ~1,000 sockets whatever `--parallel` is, and the usual soft
    limit is 1,024 (the hard one is usually far higher: raising the soft limit needs no
    privilege). Raises ValueError, naming the numbers and the fix, when even the hard limit
    cannot hold one socket per ssh host (two through a jump host) plus FD_RESERVE: better than
    failing hosts half-way with "Too many open files"."""
    try:
        import resource  # noqa: PLC0415  (POSIX only)
    except ImportError:
        return 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        for want in ([hard] if hard != resource.RLIM_INFINITY else []) + [MACOS_OPEN_MAX]:
            if want <= soft:
                continue
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
                soft = want
                break
            except (ValueError, OSError):
                continue
    need = FD_RESERVE + sum(0 if h.is_local else 1 + (h.jump.count(",") + 1 if h.jump else 0)
                             for h in hosts)
    if soft != resource.RLIM_INFINITY and need > soft:
        raise ValueError(f"{len(hosts)} hosts need ~{need} open files (one ssh connection each "
                         f"for the whole run), but this process may open {soft} (hard limit "
                         f"{hard}): raise it (`ulimit -n {need}` as root, or the "
                         "`nofile` limit in /etc/security/limits.conf) or deploy the hosts in "
                         "parts (`--hosts` a group at a time)")
    return soft


def connect(host: Host, ssh_config: Any = None) -> LocalConnection | SshConnection:
    """Open the right connection for `host` (errors name the host and the cause): the one place
    the control side reaches a host, so a simulation's hosts stand in here (runtime.opener).
    `ssh_config`: the run's parsed ssh_config (fleet.deploy.sshconfig.SshConfig); None reads
    the files for this connection."""
    if runtime.opener is not None:
        return runtime.opener(host)
    conn = LocalConnection(host) if host.is_local else SshConnection(host, ssh_config)
    conn.open()
    return conn


class Connections:
    """One connection per host for a whole run: the lease take, the deploy and the lease
    release share it instead of opening three. Each ssh handshake costs the control side ~10 ms
    of CPU (Paramiko's key exchange and authentication, under the GIL: they queue when many
    hosts connect at once) and the host ~20 ms (sshd's re-exec and key exchange), and one or two
    round trips; measured in docs/bench/log.md (bigger fleet). A connection that failed or
    dropped is opened again on the next use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, LocalConnection | SshConnection] = {}
        self._host_locks: dict[str, threading.Lock] = {}
        self._closed = False
        self._ssh_config: list = []  # [SshConfig] once read

    def _config(self) -> Any:
        """The ssh_config files, read once for the run's connections instead of once per host (a
        fleet's file, with a Host block per host, was parsed N times for N hosts). A file that
        cannot be read is not kept: each host reports it (as a failed connect)."""
        from fleet.deploy import sshconfig  # noqa: PLC0415

        with self._lock:
            if self._ssh_config:
                return self._ssh_config[0]
        try:
            config = sshconfig.default_config()
        except sshconfig.SshConfigError:
            return None  # the connect reads it again and reports the error for its host
        with self._lock:
            if not self._ssh_config:
                self._ssh_config.append(config)
            return self._ssh_config[0]

    def get(self, host: Host) -> LocalConnection | SshConnection:
        """The host's open connection, connecting first if it has none (or it dropped)."""
        with self._lock:
            host_lock = self._host_locks.setdefault(host.name, threading.Lock())
        with host_lock:  # two users of one host wait for one connect, never open two
            conn = self._open.get(host.name)
            if conn is not None and conn.is_active():
                return conn
            conn = connect(host, None if host.is_local else self._config())
            with self._lock:
                if not self._closed:
                    self._open[host.name] = conn
                    return conn
            # the run ended while this connect was under way (a late host): keep nothing open
            conn.close()
            raise ConnectionError_(f"{host.name}: the run's connections were closed while "
                                   "connecting")

    def drop(self, host: Host) -> None:
        """Close the host's connection after an error on it; the next `get` reconnects."""
        with self._lock:
            conn = self._open.pop(host.name, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._open = list(self._open.values()), {}
        for conn in conns:
            conn.close()
