"""The inventory: which hosts exist, how to reach them, and where their gateway state lives.

YAML in Ansible's shape, validated on load so a typo fails before anything connects:

    vars:                      # defaults for every host
      host_key_policy: strict
    hosts:
      cloud: {host: cloud.invalid, user: opc}
      mac:   {connection: local}
    groups:
      production: {hosts: [cloud, mac], vars: {python: python3}}
      everything: {groups: [production, sandbox]}

Host keys (in `vars`, a group's `vars` or the host itself):
  connection       ssh (default) | local (same installer through a subprocess, no ssh)
  host, port, user ssh address (default: the host's name), port 22, login user
  identity_file    private key for ssh;  jump: `[user@]host[:port]` of a jump host,
                   several as `a,b` (b reached through a), as ssh's ProxyJump
  known_hosts      file of trusted host keys (default ~/.ssh/known_hosts)
  host_key_policy  strict (default: unknown or changed keys refused) | accept-new (record new)
  python           interpreter on the host (default python3, 3.9+)
  state_dir        OpenClaw state dir on the host (default ~/.openclaw)
  gateway          {manager: fleet|systemd|launchd|openclaw|command, options: {k: v}}
  timeouts         seconds: connect (also banner, auth), command, transfer, ready, lock (wait)
  site             where the host is, for `deploy --engine temporal`: its task queue, served by
                   `invoke worker --queue SITE` inside that network (default: default)

Precedence: built-in defaults < top-level `vars` < group `vars` (outer groups first) < host keys.
For ssh hosts, `~/.ssh/config` fills in what the inventory leaves unset (fleet/deploy/sshconfig.py).

Reach of the selectors (`--hosts`, patterns as Ansible's `--limit`: fleet/deploy/hostpattern.py):
a host name selects that host, a group its members, and `all` every host *outside the sandbox*.
Sandbox hosts are local hosts whose state dir lies in the `.fleet/` directory beside the inventory
file (they can never touch the operator's own `~/.openclaw`); they are reached only by naming them
or their group (`sandbox`). `all` is reserved
and so are names with commas or spaces (the selector syntax), for hosts and groups alike.

Names are what people read in reports and type after `-H`, so a name must look like itself: one
with a control, invisible or bidi character (U+202E, a zero-width space, an escape) is refused,
and names are compared after Unicode NFKC normalisation, the form Python compares identifiers
in and IDNA maps host names with: `café` typed precomposed or with a combining accent, or `ｐｉ`
typed in full-width forms, is the one host the file defines (shown as the file spells it). Two
definitions that normalise to one name are an error naming both spellings, as a key given twice
is: which of the two hosts' settings to keep is the operator's call, not fleet's.
Relative paths (state_dir of local hosts, identity_file, known_hosts) are relative to the inventory
file. Every error names the file, the key path and what would fix it.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import socket
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from fleet.deploy import hostpattern
from fleet.installer import textfile
from fleet.installer.protocol import FLEET_MANAGER, MANAGERS, READY_TIMEOUT_S, wait_problem

CONNECTIONS = ("ssh", "local")
POLICIES = ("strict", "accept-new")
VAR_TYPES: dict[str, type | tuple] = {
    "connection": str, "host": str, "port": int, "user": str, "identity_file": str,
    "known_hosts": str, "host_key_policy": str, "jump": str, "python": str, "state_dir": str,
    "gateway": dict, "timeouts": dict, "site": str,
}
# a site names the Temporal task queue whose workers reach the host (`invoke worker --queue`)
SITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
DEFAULT_SITE = "default"
GATEWAY_KEYS = ("manager", "options")
TOP_KEYS = ("vars", "hosts", "groups")
GROUP_KEYS = ("hosts", "groups", "vars")
RESERVED = ("all",)
DEFAULT_SELECTION = "sandbox"  # what the tasks select without -H
SANDBOX_DIR = ".fleet"  # beside the inventory file: where sandbox hosts keep their state


def control_dir(inventory_path: str | Path) -> Path:
    """`.fleet/` beside the inventory: the control side's own records of this inventory (deploy
    log, confirmations, rollouts, bad releases) and its sandbox hosts' state."""
    return Path(inventory_path).parent / SANDBOX_DIR


class InventoryError(ValueError):
    """A bad inventory or host selection; the message names file, key path and fix."""


@dataclass(frozen=True)
class Timeouts:
    """Seconds a host gets for each stage of a run, defaults applied once, here. A value of 0
    means the default, except `lock`, where 0 means "refuse at once if the host lock is busy"."""

    connect: float = 10.0  # also the ssh banner and authentication
    command: float = 180.0  # one command (status, check, doctor)
    transfer: float = 120.0  # one upload
    ready: float = READY_TIMEOUT_S  # each restart and readiness wait (installer --timeout)
    lock: float = 0.0  # waiting for a busy host lock (installer --lock-wait)

    @classmethod
    def of(cls, values: Mapping[str, Any] | Timeouts | None, host: str) -> Timeouts:
        """From an inventory's `timeouts` mapping; InventoryError names the host and key."""
        if isinstance(values, Timeouts):
            return values
        if values is not None and not isinstance(values, Mapping):
            raise InventoryError(f"host {host}: timeouts: expected a mapping of seconds, got "
                                 f"{values!r}")
        defaults = cls()
        chosen: dict[str, float] = {}
        for key, value in (values or {}).items():
            if key not in TIMEOUT_KEYS:
                raise InventoryError(f"host {host}: timeouts.{key}: unknown key; use one of "
                                     f"{', '.join(TIMEOUT_KEYS)}")
            problem = timeout_problem(value)
            if problem:
                raise InventoryError(f"host {host}: timeouts.{key}: {problem}")
            chosen[key] = float(value) or (0.0 if key == "lock" else getattr(defaults, key))
        return cls(**chosen)


TIMEOUT_KEYS = tuple(f.name for f in fields(Timeouts))


def timeout_problem(value: Any) -> str | None:
    """What is wrong with a timeout's value (None if nothing): a number of seconds from 0 to
    MAX_WAIT_S, a day (beyond it, or inf/nan, a wait overflows or a lease outlives everyone)."""
    problem = wait_problem(value)
    return problem and (problem + " (0 means the default)" if "at most" in problem else problem)


@dataclass(frozen=True)
class Host:
    """One resolved host: every var filled in, paths absolute where they are local."""

    name: str
    connection: str = "ssh"
    host: str = ""
    port: int = 22
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str = "~/.ssh/known_hosts"
    host_key_policy: str = "strict"
    jump: str | None = None
    python: str = "python3"
    state_dir: str = "~/.openclaw"
    manager: str = FLEET_MANAGER
    manager_options: dict = field(default_factory=dict)
    timeouts: Timeouts = field(default_factory=Timeouts)  # a mapping is turned into one
    site: str = DEFAULT_SITE  # the Temporal engine's task queue for this host (its workers)
    sandbox: bool = False  # local, state dir inside `.fleet/` beside the inventory
    # var names the inventory set (ssh_config fills the rest); None (a Host built in Python):
    # every field is meant as given
    explicit: frozenset | None = None
    inventory: str | None = None  # the file that defines it (for commands fleet prints)

    def __post_init__(self) -> None:
        if not isinstance(self.timeouts, Timeouts):  # a Host built in Python with a dict
            object.__setattr__(self, "timeouts", Timeouts.of(self.timeouts, self.name))

    @property
    def is_local(self) -> bool:
        return self.connection == "local"

    def describe(self) -> str:
        if self.is_local:
            return f"{self.name} (local, {self.state_dir})"
        who = f"{self.user}@" if self.user else ""
        return f"{self.name} ({who}{self.host}:{self.port})"


@dataclass
class Inventory:
    path: Path
    hosts: dict[str, Host]
    groups: dict[str, list[str]]  # group -> member host names (flattened, ordered)

    def names(self) -> list[str]:
        return sorted(self.hosts) + sorted(self.groups) + ["all"]

    def select_default(self) -> list[Host]:
        """The tasks' selection when no -H is given: DEFAULT_SELECTION, explained when this
        inventory has no host or group of that name (an operator never typed it)."""
        if not any(name_key(n) == name_key(DEFAULT_SELECTION)
                   for n in (*self.groups, *self.hosts)):
            raise InventoryError(
                f"{self.path}: no --hosts (-H) given, so fleet selects '{DEFAULT_SELECTION}' "
                "(the local sandbox hosts), and this inventory has no host or group of that "
                f"name; pass -H with one of: "
                f"{', '.join(self.names()) or 'none (the inventory defines no host)'}")
        return self.select(DEFAULT_SELECTION)

    def select(self, spec: str | list[str] | None) -> list[Host]:
        """Hosts of the pattern `spec` (fleet/deploy/hostpattern.py: names, groups, `all` =
        every host outside the sandbox, `!`, `&`, wildcards), in order, without duplicates. An
        empty selection is an error, never "everything"."""
        items = spec.split(",") if isinstance(spec, str) else list(spec or [])
        if not [i for i in items if str(i).strip()]:
            raise InventoryError(f"{self.path}: no hosts selected (--hosts {spec!r}); pass "
                                 f"--hosts with one of: {', '.join(self.names())}")
        spelled = {name_key(n): n for n in (*self.groups, *self.hosts, "all")}
        terms = hostpattern.parse(items, lambda t: name_key(t) in spelled)
        try:
            chosen = hostpattern.evaluate(
                terms, lambda t: self._term_hosts(t, spelled),
                lambda: self._term_hosts(hostpattern.Term("", "all"), spelled))
        except hostpattern.PatternError as exc:
            raise InventoryError(f"{self.path}: --hosts {_shown(spec)}: {exc}") from None
        if not chosen:
            raise InventoryError(f"{self.path}: --hosts {_shown(spec)} selects no host")
        return [self.hosts[n] for n in chosen]

    def _term_hosts(self, term: hostpattern.Term, spelled: dict[str, str]) -> list[str]:
        """One term's host names (see `select`); an error naming the term when it names or
        matches nothing."""
        name = spelled.get(name_key(term.text))  # `ｐｉ` (full-width) selects `pi`
        if name == "all":
            members = [n for n, h in self.hosts.items() if not h.sandbox]
            if not members:
                raise InventoryError(
                    f"{self.path}: 'all' means every host outside the sandbox, and this "
                    f"inventory has none; name sandbox hosts or their group instead "
                    f"(e.g. --hosts {next(iter(self.groups), next(iter(self.hosts)))})")
            return members
        if name in self.hosts:
            return [name]
        if name in self.groups:
            return list(self.groups[name])
        if not term.wildcard:
            hint = difflib.get_close_matches(term.text, self.names(), n=1)
            maybe = f" (did you mean '{term.op}{hint[0]}'?)" if hint else ""
            raise InventoryError(
                f"{self.path}: unknown host or group '{term}'{maybe}; known hosts: "
                f"{', '.join(sorted(self.hosts)) or 'none'}; groups: "
                f"{', '.join(sorted(self.groups)) or 'none'}; or 'all'")
        match = hostpattern.matcher(term.text)
        # a wildcard widens a selection only outside the sandbox (see hostpattern)
        reach = (lambda n: True) if term.op else (lambda n: not self.hosts[n].sandbox)
        members: list[str] = []
        for group in (g for g in self.groups if match(g)):
            members.extend(n for n in self.groups[group] if reach(n) and n not in members)
        members.extend(n for n in self.hosts if match(n) and reach(n) and n not in members)
        if members:
            return members
        sandboxed = any(match(n) for n in (*self.hosts, *self.groups))
        why = ("matches only sandbox hosts, which a wildcard does not select; name them or "
               "their group" if sandboxed else "matches no host or group")
        raise InventoryError(
            f"{self.path}: --hosts term '{term}' {why}; known hosts: "
            f"{', '.join(sorted(self.hosts)) or 'none'}; groups: "
            f"{', '.join(sorted(self.groups)) or 'none'}")


def _shown(spec: str | list[str] | None) -> str:
    """The pattern as the operator typed it, quoted for a shell."""
    text = spec if isinstance(spec, str) else ",".join(str(i) for i in spec or [])
    return shlex.quote(text)


def _where(path: Path, keys: list[str]) -> str:
    return f"{path}: {'.'.join(keys) if keys else '(top level)'}"


def _unknown(path: Path, keys: list[str], key: Any, allowed: tuple | list) -> InventoryError:
    hint = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1)
    maybe = f"did you mean '{hint[0]}'? " if hint else ""
    return InventoryError(f"{_where(path, keys + [str(key)])}: unknown key; {maybe}"
                          f"allowed keys: {', '.join(allowed)}")


def _mapping(path: Path, keys: list[str], value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InventoryError(f"{_where(path, keys)}: expected a mapping (key: value), got "
                             f"{type(value).__name__} {value!r}")
    return value


def _check_vars(path: Path, keys: list[str], data: Any, errors: list | None = None) -> dict:
    """The valid part of a vars mapping; each problem is appended to `errors` (or raised at
    once when no list is given), so a file's mistakes are all reported in one go."""
    problems: list[InventoryError] = [] if errors is None else errors
    start = len(problems)
    try:
        data = _mapping(path, keys, data)
    except InventoryError as exc:
        problems.append(exc)
        data = {}
    good: dict = {}
    for key, value in data.items():
        problem = _var_problem(path, keys, key, value)
        if problem is None:
            good[key] = value
        else:
            problems.append(problem)
    if errors is None and len(problems) > start:
        raise problems[start]
    return good


def _var_problem(path: Path, here: list[str], key: Any, value: Any) -> InventoryError | None:
    """What is wrong with one var (None if nothing)."""
    if key not in VAR_TYPES:
        return _unknown(path, here, key, tuple(VAR_TYPES))
    want = VAR_TYPES[key]
    at = _where(path, here + [key])
    if value is None or isinstance(value, bool) or not isinstance(value, want):
        return InventoryError(f"{at}: expected {getattr(want, '__name__', want)}, got {value!r}")
    if key == "connection" and value not in CONNECTIONS:
        return InventoryError(f"{at}: '{value}' is not one of {', '.join(CONNECTIONS)}")
    if key == "host_key_policy" and value not in POLICIES:
        return InventoryError(f"{at}: '{value}' is not one of {', '.join(POLICIES)} (strict "
                              "refuses unknown keys; accept-new records them)")
    if key == "site" and not SITE_NAME.fullmatch(value):
        return InventoryError(f"{at}: {value!r} is not a site name (letters, digits, '.', '_' "
                              "and '-', at most 63, starting with a letter or digit)")
    if key == "port" and not 0 < value < 65536:
        return InventoryError(f"{at}: {value} is not a TCP port")
    if key == "jump" and value.strip().lower() != "none":
        try:
            for hop in value.split(","):
                parse_jump(hop)
        except ValueError as exc:
            return InventoryError(f"{at}: {exc}")
    if key == "gateway":
        for gkey, gval in value.items():
            if gkey not in GATEWAY_KEYS:
                return _unknown(path, here + ["gateway"], gkey, GATEWAY_KEYS)
            if gkey == "manager" and gval not in MANAGERS:
                return InventoryError(f"{_where(path, here + ['gateway', 'manager'])}: "
                                      f"'{gval}' is not one of {', '.join(MANAGERS)}")
            if gkey == "options":
                try:
                    opts = _mapping(path, here + ["gateway", "options"], gval)
                except InventoryError as exc:
                    return exc
                for okey, oval in opts.items():
                    if not isinstance(oval, (str, int, float)) or isinstance(oval, bool):
                        return InventoryError(
                            f"{_where(path, here + ['gateway', 'options', okey])}: expected a "
                            f"string, got {oval!r}")
    if key == "timeouts":
        for tkey, tval in value.items():
            if tkey not in TIMEOUT_KEYS:
                return _unknown(path, here + ["timeouts"], tkey, TIMEOUT_KEYS)
            problem = timeout_problem(tval)
            if problem:
                return InventoryError(f"{_where(path, here + ['timeouts', tkey])}: {problem}")
    return None


def parse_jump(spec: str) -> tuple[str | None, str, int | None]:
    """One jump host as OpenSSH 9 reads a ProxyJump hop -> (user, host, port or None);
    ValueError says what is wrong. Two forms, as ssh takes them (`ssh -G` agrees case by case,
    tests/deploy/test_sshconfig_conformance.py):

    - `[user@]host[:port]`, the host in brackets for an IPv6 address (`ops@[::1]:2222`, as
      `ssh -G` prints a hop); the user is what stands before the last `@`;
    - `ssh://[user@]host[:port][/]` (the scheme in lower case), where the host must be a host
      name: OpenSSH takes no IPv6 address in an ssh:// URI, bracketed or not.

    A port is a number 1-65535 or a service name (`ssh`), as ssh's a2port reads it."""
    text = spec.strip()
    if any(c.isspace() for c in text) or "," in text:
        raise ValueError(_not_a_jump(spec))
    if text.startswith("ssh://"):
        return _jump_uri(spec, text[6:])
    user, at, rest = text.rpartition("@")
    if at and not user:
        raise ValueError(_not_a_jump(spec))
    host, delim, tail = _host_part(spec, rest)
    if delim == "/":  # only an ssh:// URI may go on with a `/`
        raise ValueError(_not_a_jump(spec))
    return user or None, host, _jump_port(spec, tail) if tail else None


def _not_a_jump(spec: str) -> str:
    return (f"'{spec}' is not a jump host; write [user@]host[:port], e.g. "
            "admin@bastion.example.com:22 (or a Host alias of ~/.ssh/config, an IPv6 address in "
            "brackets: ops@[2001:db8::1]:22), several as a,b")


def _host_part(spec: str, rest: str) -> tuple[str, str, str]:
    """(host, the delimiter after it: ':', '/' or '', what follows) as ssh's hpdelim2 and
    cleanhostname split them: a host in brackets ends at `]`, another at the first `:` or
    `/`."""
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0:
            raise ValueError(_not_a_jump(spec))
        raw, after = rest[:close + 1], rest[close + 1:]
    else:
        cut = min([i for i in (rest.find(":"), rest.find("/")) if i >= 0] or [len(rest)])
        raw, after = rest[:cut], rest[cut:]
    if after and after[0] not in ":/":  # text after the bracket that is not a port
        raise ValueError(_not_a_jump(spec))
    host = raw[1:-1] if raw.startswith("[") and raw.endswith("]") else raw
    if not host:
        raise ValueError(_not_a_jump(spec))
    return host, after[:1], after[1:]


def _jump_port(spec: str, text: str) -> int:
    port = a2port(text)
    if not port:
        raise ValueError(f"'{spec}': port '{text}' is not a TCP port (1-65535) nor a service "
                         "name")
    return port


def _jump_uri(spec: str, rest: str) -> tuple[str | None, str, int | None]:
    """`ssh://` + `rest` as OpenSSH's parse_uri reads it (user before the first `@`, its
    `;params` dropped and %XX decoded; the host a valid host name)."""
    user = None
    if "@" in rest:
        raw_user, _, rest = rest.partition("@")
        raw_user = raw_user.partition(";")[0]
        if not raw_user or not _URI_USER.fullmatch(raw_user):
            raise ValueError(_not_a_jump(spec))
        user = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), raw_user)
    host, delim, tail = _host_part(spec, rest)
    if ":" in host:
        raise ValueError(f"'{spec}': OpenSSH takes no IPv6 address in an ssh:// jump host; "
                         f"write [user@][{host}]:port instead")
    if not _HOST_NAME.fullmatch(host) or ".." in host:
        raise ValueError(f"'{spec}': '{host}' is not a host name (letters, digits, '.', '-' "
                         "and '_', starting with a letter or digit), as an ssh:// jump host "
                         "must be")
    port = None
    if delim == ":" and tail:
        text, _, tail = tail.partition("/")
        port = _jump_port(spec, text)
    if tail:
        raise ValueError(f"'{spec}': an ssh:// jump host has no path; write "
                         "ssh://[user@]host[:port]")
    return user, host.removesuffix("."), port


_URI_USER = re.compile(r"(?:[^%]|%[0-9A-Fa-f]{2})+")
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def a2port(text: str) -> int | None:
    """A port as OpenSSH's a2port reads it: a decimal number 0-65535 (a sign and leading zeros
    allowed) or a TCP service name from the services database; None when it is neither. ssh
    refuses 0 where it takes a port, as callers do."""
    if re.fullmatch(r"[+-]?[0-9]+", text):
        number = int(text)
        return number if 0 <= number <= 65535 else None
    try:
        return socket.getservbyname(text, "tcp")
    except (OSError, ValueError, UnicodeError):
        return None


# Characters that do not show, or reorder what is around them, where a name is printed: the
# general categories of controls, format characters (bidi controls, zero-width characters),
# surrogates, private use, unassigned code points and separators, plus the default-ignorable
# marks and fillers outside them (combining grapheme joiner, Hangul fillers, Khmer inherent
# vowels, Mongolian and other variation selectors).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_HIDDEN_EXTRA = frozenset(chr(c) for c in (
    0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, *range(0x180B, 0x1810),
    *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)))


def _hidden(c: str) -> bool:
    return unicodedata.category(c) in _HIDDEN_CATEGORIES or c in _HIDDEN_EXTRA


def visible(name: str) -> str:
    """`name` with each hidden character written as `\\uXXXX`, for messages about it."""
    return "".join(f"\\u{ord(c):04x}" if _hidden(c) else c for c in name)


def name_key(name: str) -> str:
    """What two spellings of one name have in common: its NFKC form (see the module doc)."""
    return unicodedata.normalize("NFKC", name)


def _spelling(name: str) -> str:
    """A name with the code points that tell it apart from a look-alike."""
    if name.isascii():
        return f"'{name}'"
    return (f"'{visible(name)}' (" + " ".join(c if c.isascii() else f"U+{ord(c):04X}"
                                               for c in name) + ")")


def _name_problem(path: Path, keys: list[str], name: str, what: str) -> InventoryError | None:
    """Selector syntax owns `all`, commas and spaces: such a name could never be selected; and
    a name with a hidden character would print as another name, or as nothing."""
    if name in RESERVED:
        return InventoryError(f"{_where(path, keys)}: '{name}' is reserved (--hosts all selects "
                              f"every host outside the sandbox); rename this {what}")
    if not name or "," in name or any(c.isspace() for c in name if c.isascii()):
        return InventoryError(f"{_where(path, keys)}: {what} name {name!r} cannot be selected "
                              "with --hosts (no commas or spaces); rename it")
    hidden = [c for c in name if _hidden(c)]
    if hidden:
        which = ", ".join(dict.fromkeys(
            f"U+{ord(c):04X} {unicodedata.name(c, '') or 'a control character'}"
            for c in hidden))
        return InventoryError(f"{_where(path, keys)}: {what} name '{visible(name)}' has a "
                              f"control, invisible or bidi character ({which}): it would print "
                              f"as another name, or as nothing; rename this {what} with "
                              "visible characters")
    return None


def _same_names(path: Path, section: str, names: list[str],
                canon: dict[str, str]) -> list[InventoryError]:
    """Names of `section` equal to an earlier one after normalisation (`canon`: key -> the
    spelling seen first, filled here)."""
    errors = []
    for name in names:
        first = canon.setdefault(name_key(name), name)
        if first != name:
            errors.append(InventoryError(
                f"{_where(path, [section, visible(name)])}: {_spelling(name)} and "
                f"{_spelling(first)} are one name after Unicode normalisation (NFKC); keep one "
                "spelling"))
    return errors


MAX_GROUP_DEPTH = 32  # groups nested deeper than this are an error, not a RecursionError


def _flatten_groups(path: Path, groups: dict, hosts: dict) -> dict[str, list[str]]:
    """Group -> member hosts, following nested groups; unknown names, cycles and nesting deeper
    than MAX_GROUP_DEPTH are errors. Each group is resolved once (linear in the inventory)."""
    flat: dict[str, list[str]] = {}

    def visit(name: str, trail: list[str]) -> list[str]:
        if name in flat:
            return flat[name]
        if name in trail:
            cycle = " -> ".join(trail[trail.index(name):] + [name])
            raise InventoryError(f"{_where(path, ['groups', name, 'groups'])}: groups form a "
                                 f"cycle ({cycle}); remove one of these memberships")
        if len(trail) >= MAX_GROUP_DEPTH:
            raise InventoryError(
                f"{_where(path, ['groups', name])}: groups nested more than {MAX_GROUP_DEPTH} "
                f"levels deep ({' -> '.join(trail[:3])} -> ... -> {name}); flatten the hierarchy")
        spec = groups[name]
        members: list[str] = []
        seen: set[str] = set()
        for i, host in enumerate(spec.get("hosts") or []):
            if host not in hosts:
                hint = difflib.get_close_matches(str(host), list(hosts), n=1)
                maybe = f"did you mean '{hint[0]}'? " if hint else ""
                raise InventoryError(
                    f"{_where(path, ['groups', name, 'hosts', str(i)])}: unknown host "
                    f"'{visible(str(host))}'; "
                    f"{maybe}define it under `hosts:` (known: {', '.join(sorted(hosts))})")
            if host not in seen:
                seen.add(host)
                members.append(host)
        for i, child in enumerate(spec.get("groups") or []):
            if child not in groups:
                raise InventoryError(
                    f"{_where(path, ['groups', name, 'groups', str(i)])}: unknown group "
                    f"'{child}'; define it under `groups:` (known: {', '.join(sorted(groups))})")
            for h in visit(child, trail + [name]):
                if h not in seen:
                    seen.add(h)
                    members.append(h)
        flat[name] = members
        return members

    for name in groups:
        visit(name, [])
    return flat


def _group_depths(groups: dict) -> dict[str, int]:
    """Depth of each group under its outermost parent (outer groups' vars apply first)."""
    parents: dict[str, list[str]] = {g: [] for g in groups}
    for name, spec in groups.items():
        for child in spec.get("groups") or []:
            parents[child].append(name)

    depths: dict[str, int] = {}

    def depth(g: str) -> int:  # memoised: a diamond of groups is visited once per group
        if g not in depths:
            depths[g] = 0 if not parents[g] else 1 + max(depth(p) for p in parents[g])
        return depths[g]

    return {g: depth(g) for g in groups}


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (YAML would keep the last)."""


class _FastUniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The same with libyaml's parser when PyYAML was built with it (its wheels are): ~5x less
    CPU (a 1,000-host inventory: 0.13 against 0.67 ms per host), but its errors do not quote
    the line, so a file it refuses is read again by _UniqueKeyLoader for the message."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: let the default constructor report it
            continue
        if first is not None:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"found duplicate key {key!r} (first at line {first.line + 1}); keep one",
                key_node.start_mark)
        seen[key] = key_node.start_mark
    return yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep)


for _loader in (_UniqueKeyLoader, _FastUniqueKeyLoader):
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _load(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_FastUniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (its message quotes the line)


def parse(text: str, path: Path) -> Inventory:
    """Validate and resolve inventory YAML text (`path` names it in errors, anchors paths).

    Every problem of the file is reported at once (one per line), not only the first."""
    try:
        data = _load(text)
    except yaml.YAMLError as exc:
        raise InventoryError(f"{path}: not valid YAML: {exc}") from None
    except RecursionError:
        raise InventoryError(f"{path}: YAML nested too deeply; an inventory is a few levels "
                             "deep") from None
    data = _mapping(path, [], data)
    errors: list[InventoryError] = []
    for key in data:
        if key not in TOP_KEYS:
            errors.append(_unknown(path, [], key, TOP_KEYS))
    defaults = _check_vars(path, ["vars"], data.get("vars"), errors)
    raw_hosts = _mapping(path, ["hosts"], data.get("hosts"))
    if not raw_hosts:
        raise InventoryError(f"{_where(path, ['hosts'])}: no hosts defined; add at least one")
    hosts = {}
    for n, v in raw_hosts.items():
        problem = _name_problem(path, ["hosts", visible(str(n))], str(n), "host")
        if problem is not None:
            errors.append(problem)
        hosts[str(n)] = _check_vars(path, ["hosts", visible(str(n))], v, errors)
    canon: dict[str, str] = {}  # NFKC form -> the file's spelling
    errors += _same_names(path, "hosts", list(hosts), canon)
    groups: dict[str, dict] = {}
    try:
        raw_groups = _mapping(path, ["groups"], data.get("groups"))
    except InventoryError as exc:
        errors.append(exc)
        raw_groups = {}
    for name in raw_groups:
        host = canon.get(name_key(str(name)))
        if host in hosts:
            errors.append(InventoryError(f"{_where(path, ['groups', visible(str(name))])}: "
                                         f"{_spelling(str(name))} is already a host name"
                                         f"{'' if host == str(name) else f' ({_spelling(host)})'}"
                                         "; rename the group"))
        else:
            errors += _same_names(path, "groups", [str(name)], canon)
    for name, spec in raw_groups.items():
        try:
            spec = _mapping(path, ["groups", visible(str(name))], spec)
        except InventoryError as exc:
            errors.append(exc)
            continue
        ok = True
        for key, value in spec.items():
            if key not in GROUP_KEYS:
                errors.append(_unknown(path, ["groups", str(name)], key, GROUP_KEYS))
                ok = False
            elif key in ("hosts", "groups") and not (
                    isinstance(value, list) and all(isinstance(v, str) for v in value)):
                errors.append(InventoryError(f"{_where(path, ['groups', str(name), key])}: "
                                             f"expected a list of names, got {value!r}"))
                ok = False
        problem = _name_problem(path, ["groups", visible(str(name))], str(name), "group")
        if problem is not None:
            errors.append(problem)
        for key in ("hosts", "groups"):  # members as the file defines them, however spelled
            if isinstance(spec.get(key), list):
                spec = dict(spec, **{key: [canon.get(name_key(m), m) if isinstance(m, str)
                                           else m for m in spec[key]]})
        spec = dict(spec, vars=_check_vars(path, ["groups", str(name), "vars"], spec.get("vars"),
                                           errors))
        if ok:
            groups[str(name)] = spec
    if errors:
        raise _combined(errors)
    flat = _flatten_groups(path, groups, hosts)
    depths = _group_depths(groups)
    resolved = {}
    for name, own in hosts.items():
        layers = [defaults]
        for group in sorted((g for g in groups if name in flat[g]), key=lambda g: (depths[g], g)):
            layers.append(groups[group].get("vars") or {})
        layers.append(own)
        resolved[name] = _make_host(path, name, layers)
    _check_unique_targets(path, resolved)
    return Inventory(path, resolved, flat)


def _combined(errors: list[InventoryError]) -> InventoryError:
    if len(errors) == 1:
        return errors[0]
    return InventoryError(f"{len(errors)} problems:\n" + "\n".join(f"  {e}" for e in errors))


def _check_unique_targets(path: Path, hosts: dict[str, Host]) -> None:
    """Two names for one state dir would fight over its lock and links on every deploy."""
    seen: dict[tuple, str] = {}
    for name, host in hosts.items():
        where = ("local",) if host.is_local else (host.host, host.port, host.user)
        key = (*where, host.state_dir)
        if key in seen:
            raise InventoryError(
                f"{_where(path, ['hosts', name, 'state_dir'])}: '{name}' and '{seen[key]}' are "
                f"the same target ({host.state_dir}); give each its own state_dir or remove one")
        seen[key] = name


def _make_host(path: Path, name: str, layers: list[dict]) -> Host:
    merged: dict[str, Any] = {}
    gateway: dict[str, Any] = {}
    timeouts: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if key == "gateway":
                opts = dict(gateway.get("options", {}))
                opts.update(value.get("options") or {})
                gateway.update(value)
                gateway["options"] = opts
            elif key == "timeouts":
                timeouts.update(value)
            else:
                merged[key] = value
    explicit = frozenset(merged)
    base = path.parent
    connection = merged.get("connection", "ssh")
    if connection == "ssh" and not merged.get("host"):
        merged["host"] = name
    for key in ("identity_file", "known_hosts"):
        if merged.get(key):
            merged[key] = str((base / Path(merged[key]).expanduser()).resolve())
    if connection == "local" and "state_dir" in merged:
        merged["state_dir"] = str((base / Path(merged["state_dir"]).expanduser()).absolute())
    sandbox = connection == "local" and "state_dir" in merged and _inside(
        Path(merged["state_dir"]), base / SANDBOX_DIR)
    return Host(name=name, manager=gateway.get("manager", FLEET_MANAGER),
                manager_options={k: str(v) for k, v in (gateway.get("options") or {}).items()},
                timeouts=Timeouts.of(timeouts, name), sandbox=sandbox, explicit=explicit,
                inventory=str(path), **merged)


def _inside(path: Path, parent: Path) -> bool:
    """`path` lies strictly below `parent` after resolving `..` and symlinks."""
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(parent)) and (
            os.path.realpath(path) != os.path.realpath(parent))
    except (OSError, ValueError):
        return False


# ~90,000 hosts of one line each; YAML is parsed in pure Python (about a minute for this much),
# so a file far larger is a mistake to refuse, not to parse for an hour.
MAX_BYTES = 4 * textfile.MIB


def load(path: str | Path) -> Inventory:
    """Read and validate an inventory file: a regular file of at most MAX_BYTES, UTF-8 (a byte
    that is not is named by line and column, fleet/installer/textfile.py)."""
    path = Path(path).absolute()
    try:
        data = textfile.read_bytes(path, MAX_BYTES)
        if data is None:
            raise InventoryError(f"{path}: cannot read the inventory (No such file or "
                                 "directory); pass --inventory with an existing file")
        text = textfile.decode(data, path)
    except textfile.TextFileError as exc:
        fix = {textfile.TOO_BIG: f"an inventory is at most {textfile.size_text(MAX_BYTES)}; "
                                 "split the fleet into several inventories",
               textfile.NOT_UTF8: "an inventory is UTF-8 YAML; fix that line"
               }.get(exc.kind, "pass --inventory with an existing file")
        raise InventoryError(f"{exc}; {fix}") from None
    return parse(text, path)


def command(task: str, hosts: list[str], inventory: str | Path | None, *flags: str) -> str:
    """A `fleet` command line to print as "do this next": it names the inventory it was read
    from, so it works when pasted in another directory or shell."""
    words = ["fleet", task, "-H", ",".join(hosts)] if hosts else ["fleet", task]
    if inventory:
        words += ["--inventory", str(inventory)]
    return " ".join(shlex.quote(w) for w in [*words, *flags])


ENV_VAR = "FLEET_INVENTORY"
DEFAULT_NAME = "inventory.yaml"


def default_inventory(cwd: Path | None = None, env: dict | None = None) -> Inventory:
    """The inventory when `--inventory` is not given: `$FLEET_INVENTORY`, else
    `./inventory.yaml`. Nothing else: a deploy in a directory without one refuses instead of
    inventing hosts there."""
    cwd = Path.cwd() if cwd is None else cwd
    env = os.environ if env is None else env
    if env.get(ENV_VAR):
        return load(env[ENV_VAR])
    found = cwd / DEFAULT_NAME
    if found.exists():  # a FIFO or a directory there is refused by load(), naming it
        return load(found)
    raise InventoryError(f"no inventory: --inventory not given, ${ENV_VAR} not set and no "
                         f"{found}; pass --inventory FILE (or run from a directory with an "
                         f"{DEFAULT_NAME}; see docs/operations.md)")
