"""The OpenClaw CLI of a host: the command line fleet runs it with (inventory options
`openclaw`, `node`, `home`, `env.NAME`) and the version it is.

Self-contained on purpose (standard library only, no fleet import, no `from __future__`): the
`openclaw` manager imports it (fleet/installer/openclawgw.py), and the control side sends its
text inside the fleet lease's take (fleet/deploy/lease.py) to a host that may have no fleet
release yet, so a deploy learns which OpenClaw a host runs before it uploads anything.
"""

import json
import os
import subprocess
from typing import Dict, List, Optional


def cli_argv(opts: Dict[str, str], *args: str) -> List[str]:
    """`openclaw <args>`: the CLI (option `openclaw`, default on PATH), run by `node` when that
    option is given (then `openclaw` names the `openclaw.mjs` entry)."""
    cli = os.path.expanduser(opts.get("openclaw", "openclaw"))
    node = opts.get("node")
    return ([os.path.expanduser(node), cli] if node else [cli]) + list(args)


def cli_env(opts: Dict[str, str]) -> Dict[str, str]:
    """What the options add to every OpenClaw process's environment: HOME, the given node first
    on PATH (OpenClaw starts its helpers with `node`: the same one), and each `env.NAME`."""
    env = {}
    if opts.get("home"):
        env["HOME"] = os.path.expanduser(opts["home"])
    node = opts.get("node")
    if node:
        env["PATH"] = os.path.dirname(os.path.expanduser(node)) + os.pathsep + \
            os.environ.get("PATH", "")
    for key, value in opts.items():
        if key.startswith("env.") and len(key) > 4:
            env[key[4:]] = value
    return env


def cli_version(opts: Dict[str, str], env: Optional[Dict[str, str]] = None,
                cwd: Optional[str] = None, timeout: float = 60.0) -> Optional[str]:
    """The CLI's version: the package.json beside an `openclaw.mjs` entry (no process), else
    `openclaw --version` (OpenClaw's fast path, ~0.1 s, prints `OpenClaw 2026.9.6 (eb377ac)`);
    None when it cannot be told within `timeout` seconds."""
    cli = os.path.expanduser(opts.get("openclaw", "openclaw"))
    if cli.endswith(".mjs"):
        try:
            with open(os.path.join(os.path.dirname(cli), "package.json"),
                      encoding="utf-8") as fh:
                return str(json.load(fh)["version"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    full = dict(os.environ)
    full.update(cli_env(opts) if env is None else env)
    try:
        proc = subprocess.run(cli_argv(opts, "--version"), env=full, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              start_new_session=True)
    except (OSError, subprocess.SubprocessError):
        return None
    words = proc.stdout.split()
    return words[1] if len(words) > 1 and proc.returncode == 0 else None
