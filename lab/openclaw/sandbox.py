"""Sandbox OpenClaw hosts: local real OpenClaw gateways that answer with the scripted model.

A host is a sandbox OpenClaw host when it is local, its manager is `openclaw` and its gateway
option `sandbox` is true (the `sandbox-openclaw` group of inventory.yaml). Before a task reaches
such a host, `resolve()` fills in what the inventory cannot know (the pinned toolchain's paths
for its `openclaw_version`, default the newest tested, the host's HOME, environment that keeps
OpenClaw on loopback) and `prepare()` makes the host exist: its state dir, HOME, workspace, a
first `openclaw.json` (when there is none: loopback, a token of its own, the scripted model as
the agents' provider, no heartbeat, no update checks) and the scripted model running on its
`model_port` (one per host, a detached child with fleet's pidfile; reused while that very
process answers).
The gateway itself is started by the deploy (manager mode `supervised`); `finish()` stops the
model of a host left without a gateway (a refused or failed first deploy), `down()` stops both.
"""

from __future__ import annotations

import json
import secrets
import socket
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

import yaml

from fleet.continuity import detached
from fleet.continuity.atomicfile import atomic_write
from fleet.deploy.inventory import Host
from fleet.installer.protocol import OPENCLAW
from lab.openclaw import model, toolchain

# Keeps a sandbox gateway's own traffic on this machine: no mDNS advertising, no update checks
# or downloads, no chat channels, plugin catalog lookups sent to a closed loopback port, and
# every other HTTP request OpenClaw makes (model price lists, catalogs: 2026.4.24 fetches them at
# start) sent through a proxy on a closed loopback port, the scripted model's own address
# excepted (Node honours HTTP(S)_PROXY with NODE_USE_ENV_PROXY).
QUIET_ENV = {
    "OPENCLAW_DISABLE_BONJOUR": "1",
    "OPENCLAW_NO_AUTO_UPDATE": "1",
    "OPENCLAW_OFFLINE": "1",
    "OPENCLAW_SKIP_CHANNELS": "1",
    "CLAWHUB_DISABLE_TELEMETRY": "1",
    "OPENCLAW_CLAWHUB_URL": "http://127.0.0.1:9",
    "NODE_USE_ENV_PROXY": "1",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
    # were OpenClaw to run npm for something `openclaw.install` did not stage, it fails in
    # seconds at the closed proxy instead of retrying for minutes with the gateway blocked
    "npm_config_fetch_retries": "0",
    "npm_config_fetch_timeout": "5000",
}
MODEL_START_S = 15.0


class SandboxError(RuntimeError):
    """A sandbox host cannot be prepared; the message says what to do."""


def is_sandbox(host: Host) -> bool:
    return (host.is_local and host.manager == OPENCLAW
            and host.manager_options.get("sandbox", "").lower() in ("1", "true", "yes"))


def resolve(hosts: list[Host]) -> list[Host]:
    """Hosts with the toolchain's paths and the sandbox environment in their gateway options."""
    out = []
    for host in hosts:
        if not is_sandbox(host):
            out.append(host)
            continue
        version = host.manager_options.get("openclaw_version") or toolchain.OPENCLAW_VERSION
        tool = toolchain.find(version=version)
        if tool is None or not toolchain.staged(tool):
            raise SandboxError(f"sandbox host {host.name} needs OpenClaw {version} installed: "
                               f"run `invoke openclaw.install --version {version}` first")
        opts = dict(host.manager_options)
        opts.setdefault("mode", "supervised")
        opts.setdefault("node", str(tool.node))
        opts.setdefault("openclaw", str(tool.openclaw))
        opts.setdefault("home", str(Path(host.state_dir) / "home"))
        opts.setdefault("env.OPENCLAW_PLUGIN_STAGE_DIR", str(tool.stage_dir))
        for key, value in QUIET_ENV.items():
            opts.setdefault(f"env.{key}", value)
        out.append(replace(host, manager_options=opts))
    return out


def base_config(host: Host) -> dict:
    """The openclaw.json a fresh sandbox host starts with."""
    state = Path(host.state_dir)
    opts = host.manager_options
    return {
        "agents": {"defaults": {"workspace": str(state / "workspace"),
                                "model": {"primary": f"fleet/{model.MODEL_ID}"},
                                "heartbeat": {"every": "0m"}}},
        "models": {"mode": "merge", "providers": {"fleet": {
            "baseUrl": f"http://127.0.0.1:{int(opts['model_port'])}/v1",
            "apiKey": "sandbox-local", "api": "openai-completions",
            "models": [{"id": model.MODEL_ID, "name": "fleet scripted model",
                        "reasoning": False, "input": ["text"],
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                        "contextWindow": 128000, "maxTokens": 4096}]}}},
        "gateway": {"mode": "local", "bind": "loopback", "port": int(opts["port"]),
                    "auth": {"mode": "token", "token": secrets.token_hex(24)}},
        "update": {"checkOnStart": False},
        "discovery": {"mdns": {"mode": "off"}},
        "logging": {"file": str(state / "logs" / "openclaw.log")},
        # the bundled ACP runtime probes its agent with `npx` at every start (an npm fetch
        # that cannot succeed here): off, as on a host that does not use it
        "plugins": {"entries": {"acpx": {"enabled": False}}},
    }


def prepare(hosts: list[Host]) -> None:
    """Make each sandbox host exist (dirs, first config) and its scripted model answer."""
    for host in hosts:
        if not is_sandbox(host):
            continue
        for key in ("port", "model_port"):
            if not str(host.manager_options.get(key, "")).isdigit():
                raise SandboxError(f"sandbox host {host.name}: gateway option {key} must be a "
                                   "port number")
        state = Path(host.state_dir)
        for sub in ("home", "workspace", "logs", "model"):
            (state / sub).mkdir(parents=True, exist_ok=True)
        config = state / "openclaw.json"
        if not config.exists():
            atomic_write(config, json.dumps(base_config(host), indent=2) + "\n", 0o600)
        start_model(host)


def model_files(host: Host) -> dict[str, Path]:
    base = Path(host.state_dir) / "model"
    return {"pid": base / "model.pid", "log": base / "requests.jsonl", "out": base / "model.out"}


def answering_model(port: int, timeout: float = 2.0) -> int | None:
    """The pid of the scripted model answering on 127.0.0.1:`port` (its /health names it),
    None when nothing answers or something else does."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout) as resp:
            health = json.loads(resp.read())
    except (OSError, ValueError):
        return None
    ours = resp.status == 200 and isinstance(health, dict) and health.get("ok") is True \
        and health.get("service") == model.SERVICE and isinstance(health.get("pid"), int)
    return health["pid"] if ours else None


def start_model(host: Host) -> int:
    """The host's scripted model pid: the one its pidfile records while that very process
    answers on its port, else a new one (detached). A port some other process holds is an
    error naming it, never taken for the host's model."""
    port = int(host.manager_options["model_port"])
    files = model_files(host)
    pid = detached.recorded_pid(files["pid"])
    answering = answering_model(port)
    if pid is not None and answering == pid:
        return pid
    if pid is not None:  # ours, but not (or no longer) the one answering: replace it
        detached.stop(pid, 5.0)
    if answering is not None or _port_taken(port):
        raise SandboxError(f"sandbox host {host.name}: 127.0.0.1:{port} (its model_port) is "
                           "taken by another process"
                           + (f" (a scripted model, pid {answering}, of another host or "
                              "checkout)" if answering else "")
                           + "; stop it or give this host another model_port")
    child = detached.Child([sys.executable, model.__file__, "--port", str(port), "--log",
                            str(files["log"])], files["out"], pidfile=files["pid"])
    deadline = time.monotonic() + MODEL_START_S
    while answering_model(port, 0.5) != child.pid:
        if child.exit_code() is not None or time.monotonic() > deadline:
            detached.stop(child.pid, 5.0)
            raise SandboxError(f"sandbox host {host.name}: the scripted model did not start on "
                               f"127.0.0.1:{port}{child.log_tail(8)}")
        time.sleep(0.1)
    return child.pid


def free_port() -> int:
    """A loopback port nothing listens on now (the kernel's pick)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def inventory_text(names: Sequence[str], group: str, *, ready_s: int = 600,
                   command_s: int = 1800,
                   options: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """An inventory of sandbox OpenClaw hosts `names` in the group `group`: state dirs beside
    the file, each host's gateway and model on free loopback ports, `options[name]` added to
    that host's gateway options (e.g. `openclaw_version`, `env.NAME`)."""
    hosts = {name: {
        "connection": "local", "state_dir": name,
        "timeouts": {"ready": ready_s, "command": command_s},
        "gateway": {"manager": OPENCLAW, "options": {
            "sandbox": "true", **(options or {}).get(name, {}),
            "port": str(free_port()), "model_port": str(free_port())}},
    } for name in names}
    return yaml.safe_dump({"hosts": hosts, "groups": {group: {"hosts": list(names)}}},
                          sort_keys=False)


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def stop_model(host: Host) -> str:
    """Stop the host's scripted model: how it ended, or "not running"."""
    pid = detached.recorded_pid(model_files(host)["pid"])
    return detached.stop(pid, 5.0) if pid is not None else "not running"


def finish(hosts: list[Host]) -> None:
    """After a task that prepared `hosts`: a sandbox host whose gateway does not run (its
    first deploy was refused or failed) keeps no scripted model running either."""
    for host in hosts:
        if is_sandbox(host) and supervised(host).process.pid() is None:
            stop_model(host)


def supervised(host: Host):
    """The installer's manager of the host's gateway (supervised mode), to find or stop it."""
    from fleet.installer.openclawgw import OpenclawManager  # noqa: PLC0415

    return OpenclawManager(Path(host.state_dir), dict(host.manager_options, mode="supervised"))


def down(hosts: list[Host]) -> list[str]:
    """Stop each sandbox host's supervised gateway and scripted model; lines saying what."""
    lines = []
    for host in hosts:
        if not is_sandbox(host):
            continue
        manager = supervised(host)
        how = manager.process.stop(manager.stop_grace)
        lines.append(f"{host.name}: gateway {how or 'not running'}")
        lines.append(f"{host.name}: model {stop_model(host)}")
    return lines
