"""Helpers for gateway tests: fake plugins in tmp dirs, CLI runs against real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Optional

from fleet.gateway.service import Gateway

REPO = Path(__file__).resolve().parents[2]


def write_plugin(
    root: Path,
    plugin_id: str,
    code: str,
    version: str = "1.0.0",
    schema: Optional[Dict[str, Any]] = None,
    requires: Optional[List[str]] = None,
    main: Optional[str] = None,
) -> Path:
    """A plugin dir `root/<id>` with manifest, package.json and Python entry file."""
    d = root / plugin_id
    d.mkdir(parents=True, exist_ok=True)
    manifest: Dict[str, Any] = {
        "id": plugin_id,
        "version": version,
        "configSchema": schema or {"type": "object", "additionalProperties": False},
    }
    if requires:
        manifest["requires"] = requires
    (d / "openclaw.plugin.json").write_text(json.dumps(manifest))
    pkg: Dict[str, Any] = {"version": version}
    if main:
        pkg["fleet"] = {"entry": main}
    (d / "package.json").write_text(json.dumps(pkg))
    (d / (main or "plugin.py")).write_text(textwrap.dedent(code))
    return d


def install(state: Path, plugin_dir: Path) -> None:
    ext = state / "extensions"
    ext.mkdir(parents=True, exist_ok=True)
    (ext / plugin_dir.name).symlink_to(plugin_dir)


def write_config(state: Path, config: Dict[str, Any]) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "openclaw.json").write_text(json.dumps(config))


RECORDER = """
import json, os
def register(api):
    log = os.path.join(str(api.state_dir), "hooks.jsonl")
    def rec(name):
        def handler(event, ctx):
            keep = {k: v for k, v in event.items() if k != "messages"}
            if "messages" in event:
                keep["messageCount"] = len(event["messages"])
                keep["roles"] = [m.get("role") for m in event["messages"]]
            with open(log, "a") as fh:
                fh.write(json.dumps({"hook": name, "event": keep, "ctx": ctx}) + "\\n")
            if name == "before_prompt_build":
                return {"prependSystemContext": "CTX for " + ctx["sessionKey"]}
        return handler
    for name in ("before_prompt_build", "agent_end", "before_compaction", "before_reset",
                 "session_end", "subagent_spawned", "subagent_ended"):
        api.on(name, rec(name), priority=10)
    api.register_command("rec", lambda ctx: {"text": "args=" + ctx["args"]})
"""


def hook_log(state: Path) -> List[Dict[str, Any]]:
    path = state / "hooks.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ok(gw: Gateway, op: str, **args: Any) -> Any:
    resp = gw.handle(dict(args, op=op))
    assert resp["ok"], resp
    return resp["result"]


def run_cli(state: Path, *args: str, timeout: float = 20.0) -> subprocess.CompletedProcess:
    """`python3 -m fleet.gateway --state-dir <state> ...` with this checkout on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "fleet.gateway", "--state-dir", str(state), *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=str(REPO),
    )


def call(state: Path, op: str, args: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    proc = run_cli(state, "call", op, "--json-args", json.dumps(args or {}), "--json")
    resp = json.loads(proc.stdout)
    assert (proc.returncode == 0) == bool(resp.get("ok")), (proc, resp)
    return resp
