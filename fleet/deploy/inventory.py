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
  identity_file    private key for ssh;  jump: `user@host:port` of a jump host
  known_hosts      file of trusted host keys (default ~/.ssh/known_hosts)
  host_key_policy  strict (default: unknown or changed keys refused) | accept-new (record new)
  python           interpreter on the host (default python3, 3.9+)
  state_dir        OpenClaw state dir on the host (default ~/.openclaw)
  gateway          {manager: fleet|systemd|launchd|openclaw|command, options: {k: v}}
  timeouts         seconds: connect (also banner, auth), command, transfer, ready, lock (wait)

Precedence: built-in defaults < top-level `vars` < group `vars` (outer groups first) < host keys.
Relative paths (state_dir of local hosts, identity_file, known_hosts) are relative to the inventory
file. Every error names the file, the key path and what would fix it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MANAGERS = ("fleet", "systemd", "launchd", "openclaw", "command")
CONNECTIONS = ("ssh", "local")
POLICIES = ("strict", "accept-new")
TIMEOUT_KEYS = ("connect", "command", "transfer", "ready", "lock")
DEFAULT_TIMEOUTS = {"connect": 10.0, "command": 180.0, "transfer": 120.0, "ready": 60.0,
                    "lock": 0.0}
VAR_TYPES: dict[str, type | tuple] = {
    "connection": str, "host": str, "port": int, "user": str, "identity_file": str,
    "known_hosts": str, "host_key_policy": str, "jump": str, "python": str, "state_dir": str,
    "gateway": dict, "timeouts": dict,
}
GATEWAY_KEYS = ("manager", "options")
TOP_KEYS = ("vars", "hosts", "groups")
GROUP_KEYS = ("hosts", "groups", "vars")


class InventoryError(ValueError):
    """A bad inventory or host selection; the message names file, key path and fix."""


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
    manager: str = "fleet"
    manager_options: dict = field(default_factory=dict)
    timeouts: dict = field(default_factory=lambda: dict(DEFAULT_TIMEOUTS))

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

    def select(self, spec: str | list[str] | None) -> list[Host]:
        """Hosts named by `a,b` (hosts, groups, or `all`), in order, without duplicates."""
        if spec is None or spec == "" or spec == []:
            raise InventoryError(f"{self.path}: no hosts selected; pass --hosts with one of: "
                                 f"{', '.join(self.names())}")
        items = spec.split(",") if isinstance(spec, str) else list(spec)
        chosen: list[str] = []
        for raw in items:
            item = raw.strip()
            if not item:
                continue
            if item == "all":
                members = list(self.hosts)
            elif item in self.hosts:
                members = [item]
            elif item in self.groups:
                members = self.groups[item]
            else:
                hint = difflib.get_close_matches(item, self.names(), n=1)
                maybe = f" (did you mean '{hint[0]}'?)" if hint else ""
                raise InventoryError(
                    f"{self.path}: unknown host or group '{item}'{maybe}; known hosts: "
                    f"{', '.join(sorted(self.hosts)) or 'none'}; groups: "
                    f"{', '.join(sorted(self.groups)) or 'none'}; or 'all'")
            chosen.extend(m for m in members if m not in chosen)
        if not chosen:
            raise InventoryError(f"{self.path}: --hosts '{spec}' selects no host")
        return [self.hosts[n] for n in chosen]


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


def _check_vars(path: Path, keys: list[str], data: dict) -> dict:
    data = _mapping(path, keys, data)
    for key, value in data.items():
        if key not in VAR_TYPES:
            raise _unknown(path, keys, key, tuple(VAR_TYPES))
        want = VAR_TYPES[key]
        if value is None or isinstance(value, bool) or not isinstance(value, want):
            raise InventoryError(f"{_where(path, keys + [key])}: expected "
                                 f"{getattr(want, '__name__', want)}, got {value!r}")
    here = keys
    if "connection" in data and data["connection"] not in CONNECTIONS:
        raise InventoryError(f"{_where(path, here + ['connection'])}: '{data['connection']}' is "
                             f"not one of {', '.join(CONNECTIONS)}")
    if "host_key_policy" in data and data["host_key_policy"] not in POLICIES:
        raise InventoryError(f"{_where(path, here + ['host_key_policy'])}: "
                             f"'{data['host_key_policy']}' is not one of {', '.join(POLICIES)} "
                             "(strict refuses unknown keys; accept-new records them)")
    if "port" in data and not 0 < data["port"] < 65536:
        raise InventoryError(f"{_where(path, here + ['port'])}: {data['port']} is not a TCP port")
    gateway = data.get("gateway", {})
    for key, value in gateway.items():
        if key not in GATEWAY_KEYS:
            raise _unknown(path, here + ["gateway"], key, GATEWAY_KEYS)
        if key == "manager" and value not in MANAGERS:
            raise InventoryError(f"{_where(path, here + ['gateway', 'manager'])}: '{value}' is "
                                 f"not one of {', '.join(MANAGERS)}")
        if key == "options":
            opts = _mapping(path, here + ["gateway", "options"], value)
            for okey, oval in opts.items():
                if not isinstance(oval, (str, int, float)) or isinstance(oval, bool):
                    raise InventoryError(f"{_where(path, here + ['gateway', 'options', okey])}: "
                                         f"expected a string, got {oval!r}")
    for key, value in data.get("timeouts", {}).items():
        if key not in TIMEOUT_KEYS:
            raise _unknown(path, here + ["timeouts"], key, TIMEOUT_KEYS)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise InventoryError(f"{_where(path, here + ['timeouts', key])}: expected a number "
                                 f"of seconds >= 0, got {value!r}")
    return data


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
                    f"{_where(path, ['groups', name, 'hosts', str(i)])}: unknown host '{host}'; "
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


def parse(text: str, path: Path) -> Inventory:
    """Validate and resolve inventory YAML text (`path` names it in errors, anchors paths)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InventoryError(f"{path}: not valid YAML: {exc}") from None
    except RecursionError:
        raise InventoryError(f"{path}: YAML nested too deeply; an inventory is a few levels "
                             "deep") from None
    data = _mapping(path, [], data)
    for key in data:
        if key not in TOP_KEYS:
            raise _unknown(path, [], key, TOP_KEYS)
    defaults = _check_vars(path, ["vars"], data.get("vars"))
    raw_hosts = _mapping(path, ["hosts"], data.get("hosts"))
    if not raw_hosts:
        raise InventoryError(f"{_where(path, ['hosts'])}: no hosts defined; add at least one")
    hosts = {str(n): _check_vars(path, ["hosts", str(n)], v) for n, v in raw_hosts.items()}
    groups: dict[str, dict] = {}
    for name, spec in _mapping(path, ["groups"], data.get("groups")).items():
        spec = _mapping(path, ["groups", str(name)], spec)
        for key, value in spec.items():
            if key not in GROUP_KEYS:
                raise _unknown(path, ["groups", str(name)], key, GROUP_KEYS)
            if key in ("hosts", "groups") and not (
                    isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise InventoryError(f"{_where(path, ['groups', str(name), key])}: expected a "
                                     f"list of names, got {value!r}")
        if str(name) in hosts or str(name) == "all":
            raise InventoryError(f"{_where(path, ['groups', str(name)])}: '{name}' is already a "
                                 "host name or 'all'; rename the group")
        _check_vars(path, ["groups", str(name), "vars"], spec.get("vars"))
        groups[str(name)] = spec
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
    timeouts = dict(DEFAULT_TIMEOUTS)
    for layer in layers:
        for key, value in layer.items():
            if key == "gateway":
                opts = dict(gateway.get("options", {}))
                opts.update(value.get("options") or {})
                gateway.update(value)
                gateway["options"] = opts
            elif key == "timeouts":
                timeouts.update({k: float(v) for k, v in value.items()})
            else:
                merged[key] = value
    base = path.parent
    connection = merged.get("connection", "ssh")
    if connection == "ssh" and not merged.get("host"):
        merged["host"] = name
    for key in ("identity_file", "known_hosts"):
        if merged.get(key):
            merged[key] = str((base / Path(merged[key]).expanduser()).resolve())
    if connection == "local" and "state_dir" in merged:
        merged["state_dir"] = str((base / Path(merged["state_dir"]).expanduser()).absolute())
    return Host(name=name, manager=gateway.get("manager", "fleet"),
                manager_options={k: str(v) for k, v in (gateway.get("options") or {}).items()},
                timeouts=timeouts, **merged)


def load(path: str | Path) -> Inventory:
    """Read and validate an inventory file."""
    path = Path(path).absolute()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InventoryError(f"{path}: cannot read the inventory ({exc.strerror}); pass "
                             "--inventory with an existing file") from None
    return parse(text, path)


SANDBOX_YAML = """\
vars:
  connection: local
  gateway: {manager: fleet}
hosts:
  sandbox-1: {state_dir: .fleet/sandbox/sandbox-1}
  sandbox-2: {state_dir: .fleet/sandbox/sandbox-2}
  sandbox-3: {state_dir: .fleet/sandbox/sandbox-3}
groups:
  sandbox: {hosts: [sandbox-1, sandbox-2, sandbox-3]}
"""


def default_inventory(cwd: Path | None = None) -> Inventory:
    """`./inventory.yaml` if present, else the embedded sandbox (three local hosts)."""
    cwd = Path.cwd() if cwd is None else cwd
    found = cwd / "inventory.yaml"
    if found.is_file():
        return load(found)
    return parse(SANDBOX_YAML, cwd / "(embedded sandbox inventory)")
