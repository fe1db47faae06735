"""Host-key verification for ssh hosts: Fabric accepts unknown keys silently; we do not.

Fabric's `Connection.__init__` hard-codes paramiko's AutoAddPolicy; fleet connects with
paramiko's SSHClient (fleet.deploy.connection), and `apply()` sets its policy before
connecting: it loads the inventory's known_hosts file (hashed entries work too) and sets
- `strict` (default): an unknown host is refused with the key's fingerprint and how to trust it;
- `accept-new`: an unknown host is accepted and its key appended to known_hosts (trust on first
  use, recorded, thread-safe).
A *changed* key is refused under both policies (paramiko raises BadHostKeyException once a key for
that host is known); `explain()` turns that into a message saying which file to fix.

The file is read as OpenSSH reads it (sshd(8), "SSH_KNOWN_HOSTS FILE FORMAT"): a line it cannot
parse is skipped, not fatal to every host; a key on an `@revoked` line is refused by name, under
both policies, even where another line lists it. A dry run (`not_recording`) accepts a new key
under `accept-new` for the connection only, and writes nothing.

Host certificates, as ssh(1) checks them (companies sign host keys with a CA instead of listing
every host's key). paramiko negotiates `*-cert-v01@openssh.com` host keys but checks nothing in
them, so fleet does, with `cryptography`'s OpenSSH certificate parser (already paramiko's own
dependency): for a host that an `@cert-authority` line's host patterns match (`[host]:port` off
port 22, as key lines), the connection asks for certificate algorithms first, then the plain
types listed for the host (ssh's order), and the certificate it gets is accepted when
- its signature verifies and it is a host certificate (not a user one),
- its signer is the key of an `@cert-authority` line matching the host,
- the host name fleet connects to (ssh's HostName, lower case) is one of its principals; a
  certificate listing none is refused: older OpenSSH took that as "any host", recent OpenSSH
  refuses it, and a certificate good for every host proves nothing about this one,
- now is inside its validity window (valid_after <= now < valid_before),
- it carries no critical option (none is defined for host certificates; ssh refuses any).
A certificate whose key or CA key is `@revoked` is refused outright. Any other refusal falls back,
as ssh's does, to the certificate's plain key: a key line for the host that lists it accepts the
host, a line listing another key is a changed key, and no line leaves it to the policy (`strict`
refuses, naming why the certificate was refused; `accept-new` records the plain key, as ssh
does). Hosts no `@cert-authority` line matches negotiate and are checked exactly as before.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime
import hashlib
import hmac
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from paramiko.hostkeys import HostKeyEntry

from fleet.deploy.sshconfig import pattern_list
from fleet.installer import textfile

_RECORD_LOCK = threading.Lock()
MAX_FILE_BYTES = 64 * textfile.MIB
_NOT_RECORDING = [0]  # > 0 while a dry run connects (`not_recording`)
CERT_SUFFIX = "-cert-v01@openssh.com"
RSA_ALGORITHMS = ("rsa-sha2-512", "rsa-sha2-256")  # what an `ssh-rsa` key line is negotiated as
SHOWN_PRINCIPALS = 5  # principals named in a refusal; the rest are counted
SHOWN_ID_CHARS = 80  # of a certificate's key id (the CA's free text) in a refusal


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


@dataclass(frozen=True)
class Authority:
    """One `@cert-authority` line: its host patterns, the CA's key and where it stands."""

    patterns: str
    key_type: str
    key: bytes
    line: int

    def matches(self, name: str) -> bool:
        """Whether the line's host field matches `name` (`host` or `[host]:port`): a pattern
        list, or one hashed name (`|1|salt|hash`), as known_hosts host fields are read."""
        if self.patterns.startswith("|1|"):
            try:
                return hmac.compare_digest(paramiko.HostKeys.hash_host(name, self.patterns),
                                           self.patterns)
            except (binascii.Error, ValueError, IndexError):
                return False
        return pattern_list(name, self.patterns, lower=True)


@dataclass
class KnownHosts:
    """A known_hosts file as OpenSSH reads it: the plain keys, the `@revoked` keys, and the
    `@cert-authority` lines.

    The key lines are indexed by host name (hashed names apart, each checked by its HMAC as
    paramiko's HostKeys does): `HostKeys.add` and `lookup` scan every line, so a fleet's file
    (a line per host) cost its N hosts N x N comparisons on every run."""

    entries: list = field(default_factory=list)  # (host name or hashed name, key), in order
    revoked: set = field(default_factory=set)  # (key type, key bytes)
    authorities: list[Authority] = field(default_factory=list)
    # name -> key type -> (position of the first line for that pair, key of the last such
    # line), as paramiko.HostKeys keeps them: a later line for a name and type replaces the key
    plain: dict = field(default_factory=dict)
    hashed: dict = field(default_factory=dict)  # the same for `|1|salt|hash` names

    def add(self, name: str, key: paramiko.PKey) -> None:
        table = self.hashed if name.startswith("|1|") else self.plain
        types = table.setdefault(name, {})
        kind = key.get_name()
        types[kind] = (types[kind][0] if kind in types else len(self.entries), key)
        self.entries.append((name, key))

    def is_revoked(self, key: paramiko.PKey) -> bool:
        return (key.get_name(), key.asbytes()) in self.revoked

    def has_authority_for(self, name: str) -> bool:
        return any(authority.matches(name) for authority in self.authorities)

    def listed_keys(self, name: str) -> list[paramiko.PKey]:
        """The keys of `name`'s key lines, revoked ones left out: one per key type (the first
        line's position, the last line's key), as paramiko's `HostKeys.lookup` answers."""
        found = list(self.plain.get(name, {}).items())
        if not name.startswith("|1|"):
            for hashed, types in self.hashed.items():
                try:
                    if hmac.compare_digest(paramiko.HostKeys.hash_host(name, hashed), hashed):
                        found.extend(types.items())
                except (binascii.Error, ValueError, IndexError):
                    continue
        chosen: dict[str, tuple[int, paramiko.PKey]] = {}
        for kind, (position, key) in sorted(found, key=lambda item: item[1][0]):
            chosen.setdefault(kind, (position, key))
        return [key for _, key in chosen.values() if not self.is_revoked(key)]


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
            marker, *fields = line.split()  # spaces or tabs, as ssh splits the fields
            if marker in ("@revoked", "@cert-authority") and len(fields) >= 3:
                try:
                    blob = base64.b64decode(fields[2], validate=True)
                except (binascii.Error, ValueError):
                    continue  # a line ssh cannot read: skipped
                if marker == "@revoked":
                    known.revoked.add((fields[1], blob))
                else:
                    known.authorities.append(Authority(fields[0], fields[1], blob, number))
            continue  # other markers: ignored, as ssh does
        try:
            entry = HostKeyEntry.from_line(line, number)
        except Exception:  # noqa: BLE001 (paramiko raises several kinds): skipped, as ssh does
            continue
        if entry is not None and entry.key is not None:
            for name in entry.hostnames:
                known.add(name, entry.key)
    return known


class HostKeyError(RuntimeError):
    """An unknown or changed host key, or a host certificate, was refused."""


def fingerprint(key: paramiko.PKey) -> str:
    return _fingerprint(key.asbytes())


def _fingerprint(blob: bytes) -> str:
    digest = hashlib.sha256(blob).digest()
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


def _openssh_blob(public_key) -> tuple[str, bytes]:
    """(type, wire bytes) of a `cryptography` public key, as a known_hosts line holds them."""
    key_type, b64 = public_key.public_bytes(serialization.Encoding.OpenSSH,
                                            serialization.PublicFormat.OpenSSH).split()[:2]
    return key_type.decode(), base64.b64decode(b64)


def _when(stamp: int) -> str:
    try:
        moment = datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"{stamp} (seconds since 1970)"
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _names(values: list[bytes]) -> str:
    shown = ", ".join(v.decode("utf-8", "replace") for v in values[:SHOWN_PRINCIPALS])
    more = len(values) - SHOWN_PRINCIPALS
    return shown + (f" and {more} more" if more > 0 else "")


class _Refused(Exception):
    """Why a certificate is not accepted; ssh then tries the certificate's plain key."""

    def __init__(self, why: str, fix: str):
        super().__init__(why)
        self.why, self.fix = why, fix


class CertificateOrKey(paramiko.MissingHostKeyPolicy):
    """A host that an `@cert-authority` line matches: its certificate is checked as ssh checks
    it, and, failing that or without one, its plain key as ssh falls back to it (see the module
    doc). `record` is the `accept-new` policy for a key no line lists (None under strict)."""

    def __init__(self, known_hosts: Path, known: KnownHosts, hostname: str, name: str,
                 record: RecordNew | None):
        self.known_hosts = known_hosts
        self.known = known
        self.hostname = hostname.lower()  # what a principal must equal, as ssh compares it
        self.name = name  # `host` or `[host]:port`, what known_hosts lines match
        self.record = record

    def missing_host_key(self, client, hostname, key):
        _refuse_revoked(self.known, self.known_hosts, hostname, key)
        blob = getattr(key, "public_blob", None)
        if blob is not None and blob.key_type.endswith(CERT_SUFFIX):
            try:
                self._verify(blob.key_type, blob.key_blob)
                return
            except _Refused as refusal:
                refused = _Refused(f"host certificate refused: {refusal.why}", refusal.fix)
        else:
            line = next(a.line for a in self.known.authorities if a.matches(self.name))
            refused = _Refused(
                f"no host certificate: the host presented its plain key, while @cert-authority "
                f"line {line} of {self.known_hosts} trusts a CA for it",
                "give the host a certificate signed by that CA (HostCertificate in its "
                "sshd_config)")
        listed = self.known.listed_keys(self.name)
        if any((k.get_name(), k.asbytes()) == (key.get_name(), key.asbytes()) for k in listed):
            return  # its own key line vouches for it, as ssh's fallback to the plain key does
        if listed:
            raise HostKeyError(
                f"{hostname}: host key CHANGED: it presents {key.get_name()} {fingerprint(key)} "
                f"but {self.known_hosts} has {fingerprint(listed[0])} ({refused.why}); "
                "refusing (possible man-in-the-middle): "
                f"{refused.fix}, or, if the host was rebuilt, verify its new key and replace "
                f"its line in {self.known_hosts}")
        if self.record is not None:
            self.record.missing_host_key(client, hostname, key)
            return
        raise HostKeyError(
            f"{hostname}: {refused.why}; its key {key.get_name()} "
            f"{fingerprint(key)} has no line of its own in {self.known_hosts} either. Fix: "
            f"{refused.fix}, or add the host's own key line after checking it out of band")

    def _verify(self, key_type: str, blob: bytes) -> None:
        """Accept the certificate (return), refuse it for good (HostKeyError), or say why not
        (_Refused, after which its plain key is tried)."""
        try:
            cert = serialization.load_ssh_public_identity(
                key_type.encode() + b" " + base64.b64encode(blob))
            cert.verify_cert_signature()
        except (ValueError, UnsupportedAlgorithm, InvalidSignature) as exc:
            raise HostKeyError(f"{self.name}: its host certificate ({key_type}) is not valid: "
                               f"its signature does not verify or it cannot be read "
                               f"({type(exc).__name__}); refusing it") from None
        ca_type, ca_blob = _openssh_blob(cert.signature_key())
        ca = f"CA {ca_type} {_fingerprint(ca_blob)}"
        if (ca_type, ca_blob) in self.known.revoked:
            raise HostKeyError(f"{self.name}: its host certificate is signed by {ca}, which is "
                               f"marked @revoked in {self.known_hosts}; refusing it (re-sign the "
                               "host's key with a CA that is not revoked, or remove the @revoked "
                               "line if it is wrong)")
        key_id = cert.key_id.decode("utf-8", "replace")[:SHOWN_ID_CHARS]
        ident = f'certificate "{key_id}" signed by {ca}'
        lines = [a for a in self.known.authorities if (a.key_type, a.key) == (ca_type, ca_blob)]
        if not any(a.matches(self.name) for a in lines):
            if lines:
                raise _Refused(
                    f"its {ident} is trusted by @cert-authority line {lines[0].line} of "
                    f"{self.known_hosts} only for {lines[0].patterns}, not for {self.name}",
                    f"add {self.name} to that line's host patterns")
            raise _Refused(f"its {ident} is not a CA that {self.known_hosts} trusts for "
                           f"{self.name} (no @cert-authority line has that key)",
                           "re-sign the host's key with the CA that file trusts, or add this "
                           "CA's @cert-authority line after checking its fingerprint")
        now = time.time()
        if cert.type != serialization.SSHCertificateType.HOST:
            raise _Refused(f"its {ident} is a user certificate, not a host certificate",
                           "sign the host's key as a host certificate (ssh-keygen -s CA -h)")
        if now < cert.valid_after:
            raise _Refused(f"its {ident} is not valid before {_when(cert.valid_after)}",
                           "check this machine's clock, or re-sign the host's key (-V)")
        if now >= cert.valid_before:
            raise _Refused(f"its {ident} expired at {_when(cert.valid_before)}",
                           "renew the host's certificate (ssh-keygen -s CA -h -V ...)")
        if not cert.valid_principals:
            raise _Refused(f"its {ident} lists no principals (a certificate for any host; "
                           "recent OpenSSH refuses these too)",
                           "re-sign the host's key naming it "
                           f"(ssh-keygen -s CA -h -n {self.hostname})")
        principals = [p.decode("utf-8", "replace") for p in cert.valid_principals]
        if self.hostname not in principals:
            raise _Refused(f"its {ident} is for {_names(cert.valid_principals)}, not "
                           f"{self.hostname}",
                           f"re-sign the host's key with {self.hostname} among its principals "
                           "(ssh-keygen -s CA -h -n ...), or connect by a name it lists")
        if cert.critical_options:
            raise _Refused(f"its {ident} carries critical options "
                           f"({_names(list(cert.critical_options))}), which a host "
                           "certificate may not",
                           "re-sign the host's key without critical options (-O)")


class CertificateFirstTransport(paramiko.Transport):
    """A Transport that asks for the host's certificate first, then for the plain key types
    its known_hosts lines list (`known_types`), then for the rest: ssh's order for a host that
    an `@cert-authority` line matches. (paramiko appends the certificate algorithms last.)"""

    known_types: tuple[str, ...] = ()

    @property
    def preferred_keys(self):
        offered = super().preferred_keys
        first = [k for k in offered if k.endswith(CERT_SUFFIX)]
        first += [k for k in offered if k in self.known_types and k not in first]
        return tuple(first) + tuple(k for k in offered if k not in first)


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
    with _PARSED_LOCK:  # one parse when many hosts connect at once, not one each
        hit = _PARSED.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        known = read_known_hosts(path)
        _PARSED[path] = (stamp, known)
        return known


def apply(client: paramiko.SSHClient, known_hosts: str | Path, policy: str,
          hostname: str | None = None, port: int = 22) -> tuple[str, ...] | None:
    """Load known_hosts into `client` and set the missing-key policy (call before connecting).
    With `hostname` (and `port`), only that host's keys are loaded: all paramiko looks up.

    Returns None, or, for a host an `@cert-authority` line matches, the plain key types its
    key lines list: connect it with a CertificateFirstTransport whose `known_types` they are
    (its policy then checks every key the host presents, certificate or not)."""
    if policy not in ("strict", "accept-new"):
        raise ValueError(f"host_key_policy {policy!r}: use strict or accept-new")
    path = Path(known_hosts).expanduser()
    known = _parsed(path) or KnownHosts()
    record = RecordNew(path, known) if policy == "accept-new" else None
    if hostname is None:
        for name, key in known.entries:
            if not known.is_revoked(key):
                client.get_host_keys().add(name, key.get_name(), key)
    else:
        name = hostname if port == 22 else f"[{hostname}]:{port}"  # as paramiko looks it up
        if known.has_authority_for(name):
            client.set_missing_host_key_policy(
                CertificateOrKey(path, known, hostname, name, record))
            types = [k.get_name() for k in known.listed_keys(name)]
            return tuple(dict.fromkeys(
                t for kt in types for t in (RSA_ALGORITHMS if kt == "ssh-rsa" else (kt,))))
        for key in known.listed_keys(name):  # revoked: the policy refuses it by name
            client.get_host_keys().add(name, key.get_name(), key)
    client.set_missing_host_key_policy(record or RefuseUnknown(path, known))
    return None


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
