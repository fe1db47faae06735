"""Where an ssh host really is: the inventory first, then ssh_config, as `ssh -G` reads it.

Operators keep their fleet in `~/.ssh/config` (`Host pi / HostName 192.0.2.7 / User pi /
ProxyJump bastion`), often split with `Include`. fleet resolves every ssh host to a `Target`
before it connects, so an alias goes where `ssh alias` would, by OpenSSH's rules
(https://man.openbsd.org/ssh_config, OpenSSH 9.x):

- files: `$FLEET_SSH_CONFIG` alone if set (as `ssh -F`; empty = none), else `~/.ssh/config`
  then `/etc/ssh/ssh_config`; `Include` anywhere, also inside a block (then it applies only if
  the block does), globs, nesting; a relative path is under `~/.ssh` (`/etc/ssh` from the
  system file);
- `Host` patterns (`*`, `?`, `!negation`) against the name as given; `Match` with `all`,
  `host`, `originalhost`, `user`, `localuser`, `canonical` and `final` (a second pass, where
  `Host` sees the resolved HostName, as ssh does when any `Match final` was reached);
  `Match exec` and `localnetwork` are refused with the file and line (fleet runs no commands
  from ssh_config);
- the first value of a keyword wins, `IdentityFile` accumulates; `ProxyJump` and
  `ProxyCommand` exclude each other (the first one set wins; `none` counts);
- keywords used: HostName (`%h`), Port, User, IdentityFile and UserKnownHostsFile (`~`, `${VAR}`
  and the `%` tokens), StrictHostKeyChecking (yes -> strict, accept-new -> accept-new; no, off,
  ask -> strict: fleet never accepts an unknown key silently), ProxyJump (every hop, each one
  looked up in ssh_config itself, host keys checked on every hop); a ProxyCommand is refused.

Inventory keys win where set (`host` is the name looked up; `port`, `user` act as `ssh -p`/`-l`;
`identity_file`, `jump`, `known_hosts`, `host_key_policy`); ssh_config fills in the rest.

Each file is read as fleet/installer/textfile.py reads a file people edit: a regular file (a
named `$FLEET_SSH_CONFIG` that is missing or is a FIFO, a directory, ... is an error, as with
`ssh -F`), at most MAX_FILE_BYTES per file (Include'd files too) and MAX_TOTAL_BYTES in all, and
UTF-8: a byte that is not is an error naming the file and line, never a replacement character
in a value fleet would then use.
`tests/deploy/test_sshconfig_conformance.py` holds this module to `ssh -G` case by case.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import re
import socket
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from fleet.deploy.inventory import VAR_TYPES, Host, a2port, parse_jump
from fleet.installer import textfile

ENV_VAR = "FLEET_SSH_CONFIG"
VAR_KEYS = tuple(VAR_TYPES)
DEFAULT_PATH = "~/.ssh/config"
SYSTEM_PATH = "/etc/ssh/ssh_config"
POLICY = {"yes": "strict", "true": "strict", "accept-new": "accept-new", "no": "strict",
          "off": "strict", "false": "strict", "ask": "strict"}
DEFAULT_IDENTITIES = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk",
                      "~/.ssh/id_ed25519", "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss",
                      "~/.ssh/id_dsa")
DEFAULT_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
MAX_INCLUDE_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
# A Host block is a few lines: 1 MiB per file holds ~10,000 hosts and reads in a fraction of a
# second; split a larger one with Include. The total keeps a glob of many files bounded too.
MAX_FILE_BYTES = textfile.MIB
MAX_TOTAL_BYTES = 16 * textfile.MIB
MAX_JUMPS = 8
# Keywords whose first value wins (single-valued here); identityfile accumulates.
FIRST_WINS = ("hostname", "port", "user", "userknownhostsfile", "stricthostkeychecking")
MATCH_WITH_ARG = ("host", "originalhost", "user", "localuser", "exec", "localnetwork",
                  "tagged")


class SshConfigError(ValueError):
    """ssh_config says something fleet cannot follow; the message names the file and line."""


@dataclass(frozen=True)
class Target:
    """Everything needed to open one ssh connection (each jump host is a Target too)."""

    alias: str                 # the name looked up in ssh_config
    hostname: str
    port: int
    user: str | None
    identity_files: tuple[str, ...]
    known_hosts: str
    policy: str
    jump: Target | None = None  # the hop this connection goes through (the last of ProxyJump)

    def describe(self) -> str:
        """`user@host:port`, then each hop it goes through: the destination as a whole."""
        who = f"{self.user}@" if self.user else ""
        via = f" via {self.jump.describe()}" if self.jump else ""
        return f"{who}{self.hostname}:{self.port}{via}"

    def hops(self) -> int:
        """How many jump hosts lie before this one."""
        return 0 if self.jump is None else 1 + self.jump.hops()


@dataclass(frozen=True)
class _Line:
    keyword: str       # lower case
    args: tuple[str, ...]
    where: str         # "file:line"


@dataclass
class Options:
    """What ssh_config says for one host, before fleet's defaults: `ssh -G`'s answer."""

    values: dict = field(default_factory=dict)       # keyword -> first value (str)
    identity_files: list = field(default_factory=list)
    where: dict = field(default_factory=dict)        # keyword -> "file:line" that set it
    proxy: tuple | None = None                       # ("proxyjump"|"proxycommand", value)
    want_final: bool = False

    def first(self, keyword: str, value: str, where: str) -> None:
        if keyword not in self.values:
            self.values[keyword] = value
            self.where[keyword] = where


def _local_user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return os.environ.get("USER", "")


def _home() -> str:
    return os.path.expanduser("~")


class SshConfig:
    """ssh_config files, read once, evaluated per host as OpenSSH does (one SshConfig may serve
    a run's hosts connecting at once: reading a file happens under a lock)."""

    def __init__(self, files: list[tuple[Path, bool]] | None = None):
        self.files = files or []       # (path, is the system file)
        self._cache: dict[str, list[_Line]] = {}
        self._includes: dict[tuple[tuple[str, ...], bool], list[Path]] = {}
        self._read_bytes = 0
        self._lock = threading.Lock()

    # -- reading -------------------------------------------------------------------------
    def _lines(self, path: Path) -> list[_Line]:
        key = str(path)
        lines = self._cache.get(key)
        if lines is not None:
            return lines
        with self._lock:
            return self._read_lines(path, key)

    def _included(self, args: tuple[str, ...], system: bool) -> list[Path]:
        """The files an Include names, listed once per SshConfig as each file is read once
        (Debian's /etc/ssh/ssh_config includes a directory: one listing per host before)."""
        key = (args, system)
        paths = self._includes.get(key)
        if paths is None:
            paths = self._includes.setdefault(key, _include_paths(args, system))
        return paths

    def _read_lines(self, path: Path, key: str) -> list[_Line]:
        if key not in self._cache:
            ignore = f"or set {ENV_VAR}= (empty) to read no ssh_config"
            try:
                data = textfile.read_bytes(path, MAX_FILE_BYTES)
                if data is None:
                    raise textfile.TextFileError(f"{path}: no such file", textfile.UNREADABLE)
                text = textfile.decode(data, path)
            except textfile.TextFileError as exc:
                fix = {textfile.NOT_UTF8: "ssh_config is read as UTF-8; fix that line",
                       textfile.TOO_BIG: f"fleet reads at most {textfile.size_text(MAX_FILE_BYTES)}"
                                         " per ssh_config file; split it with Include",
                       textfile.NOT_REGULAR: "point it at a regular file"}.get(exc.kind, "fix it")
                raise SshConfigError(f"{exc}; {fix}, {ignore}") from None
            self._read_bytes += len(data)
            if self._read_bytes > MAX_TOTAL_BYTES:
                raise SshConfigError(f"{path}: the ssh_config files read add up to more than "
                                     f"{textfile.size_text(MAX_TOTAL_BYTES)}; read fewer "
                                     f"(Include globs), {ignore}")
            self._cache[key] = list(_parse(text, key))
        return self._cache[key]

    # -- evaluation ----------------------------------------------------------------------
    def options(self, name: str, user: str | None = None, port: int | None = None) -> Options:
        """ssh_config's answer for `ssh [-l user] [-p port] name`: both passes, as `ssh -G`."""
        opts = Options()
        if user is not None:
            opts.first("user", user, "command line")
        if port is not None:
            opts.first("port", str(port), "command line")
        self._pass(name, name, opts, final=False)
        if opts.want_final:
            self._pass(resolved_hostname(opts, name), name, opts, final=True)
        return opts

    def _pass(self, host: str, original: str, opts: Options, final: bool) -> None:
        for path, system in self.files:
            self._read(path, system, host, original, opts, final, active=True,
                       never=False, depth=0)

    def _read(self, path: Path, system: bool, host: str, original: str, opts: Options,
              final: bool, active: bool, never: bool, depth: int) -> None:
        """Apply one file's lines from the includer's `active` state; whatever blocks the file
        opens end with it (the includer's state holds again after an Include, as in OpenSSH).
        `never`: the Include stood in a block that does not apply, so nothing in it does."""
        for line in self._lines(path):
            kw = line.keyword
            if kw == "host":
                active = not never and _host_matches(host, line.args)
            elif kw == "match":
                matched = _match(line, host, original, opts, final)
                active = not never and matched
            elif kw == "include":
                if depth >= MAX_INCLUDE_DEPTH:
                    raise SshConfigError(f"{line.where}: Include nested deeper than "
                                         f"{MAX_INCLUDE_DEPTH} files (a loop?)")
                for included in self._included(line.args, system):
                    self._read(included, system, host, original, opts, final, active,
                               never or not active, depth + 1)
            elif active:
                _apply(line, opts)


def _parse(text: str, source: str) -> Iterator[_Line]:
    for number, raw in enumerate(text.splitlines(), 1):
        where = f"{source}:{number}"
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        found = re.match(r"([^\s=]+)\s*(?:=\s*|\s+|$)(.*)$", stripped)
        if found is None:
            raise SshConfigError(f"{where}: cannot read {stripped!r}; write `Keyword value`")
        args = _split_args(found.group(2), where)
        line = _Line(found.group(1).lower(), tuple(args), where)
        _check(line, found.group(1))
        yield line


ONE_VALUE = ("hostname", "port", "user", "stricthostkeychecking", "identityfile")
# ProxyJump too, though ssh reads only its first word (the rest of the line is ignored)
AT_LEAST_ONE = ("host", "include", "userknownhostsfile", "proxycommand", "proxyjump")
STRICT_VALUES = ("yes", "no", "ask", "accept-new", "off", "true", "false")


def _check(line: _Line, spelled: str) -> None:
    """What ssh refuses in a line of a keyword fleet reads, wherever the line stands (ssh checks
    every line, in a block that applies or not): a missing value, more than one where one is
    taken, a StrictHostKeyChecking, Port or ProxyJump value it does not know."""
    kw, args, where = line.keyword, line.args, line.where
    if kw in ONE_VALUE + AT_LEAST_ONE and not args:
        raise SshConfigError(f"{where}: {spelled} needs a value")
    if kw in ONE_VALUE and len(args) > 1:
        raise SshConfigError(f"{where}: {spelled} takes one value, not {len(args)} (quote a "
                             "value that holds spaces)")
    if kw == "stricthostkeychecking" and args[0].lower() not in STRICT_VALUES:
        raise SshConfigError(f"{where}: StrictHostKeyChecking {args[0]!r}: use one of "
                             f"{', '.join(STRICT_VALUES)}")
    if kw == "port":
        _port(args[0], where)
    if kw == "proxyjump" and _jump_value(args).lower() != "none":
        for hop in _jump_value(args).split(","):
            try:
                parse_jump(hop)
            except ValueError as exc:
                raise SshConfigError(f"{where}: ProxyJump {args[0]!r}: {exc}") from None


def _jump_value(args: tuple[str, ...]) -> str:
    """A ProxyJump value as ssh reads it: the first word, up to a `#` in it."""
    return args[0].partition("#")[0].rstrip()


def _split_args(text: str, where: str) -> list[str]:
    """Words, double quotes grouping, `#` starting a comment outside quotes (OpenSSH's
    argv_split)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n or text[i] == "#":
            break
        word, quoted = [], False
        while i < n and (quoted or text[i] not in " \t"):
            c = text[i]
            if c == '"':
                quoted = not quoted
            elif c == "\\" and i + 1 < n and text[i + 1] in '"\\':
                i += 1
                word.append(text[i])
            else:
                word.append(c)
            i += 1
        if quoted:
            raise SshConfigError(f"{where}: a quote is not closed")
        out.append("".join(word))
    return out


def _glob(pattern: str, value: str) -> bool:
    """OpenSSH's match_pattern: `*` any run of characters, `?` one, the rest as written. No
    regex per pattern: compiling one for every `Host` line of a large file, on every lookup,
    took seconds per host."""
    if "*" not in pattern and "?" not in pattern:
        return pattern == value
    p = v = 0
    star, mark = -1, 0
    while v < len(value):
        if p < len(pattern) and pattern[p] in ("?", value[v]) and pattern[p] != "*":
            p, v = p + 1, v + 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark, p = p, v, p + 1
        elif star >= 0:  # let the last `*` take one more character
            p, mark = star + 1, mark + 1
            v = mark
        else:
            return False
    return pattern[p:].strip("*") == ""


def _any_matches(value: str, patterns) -> bool:
    """A positive pattern matches `value` and no negated (`!`) one does."""
    hit = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if _glob(pattern[1:] if negated else pattern, value):
            if negated:
                return False
            hit = True
    return hit


def _host_matches(host: str, patterns: tuple[str, ...]) -> bool:
    """A `Host` line: its words are patterns, matched with case as written."""
    return _any_matches(host, patterns)


def pattern_list(value: str, patterns: str, lower: bool = False) -> bool:
    """OpenSSH's match_pattern_list (a `Match` argument, a known_hosts host field): a comma
    list, `!` negates."""
    if lower:
        value, patterns = value.lower(), patterns.lower()
    return _any_matches(value, patterns.split(","))


def _match(line: _Line, host: str, original: str, opts: Options, final: bool) -> bool:
    """A `Match` line: every criterion must hold (each may be negated with `!`)."""
    args = list(line.args)
    if not args:
        raise SshConfigError(f"{line.where}: Match needs a criterion (e.g. `Match host pi`)")
    result = True
    while args:
        raw = args.pop(0)
        negate = raw.startswith("!")
        attrib = (raw[1:] if negate else raw).lower()
        if attrib == "all":
            if args and not all(a.lower() in ("canonical", "final") for a in args) or negate:
                raise SshConfigError(f"{line.where}: `Match all` stands alone (or with "
                                     "canonical, final)")
            continue
        if attrib in ("canonical", "final"):
            if attrib == "final":
                opts.want_final = True
            if final == negate:
                result = False
            continue
        if attrib not in MATCH_WITH_ARG:
            raise SshConfigError(f"{line.where}: `Match {raw}` is not a criterion ssh "
                                 "knows; see `man ssh_config`")
        if not args:
            raise SshConfigError(f"{line.where}: `Match {raw}` needs an argument")
        arg = args.pop(0)
        if attrib in ("exec", "localnetwork", "tagged"):
            raise SshConfigError(f"{line.where}: `Match {attrib}` is not supported by fleet "
                                 "(it runs no commands and reads no interfaces to pick a "
                                 "host); give the host its settings in a `Host` block or in "
                                 "the inventory")
        if attrib == "host":
            ok = pattern_list(resolved_hostname(opts, host, lower=False), arg, lower=True)
        elif attrib == "originalhost":
            ok = pattern_list(original, arg, lower=True)
        elif attrib == "user":
            ok = pattern_list(opts.values.get("user", _local_user()), arg)
        else:  # localuser
            ok = pattern_list(_local_user(), arg)
        if ok == negate:
            result = False
    return result


def _include_paths(args: tuple[str, ...], system: bool) -> list[Path]:
    out: list[Path] = []
    for arg in args:
        path = os.path.expanduser(arg)
        if not os.path.isabs(path):
            base = os.path.dirname(SYSTEM_PATH) if system else os.path.join(_home(), ".ssh")
            path = os.path.join(base, path)
        out += [Path(p) for p in sorted(glob.glob(path)) if os.path.isfile(p)]
    return out


def _apply(line: _Line, opts: Options) -> None:
    kw, args = line.keyword, line.args
    if kw in FIRST_WINS:
        if not args:
            raise SshConfigError(f"{line.where}: {kw} needs a value")
        # several files, each kept whole (a quoted path may hold spaces): one per line
        value = "\n".join(args) if kw == "userknownhostsfile" else args[0]
        if kw == "port":
            value = str(_port(value, line.where))
        opts.first(kw, value, line.where)
    elif kw == "identityfile" and args:
        if args[0] not in opts.identity_files:
            opts.identity_files.append(args[0])
    elif kw in ("proxyjump", "proxycommand") and args and opts.proxy is None:
        opts.proxy = (kw, _jump_value(args) if kw == "proxyjump" else " ".join(args))
        opts.where[kw] = line.where


def _port(value: str, where: str) -> int:
    """A Port value as ssh reads it (a2port: a number 1-65535, or a service name such as
    `ssh` from the services database)."""
    port = a2port(value)
    if port:
        return port
    raise SshConfigError(f"{where}: Port {value!r} is not a TCP port (1-65535) nor a service "
                         "name")


def known_hosts_files(opts: Options) -> list[str]:
    """The UserKnownHostsFile values of `opts` as written (unexpanded), in order."""
    raw = opts.values.get("userknownhostsfile")
    return raw.split("\n") if raw else []


def resolved_hostname(opts: Options, host: str, lower: bool = True) -> str:
    """HostName with `%h` (and `%%`) expanded, else the name itself; lower case as ssh
    prints it."""
    raw = opts.values.get("hostname")
    name = host if raw is None else re.sub(
        r"%([h%])", lambda m: host if m.group(1) == "h" else "%", raw)
    return name.lower() if lower else name


def expand_path(raw: str, tokens: dict[str, str]) -> str:
    """`~`, then `${VAR}` and ssh's `%` tokens in one pass (a value put in is not expanded
    again), in a path (IdentityFile, UserKnownHostsFile), as ssh's percent_dollar_expand: an
    unset variable, `${}`, a `${` without `}`, an unknown token or a lone `%` at the end is an
    error, never another path."""
    src = os.path.expanduser(raw)
    out: list[str] = []
    i = 0
    while i < len(src):
        if src[i] == "%":
            key = src[i + 1:i + 2]
            if key not in tokens:
                what = f"unknown token %{key}" if key else "a `%` ends it (write %% for one)"
                raise SshConfigError(f"{raw!r}: {what}")
            out.append(tokens[key])
            i += 2
        elif src.startswith("${", i):
            close = src.find("}", i + 2)
            name = src[i + 2:close] if close >= 0 else src[i + 2:]
            if close < 0:
                raise SshConfigError(f"{raw!r}: `${{{name}` has no closing `}}`")
            if not name:
                raise SshConfigError(f"{raw!r}: `${{}}` names no environment variable")
            if name not in os.environ:  # ssh refuses it too, rather than use another path
                raise SshConfigError(f"{raw!r}: environment variable ${{{name}}} is not set")
            out.append(os.environ[name])
            i = close + 1
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


def _tokens(hostname: str, port: int, user: str, original: str) -> dict[str, str]:
    local = socket.gethostname()
    return {"%": "%", "h": hostname, "p": str(port), "r": user, "n": original,
            "u": _local_user(), "d": _home(), "i": str(os.getuid()), "l": local,
            "L": local.split(".")[0], "k": hostname,
            "C": hashlib.sha1(f"{local}{hostname}{port}{user}".encode()).hexdigest()}


# -- files --------------------------------------------------------------------------------
def config_path(env: dict | None = None) -> Path | None:
    """The user's file: `$FLEET_SSH_CONFIG` if set (empty: none), else `~/.ssh/config` when
    there is one. A file named in `$FLEET_SSH_CONFIG` that is missing, or anything but a
    regular file, is an SshConfigError (as `ssh -F` fails), never a silent fallback to none."""
    env = os.environ if env is None else env
    raw = env.get(ENV_VAR, DEFAULT_PATH)
    if not raw:
        return None
    path = Path(raw).expanduser()
    named = ENV_VAR in env
    try:
        st = path.stat()
    except FileNotFoundError:
        if not named:
            return None
        raise SshConfigError(f"{path} (${ENV_VAR}): no such file; point {ENV_VAR} at your "
                             f"ssh_config, or set {ENV_VAR}= (empty) to read none") from None
    except OSError as exc:
        raise SshConfigError(f"{path}: cannot read this ssh_config ({exc.strerror}); fix it, "
                             f"or set {ENV_VAR}= (empty) to read none") from None
    if not stat.S_ISREG(st.st_mode):
        fix = f"point {ENV_VAR} at your ssh_config file" if named else "fix it"
        raise SshConfigError(f"{path}{f' (${ENV_VAR})' if named else ''}: not a regular file; "
                             f"{fix}, or set {ENV_VAR}= (empty) to read none")
    return path


def load(path: Path | None, system: bool = False) -> SshConfig:
    """The config of one file (none: an empty config); `system` adds /etc/ssh/ssh_config
    after it, as ssh does without `-F`."""
    files: list[tuple[Path, bool]] = [(Path(path), False)] if path is not None else []
    if system and os.path.isfile(SYSTEM_PATH):
        files.append((Path(SYSTEM_PATH), True))
    config = SshConfig(files)
    for file, _ in files:
        config._lines(file)  # a file that cannot be read names itself now, not mid-deploy
    return config


def default_config(env: dict | None = None) -> SshConfig:
    """What `ssh` would read here: `$FLEET_SSH_CONFIG` alone, or the user's and the
    system's files."""
    env = os.environ if env is None else env
    return load(config_path(env), system=ENV_VAR not in env)


# -- resolving ----------------------------------------------------------------------------
def resolve(host: Host, config: SshConfig | None = None) -> Target:
    """The Target of an inventory ssh host (inventory keys win over ssh_config)."""
    config = default_config() if config is None else config
    explicit = frozenset(VAR_KEYS) if host.explicit is None else host.explicit
    try:
        return _resolve(host.host, config, host, explicit,
                        host.user if "user" in explicit else None,
                        host.port if "port" in explicit else None,
                        host.jump if "jump" in explicit else None, 0)
    except SshConfigError as exc:
        raise SshConfigError(f"host {host.name}: {exc}") from None


def _resolve(name: str, config: SshConfig, host: Host, explicit: frozenset,
             user: str | None, port: int | None, jump_spec: str | None, depth: int) -> Target:
    opts = config.options(name, user, port)
    hostname = resolved_hostname(opts, name)
    port = int(opts.values.get("port", 22))
    login = opts.values.get("user")
    tokens = _tokens(hostname, port, login or _local_user(), name)
    if "identity_file" in explicit and host.identity_file:
        keys: tuple[str, ...] = (host.identity_file,)
    else:
        keys = tuple(k for k in (expand_path(p, tokens) for p in opts.identity_files)
                     if os.path.isfile(k))
    if "known_hosts" in explicit:
        known = host.known_hosts
    else:
        files = known_hosts_files(opts)
        try:  # every file expanded, as ssh does (and fails on any), the first one used
            expanded = [expand_path(f, tokens) for f in files]
            known = expanded[0] if expanded else host.known_hosts
        except SshConfigError as exc:
            raise SshConfigError(f"{opts.where['userknownhostsfile']}: {exc}") from None
    if "host_key_policy" in explicit:
        policy = host.host_key_policy
    else:
        policy = POLICY.get(opts.values.get("stricthostkeychecking", "yes").lower(), "strict")
    if jump_spec is None and opts.proxy is not None:
        kind, value = opts.proxy
        if kind == "proxycommand" and value.lower() != "none":
            raise SshConfigError(
                f"{opts.where[kind]}: ProxyCommand is not supported by fleet (it opens its "
                "own connections); use ProxyJump, or set jump: in the inventory")
        jump_spec = value if kind == "proxyjump" else None
    jump = None
    if jump_spec and jump_spec.lower() != "none":
        jump = _chain(jump_spec, config, host, explicit, depth)
    return Target(alias=name, hostname=hostname, port=port, user=login, identity_files=keys,
                  known_hosts=known, policy=policy, jump=jump)


def _chain(spec: str, config: SshConfig, host: Host, explicit: frozenset,
           depth: int) -> Target:
    """`ProxyJump a,b`: a first, b through a, the destination through b. Each hop is looked up
    in ssh_config; only the first may have a jump of its own (ssh -J gives the others theirs);
    of the inventory's keys only the key file and the host-key trust apply to hops."""
    hops = [h.strip() for h in spec.split(",")]
    if depth + len(hops) > MAX_JUMPS:
        raise SshConfigError(f"ProxyJump {spec!r}: more than {MAX_JUMPS} jump hosts in a "
                             "chain (a loop?)")
    inherited = frozenset({"identity_file", "known_hosts", "host_key_policy"}) & explicit
    previous: Target | None = None
    for index, hop in enumerate(hops):
        try:
            juser, jhost, jport = parse_jump(hop)
        except ValueError as exc:
            raise SshConfigError(f"ProxyJump {spec!r}: {exc}") from None
        target = _resolve(jhost, config, host, inherited, juser, jport,
                          None if index == 0 else "none", depth + index + 1)
        if previous is not None:
            target = Target(target.alias, target.hostname, target.port, target.user,
                            target.identity_files, target.known_hosts, target.policy, previous)
        previous = target
    assert previous is not None
    return previous
