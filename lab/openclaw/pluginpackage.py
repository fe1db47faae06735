"""fleet's npm packages in an OpenClaw host, installed the way an OpenClaw user installs them:
`openclaw plugins install <tarball | npm:<name>@<version>>`, OpenClaw's own CLI, then the gateway
started with them (no fleet release on the host).

`openclaw plugins install` is non-interactive here, so it gets what its user would confirm at
its prompt: `--force` (an archive or npm source outside ClawHub), `--dangerously-force-unsafe-
install` (2026.4.x blocks any plugin that spawns a process, and the bridge starts its Python
worker; a no-op from 2026.8 on) and, where the release knows it, `--accept-capabilities`. Then
what its user sets once, as docs/openclaw.md says: the continuity plugin's conversation hooks
allowed (`plugins.entries.<id>.hooks.allowConversationAccess`), which OpenClaw blocks for every
plugin it did not bundle.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from fleet.continuity.atomicfile import atomic_write
from fleet.installer.manager import ManagerError
from fleet.installer.openclawgw import OpenclawManager

INSTALL_TIMEOUT_S = 900.0
START_TIMEOUT_S = 600.0
CONSENT_FLAG = "--accept-capabilities"
INSTALLED = "Installed plugin"


class InstallRefused(AssertionError):
    """`openclaw plugins install` did not install; the message holds what OpenClaw said."""


def knows_flag(manager: OpenclawManager, flag: str) -> bool:
    """Whether the manager's OpenClaw CLI has `flag` (read from its built code: no CLI boot)."""
    dist = Path(manager.opts["openclaw"]).parent / "dist"
    needle = flag.encode()
    return any(needle in path.read_bytes() for path in sorted(dist.glob("*.*js"))
               if path.is_file())


def install_argv(manager: OpenclawManager, spec: str, pin: bool = False) -> list[str]:
    """The `plugins install` arguments for `spec` (a tarball path or an npm spec)."""
    args = ["plugins", "install", spec, "--force", "--dangerously-force-unsafe-install"]
    if knows_flag(manager, CONSENT_FLAG):
        args.append(CONSENT_FLAG)
    if pin:
        args.append("--pin")
    return args


def install(manager: OpenclawManager, spec: str, pin: bool = False,
            env: dict | None = None) -> str:
    """Run `openclaw plugins install` for `spec`; its output, or InstallRefused."""
    try:
        proc = manager.cli(*install_argv(manager, spec, pin), timeout=INSTALL_TIMEOUT_S, env=env)
    except ManagerError as exc:
        raise InstallRefused(str(exc)) from None
    out = (proc.stdout or "") + (proc.stderr or "")
    if proc.returncode != 0 or INSTALLED not in out:
        raise InstallRefused(f"`openclaw plugins install {spec}` exited {proc.returncode}:\n"
                             f"{out.strip()[-3000:]}")
    return out


def allow_conversation_access(manager: OpenclawManager, plugin_id: str) -> None:
    """What `openclaw config set plugins.entries.<id>.hooks.allowConversationAccess true`
    writes (without a CLI boot): the plugin's prompt and run-end hooks allowed."""
    path = manager.config_path
    config = json.loads(path.read_text(encoding="utf-8"))
    entry = config.setdefault("plugins", {}).setdefault("entries", {}).setdefault(plugin_id, {})
    entry.setdefault("hooks", {})["allowConversationAccess"] = True
    atomic_write(path, json.dumps(config, indent=2) + "\n", 0o600)


def start(manager: OpenclawManager, timeout: float = START_TIMEOUT_S) -> int:
    """Start the host's gateway (`openclaw gateway run`, supervised) with what is installed;
    its pid once it answers."""
    pid = manager.process.start()
    deadline = time.monotonic() + timeout
    while not manager.http_ready():
        failed = manager.process.exited()
        if failed:
            raise AssertionError(failed)
        if time.monotonic() > deadline:
            raise AssertionError(f"the gateway in {manager.state_dir} did not answer within "
                                 f"{timeout:.0f}s{manager.process.log_tail()}")
        time.sleep(0.5)
    return pid
