"""Host-key verification for ssh hosts: Fabric accepts unknown keys silently; we do not.

Fabric's `Connection.__init__` hard-codes paramiko's AutoAddPolicy. `apply()` replaces it on the
Connection's client before `open()`: it loads the inventory's known_hosts file (hashed entries
work too) and sets
- `strict` (default): an unknown host is refused with the key's fingerprint and how to trust it;
- `accept-new`: an unknown host is accepted and its key appended to known_hosts (trust on first
  use, recorded, thread-safe).
A *changed* key is refused under both policies (paramiko raises BadHostKeyException once a key for
that host is known); `explain()` turns that into a message saying which file to fix.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from pathlib import Path

import paramiko

_RECORD_LOCK = threading.Lock()


class HostKeyError(RuntimeError):
    """An unknown or changed host key was refused."""


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class RefuseUnknown(paramiko.MissingHostKeyPolicy):
    """`strict`: refuse any host whose key is not in known_hosts."""

    def __init__(self, known_hosts: Path):
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key):
        raise HostKeyError(
            f"{hostname}: unknown host key {key.get_name()} {fingerprint(key)} (not in "
            f"{self.known_hosts}); check the fingerprint out of band, then add the host's line to "
            f"that file (e.g. ssh-keyscan), or set host_key_policy: accept-new for this host")


class RecordNew(paramiko.MissingHostKeyPolicy):
    """`accept-new`: trust on first use, appending the key to known_hosts."""

    def __init__(self, known_hosts: Path):
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key):
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        with _RECORD_LOCK:
            self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
            with open(self.known_hosts, "a", encoding="utf-8") as fh:
                fh.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)


_PARSED: dict[Path, tuple[tuple[int, int], paramiko.HostKeys]] = {}
_PARSED_LOCK = threading.Lock()


def _parsed(path: Path) -> paramiko.HostKeys | None:
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
    keys = paramiko.HostKeys()
    keys.load(str(path))
    with _PARSED_LOCK:
        _PARSED[path] = (stamp, keys)
    return keys


def apply(client: paramiko.SSHClient, known_hosts: str | Path, policy: str,
          hostname: str | None = None, port: int = 22) -> None:
    """Load known_hosts into `client` and set the missing-key policy (call before connecting).
    With `hostname` (and `port`), only that host's keys are loaded: all paramiko looks up."""
    path = Path(known_hosts).expanduser()
    if hostname is None:
        if path.is_file():
            client.get_host_keys().load(str(path))
    else:
        name = hostname if port == 22 else f"[{hostname}]:{port}"  # as paramiko looks it up
        keys = _parsed(path)
        for keytype, key in ((keys.lookup(name) if keys is not None else None) or {}).items():
            client.get_host_keys().add(name, keytype, key)
    if policy == "accept-new":
        client.set_missing_host_key_policy(RecordNew(path))
    elif policy == "strict":
        client.set_missing_host_key_policy(RefuseUnknown(path))
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
