"""Where an ssh host really is: the inventory first, then `~/.ssh/config`, then ssh's defaults.

Operators keep their fleet in `~/.ssh/config` (`Host pi / HostName 192.0.2.7 / User pi /
ProxyJump bastion`). fleet reads it with paramiko's `SSHConfig` (the parser Fabric uses) and
resolves every ssh host to a `Target` before it opens its own TCP socket (TCP_NODELAY, see
connection.nodelay_socket), so an alias connects where `ssh alias` would:

  HostName, Port, User, IdentityFile, ProxyJump (first hop), UserKnownHostsFile (first file),
  StrictHostKeyChecking (yes -> strict, accept-new -> accept-new; no/off/ask -> strict: fleet never
  accepts an unknown key silently)

Each applies only where the inventory does not set the matching key (`host` is the name looked
up, `port`, `user`, `identity_file`, `jump`, `known_hosts`, `host_key_policy`): the inventory wins,
ssh_config is the lower-priority default. The file is `$FLEET_SSH_CONFIG` if set (empty = none),
else `~/.ssh/config`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import paramiko

from fleet.deploy.inventory import VAR_TYPES, Host, parse_jump

ENV_VAR = "FLEET_SSH_CONFIG"
VAR_KEYS = tuple(VAR_TYPES)
DEFAULT_PATH = "~/.ssh/config"
POLICY = {"yes": "strict", "accept-new": "accept-new", "no": "strict", "off": "strict",
          "ask": "strict"}


@dataclass(frozen=True)
class Target:
    """Everything needed to open one ssh connection (a jump host is a Target too)."""

    alias: str                 # the name looked up in ssh_config
    hostname: str
    port: int
    user: str | None
    identity_files: tuple[str, ...]
    known_hosts: str
    policy: str
    jump: Target | None = None

    def describe(self) -> str:
        who = f"{self.user}@" if self.user else ""
        via = f" via {self.jump.describe()}" if self.jump else ""
        return f"{who}{self.hostname}:{self.port}{via}"


def config_path(env: dict | None = None) -> Path | None:
    env = os.environ if env is None else env
    raw = env.get(ENV_VAR, DEFAULT_PATH)
    if not raw:
        return None
    path = Path(raw).expanduser()
    return path if path.is_file() else None


def load(path: Path | None) -> paramiko.SSHConfig:
    """The parsed file, or an empty config (no file). A bad file names itself."""
    if path is None:
        return paramiko.SSHConfig()
    try:
        return paramiko.SSHConfig.from_path(str(path))
    except Exception as exc:  # paramiko raises several kinds for bad lines
        raise ValueError(f"{path}: cannot read this ssh_config ({exc}); fix it, or set "
                         f"{ENV_VAR}= to ignore it") from exc


def _expand(path: str) -> str:
    return os.path.expanduser(os.path.expandvars(path))


def resolve(host: Host, config: paramiko.SSHConfig | None = None) -> Target:
    """The Target of an inventory ssh host (inventory keys win over ssh_config)."""
    config = load(config_path()) if config is None else config
    explicit = frozenset(VAR_KEYS) if host.explicit is None else host.explicit
    return _resolve(host.host, config, host, explicit)


def _resolve(name: str, config: paramiko.SSHConfig, host: Host, explicit: frozenset,
             user: str | None = None, port: int | None = None, depth: int = 0) -> Target:
    found = config.lookup(name)
    if "port" in explicit:
        port = host.port
    elif port is None:
        port = int(found.get("port", 22))
    if "user" in explicit:
        user = host.user
    elif user is None:
        user = found.get("user")
    if "identity_file" in explicit and host.identity_file:
        keys: tuple[str, ...] = (host.identity_file,)
    else:
        keys = tuple(k for k in (_expand(p) for p in found.get("identityfile", []))
                     if os.path.isfile(k))
    if "known_hosts" in explicit:
        known = host.known_hosts
    else:
        files = (found.get("userknownhostsfile") or "").split()
        known = _expand(files[0]) if files else host.known_hosts
    if "host_key_policy" in explicit:
        policy = host.host_key_policy
    else:
        policy = POLICY.get(str(found.get("stricthostkeychecking", "yes")).lower(), "strict")
    jump = None
    spec = host.jump if "jump" in explicit else found.get("proxyjump")
    if spec and spec.lower() != "none" and depth < 8:
        first = spec.split(",")[0].strip()
        juser, jhost, jport = parse_jump(first)
        # the jump host is looked up in ssh_config too; of the inventory's keys only the
        # key file and the host-key trust apply to it (its address and user are its own)
        jump = _resolve(jhost, config, host, frozenset(
            {"identity_file", "known_hosts", "host_key_policy"}) & explicit, juser, jport,
            depth + 1)
    return Target(alias=name, hostname=found.get("hostname", name), port=port, user=user,
                  identity_files=keys, known_hosts=known, policy=policy, jump=jump)
