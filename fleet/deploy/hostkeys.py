"""Host-key verification for ssh hosts: Fabric accepts unknown keys silently; we do not.

Fabric's `Connection.__init__` hard-codes paramiko's AutoAddPolicy. `apply()` replaces it on the
Connection's client before `open()`: it loads the inventory's known_hosts file (hashed entries
work too) and sets
- `strict` (default): an unknown host is refused with the key's fingerprint and how to trust it;
- `accept-new`: an unknown host is accepted and its key appended to known_hosts (trust on first
  use, recorded, thread-safe).
A *changed* key is refused under both policies (paramiko raises BadHostKeyException once a key for
that host is known); `explain()` turns that into a message saying which file to fix.

The file is read as OpenSSH reads it (sshd(8), "SSH_KNOWN_HOSTS FILE FORMAT"): a line it cannot
parse is skipped, not fatal to every host; a key on an `@revoked` line is refused by name, under
both policies, even where another line lists it; an `@cert-authority` line is recognised (it
does not spoil the file), and a host known only through one is refused saying so: fleet does
not verify host certificates (paramiko, its SSH library, does not), so such a host needs its own
key line. A dry run (`not_recording`) accepts a new key under `accept-new` for the connection
only, and writes nothing.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeyEntry

from fleet.deploy.sshconfig import pattern_list
from fleet.installer import textfile

_RECORD_LOCK = threading.Lock()
MAX_FILE_BYTES = 64 * textfile.MIB
_NOT_RECORDING = [0]  # > 0 while a dry run connects (`not_recording`)


@contextlib.contextmanager
def not_recording() -> Iterator[None]:
    """While it lasts, `accept-new` trusts a new key for the connection only (a dry run writes
    nothing, known_hosts included)."""
    with _RECORD_LOCK:
        _NOT_RECORDING[0] += 1
    try:
        yield
    finally:
        with _RECORD_LOCK:
            _NOT_RECORDING[0] -= 1


@dataclass
class KnownHosts:
    """A known_hosts file as OpenSSH reads it: the plain keys, the `@revoked` keys, and the
    host patterns of its `@cert-authority` lines."""

    keys: paramiko.HostKeys = field(default_factory=paramiko.HostKeys)
    entries: list = field(default_factory=list)  # (host name or hashed name, key), in order
    revoked: set = field(default_factory=set)  # (key type, key bytes)
    authorities: list = field(default_factory=list)  # host pattern lists

    def is_revoked(self, key: paramiko.PKey) -> bool:
        return (key.get_name(), key.asbytes()) in self.revoked

    def has_authority_for(self, hostname: str) -> bool:
        return any(pattern_list(hostname, patterns, lower=True)
                   for patterns in self.authorities)


def read_known_hosts(path: Path) -> KnownHosts:
    """Parse `path` line by line (see the module doc); an empty KnownHosts when it is absent."""
    known = KnownHosts()
    data = textfile.read_bytes(path, MAX_FILE_BYTES) if path.exists() else None
    text = data.decode("utf-8", "replace") if data else ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            marker, _, rest = line.partition(" ")
            fields = rest.split()
            if marker == "@revoked" and len(fields) >= 3:
                try:
                    known.revoked.add((fields[1], base64.b64decode(fields[2], validate=True)))
                except (binascii.Error, ValueError):
                    pass
            elif marker == "@cert-authority" and fields:
                known.authorities.append(fields[0])
            continue  # other markers: ignored, as ssh does
        try:
            entry = HostKeyEntry.from_line(line, number)
        except Exception:  # noqa: BLE001 (paramiko raises several kinds): skipped, as ssh does
            continue
        if entry is not None and entry.key is not None:
            for name in entry.hostnames:
                known.keys.add(name, entry.key.get_name(), entry.key)
                known.entries.append((name, entry.key))
    return known


class HostKeyError(RuntimeError):
    """An unknown or changed host key was refused."""


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _refuse_revoked(known: KnownHosts, path: Path, hostname: str, key: paramiko.PKey) -> None:
    if known.is_revoked(key):
        raise HostKeyError(f"{hostname}: host key {key.get_name()} {fingerprint(key)} is marked "
                           f"@revoked in {path}; refusing it (replace the host's key, or remove "
                           "the @revoked line if it is wrong)")


class RefuseUnknown(paramiko.MissingHostKeyPolicy):
    """`strict`: refuse any host whose key is not in known_hosts (or is revoked there)."""

    def __init__(self, known_hosts: Path, known: KnownHosts | None = None):
        self.known_hosts = known_hosts
        self.known = known or KnownHosts()

    def missing_host_key(self, client, hostname, key):
        _refuse_revoked(self.known, self.known_hosts, hostname, key)
        if self.known.has_authority_for(hostname):
            raise HostKeyError(
                f"{hostname}: {self.known_hosts} trusts a certificate authority for this host "
                "(@cert-authority), and fleet does not verify host certificates (paramiko does "
                f"not); add the host's own key line ({key.get_name()} {fingerprint(key)}: check "
                "it out of band, e.g. ssh-keyscan) to that file")
        raise HostKeyError(
            f"{hostname}: unknown host key {key.get_name()} {fingerprint(key)} (not in "
            f"{self.known_hosts}); check the fingerprint out of band, then add the host's line to "
            f"that file (e.g. ssh-keyscan), or set host_key_policy: accept-new for this host")


class RecordNew(paramiko.MissingHostKeyPolicy):
    """`accept-new`: trust on first use, appending the key to known_hosts (not a revoked one;
    during a dry run, for this connection only)."""

    def __init__(self, known_hosts: Path, known: KnownHosts | None = None):
        self.known_hosts = known_hosts
        self.known = known or KnownHosts()

    def missing_host_key(self, client, hostname, key):
        _refuse_revoked(self.known, self.known_hosts, hostname, key)
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        with _RECORD_LOCK:
            if not _NOT_RECORDING[0]:
                self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
                with open(self.known_hosts, "a", encoding="utf-8") as fh:
                    fh.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)


_PARSED: dict[Path, tuple[tuple[int, int], KnownHosts]] = {}
_PARSED_LOCK = threading.Lock()


def _parsed(path: Path) -> KnownHosts | None:
    """The known_hosts file parsed once per process (again when its size or mtime changes, as
    after an `accept-new` line): a fleet's file has a line per host, and parsing all of it for
    every connection made a run's key checks grow with the square of the fleet (64 hosts: 64 x
    64 keys decoded)."""
    try:
        st = path.stat()
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size)
    with _PARSED_LOCK:
        hit = _PARSED.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    known = read_known_hosts(path)
    with _PARSED_LOCK:
        _PARSED[path] = (stamp, known)
    return known


def apply(client: paramiko.SSHClient, known_hosts: str | Path, policy: str,
          hostname: str | None = None, port: int = 22) -> None:
    """Load known_hosts into `client` and set the missing-key policy (call before connecting).
    With `hostname` (and `port`), only that host's keys are loaded: all paramiko looks up."""
    path = Path(known_hosts).expanduser()
    known = _parsed(path) or KnownHosts()
    if hostname is None:
        for name, key in known.entries:
            if not known.is_revoked(key):
                client.get_host_keys().add(name, key.get_name(), key)
    else:
        name = hostname if port == 22 else f"[{hostname}]:{port}"  # as paramiko looks it up
        for keytype, key in (known.keys.lookup(name) or {}).items():
            if not known.is_revoked(key):  # revoked: the policy refuses it by name
                client.get_host_keys().add(name, keytype, key)
    if policy == "accept-new":
        client.set_missing_host_key_policy(RecordNew(path, known))
    elif policy == "strict":
        client.set_missing_host_key_policy(RefuseUnknown(path, known))
    else:
        raise ValueError(f"host_key_policy {policy!r}: use strict or accept-new")


def explain(exc: BaseException, known_hosts: str | Path) -> str | None:
    """A readable reason for host-key failures (None for other errors)."""
    if isinstance(exc, HostKeyError):
        return str(exc)
    if isinstance(exc, paramiko.BadHostKeyException):
        return (f"{exc.hostname}: host key CHANGED: it presents {exc.key.get_name()} "
                f"{fingerprint(exc.key)} but {known_hosts} has {fingerprint(exc.expected_key)}; "
                "refusing (possible man-in-the-middle). If the host was rebuilt, verify the new "
                f"key and replace its line in {known_hosts}")
    return None
