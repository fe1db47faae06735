"""Sandbox OpenClaw hosts: local real OpenClaw gateways that answer with the scripted model.

A host is a sandbox OpenClaw host when it is local, its manager is `openclaw` and its gateway
option `sandbox` is true (the `sandbox-openclaw` group of inventory.yaml). Before a task reaches
such a host, `resolve()` fills in what the inventory cannot know (the pinned toolchain's paths,
the host's HOME, environment that keeps OpenClaw on loopback) and `prepare()` makes the host
exist: its state dir, HOME, workspace, a first `openclaw.json` (when there is none: loopback,
no auth, the scripted model as the agents' provider, no heartbeat, no update checks) and the
scripted model running on its `model_port` (one per host, reused while it answers).
The gateway itself is started by the deploy (manager mode `supervised`); `down()` stops both.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

from fleet.continuity.atomicfile import atomic_write
from fleet.deploy.inventory import Host
from fleet.installer.protocol import OPENCLAW
from lab.openclaw import model, toolchain

# Keeps a sandbox gateway's own traffic on this machine: no mDNS advertising, no update checks
# or downloads, no chat channels, plugin catalog lookups sent to a closed loopback port.
QUIET_ENV = {
    "OPENCLAW_DISABLE_BONJOUR": "1",
    "OPENCLAW_NO_AUTO_UPDATE": "1",
    "OPENCLAW_OFFLINE": "1",
    "OPENCLAW_SKIP_CHANNELS": "1",
    "CLAWHUB_DISABLE_TELEMETRY": "1",
    "OPENCLAW_CLAWHUB_URL": "http://127.0.0.1:9",
}
MODEL_START_S = 15.0


class SandboxError(RuntimeError):
    """A sandbox host cannot be prepared; the message says what to do."""


def is_sandbox(host: Host) -> bool:
    return (host.is_local and host.manager == OPENCLAW
            and host.manager_options.get("sandbox", "").lower() in ("1", "true", "yes"))


def resolve(hosts: list[Host]) -> list[Host]:
    """Hosts with the toolchain's paths and the sandbox environment in their gateway options."""
    if not any(is_sandbox(h) for h in hosts):
        return hosts
    tool = toolchain.find()
    if tool is None:
        raise SandboxError("the sandbox OpenClaw hosts need the pinned OpenClaw toolchain: run "
                           "`invoke openclaw.install` first")
    out = []
    for host in hosts:
        if not is_sandbox(host):
            out.append(host)
            continue
        opts = dict(host.manager_options)
        opts.setdefault("mode", "supervised")
        opts.setdefault("node", str(tool.node))
        opts.setdefault("openclaw", str(tool.openclaw))
        opts.setdefault("home", str(Path(host.state_dir) / "home"))
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
            "apiKey": "sandbox-local", "api": "openai-completions", "timeoutSeconds": 120,
            "models": [{"id": model.MODEL_ID, "name": "fleet scripted model",
                        "reasoning": False, "input": ["text"],
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                        "contextWindow": 128000, "maxTokens": 4096}]}}},
        "gateway": {"mode": "local", "bind": "loopback", "port": int(opts["port"]),
                    "auth": {"mode": "none"}},
        "update": {"checkOnStart": False},
        "discovery": {"mdns": {"mode": "off"}},
        "logging": {"file": str(state / "logs" / "openclaw.log")},
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


def model_answers(port: int, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout) as resp:
            return resp.status == 200 and json.loads(resp.read()).get("ok") is True
    except (OSError, ValueError):
        return False


def start_model(host: Host) -> int:
    """The host's scripted model pid, started (detached) unless one already answers."""
    port = int(host.manager_options["model_port"])
    files = model_files(host)
    pid = _pid(files["pid"])
    if pid is not None and model_answers(port):
        return pid
    if pid is not None:  # alive but not answering: replace it
        _stop(pid, 5.0)
    with open(files["out"], "ab") as out, open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen([sys.executable, model.__file__, "--port", str(port),
                                 "--log", str(files["log"])],
                                stdin=devnull, stdout=out, stderr=out, start_new_session=True,
                                close_fds=True)
    files["pid"].write_text(str(proc.pid), encoding="ascii")
    deadline = time.monotonic() + MODEL_START_S
    while not model_answers(port, 0.5):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SandboxError(f"sandbox host {host.name}: the scripted model did not start on "
                               f"127.0.0.1:{port} (see {files['out']}); is the port taken?")
        time.sleep(0.1)
    return proc.pid


def down(hosts: list[Host]) -> list[str]:
    """Stop each sandbox host's supervised gateway and scripted model; lines saying what."""
    from fleet.installer.openclawgw import OpenclawManager  # noqa: PLC0415

    lines = []
    for host in hosts:
        if not is_sandbox(host):
            continue
        manager = OpenclawManager(Path(host.state_dir), dict(host.manager_options,
                                                              mode="supervised"))
        how = manager.process.stop(manager.stop_grace)
        lines.append(f"{host.name}: gateway {how or 'not running'}")
        pid = _pid(model_files(host)["pid"])
        lines.append(f"{host.name}: model {_stop(pid, 5.0) if pid else 'not running'}")
    return lines


def _pid(path: Path) -> int | None:
    try:
        pid = int(path.read_text(encoding="ascii").strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    try:  # a reused pid is not our model
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return pid
    return pid if b"model.py" in cmdline else None


def _stop(pid: int, grace_s: float) -> str:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "gone"
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return "stopped"
        except (ProcessLookupError, FileNotFoundError):
            return "stopped"
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return "stopped"
    return "killed"
