"""The plugins' OpenClaw entries, checked the way OpenClaw will load them: imported by Node.

Why: a plugin's `index.js` is only ever run by OpenClaw on a user's host; a syntax error there
would otherwise first show as a plugin that fails to load after a deploy. `invoke verify` imports
every entry named by a plugin's `package.json` (`openclaw.extensions`) under Node >= 24 (a
pinned Node the caller passes, such as the checkout's toolchain, else `node` on PATH) and checks
its default export (`{id, register}`, the id of its manifest). Without such a Node it says so
and skips the import; a missing entry file is a problem either way.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from fleet.release.component import Project

MIN_NODE_MAJOR = 24
IMPORT_TIMEOUT_S = 60.0

# Imports each [id, file] given as JSON in argv[1]; prints one JSON list of results.
_IMPORT_JS = r"""
import { pathToFileURL } from "node:url";
const out = [];
for (const [id, file] of JSON.parse(process.argv[1])) {
  try {
    const mod = await import(pathToFileURL(file).href);
    const p = mod.default;
    if (!p || typeof p !== "object") throw new Error("has no default export object");
    if (p.id !== id) {
      throw new Error(`default export id ${JSON.stringify(p.id)} is not ${JSON.stringify(id)}`);
    }
    if (typeof p.register !== "function") {
      throw new Error("default export has no register(api) function");
    }
    out.push({ file, ok: true });
  } catch (err) {
    out.push({ file, ok: false, error: String((err && err.stack) || err) });
  }
}
process.stdout.write(JSON.stringify(out) + "\n");
"""


@dataclass(frozen=True)
class Node:
    """A usable Node binary, or why there is none (`path` None)."""

    path: Optional[str]
    version: Optional[str]
    note: str


def _version(node: str) -> Optional[str]:
    try:
        proc = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = proc.stdout.strip()
    return out.lstrip("v") if proc.returncode == 0 and out.startswith("v") else None


def find_node(pinned: Optional[str] = None) -> Node:
    """`pinned` when it runs, else `node` on PATH if it is Node >= 24."""
    if pinned is not None:
        version = _version(pinned)
        if version is not None:
            return Node(pinned, version, f"node {version} (pinned)")
    on_path = shutil.which("node")
    if on_path is None:
        return Node(None, None, "no Node >= 24 found (in the checkout: `invoke openclaw.install`)")
    version = _version(on_path)
    try:
        major = int((version or "0").split(".")[0])
    except ValueError:
        major = 0
    if major < MIN_NODE_MAJOR:
        return Node(None, version, f"{on_path} is Node {version or '?'}, older than "
                                   f"{MIN_NODE_MAJOR} (in the checkout: `invoke openclaw.install`)")
    return Node(on_path, version, f"node {version} ({on_path})")


def entries(project: Project) -> tuple[list[tuple[str, Path]], list[str]]:
    """([(plugin id, entry file)], problems) for every component whose manifest has a
    `package.json` with `openclaw.extensions` beside it."""
    found: list[tuple[str, Path]] = []
    problems: list[str] = []
    root = Path(project.root)
    for comp in project.components.values():
        if not comp.manifest:
            continue
        plugin_dir = (root / comp.manifest).parent
        pkg_path = plugin_dir / "package.json"
        try:
            pkg = json.loads(pkg_path.read_text(encoding="utf-8"))
            plugin_id = json.loads((root / comp.manifest).read_text(encoding="utf-8"))["id"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # the version check reports unreadable files
        block = pkg.get("openclaw") if isinstance(pkg, dict) else None
        exts = block.get("extensions") if isinstance(block, dict) else None
        if not isinstance(exts, list) or not exts:
            problems.append(f"{comp.id}: {pkg_path.relative_to(root)} has no "
                            "`openclaw.extensions` (OpenClaw would not load the plugin); fix: "
                            'add "openclaw": {"extensions": ["./index.js"]}')
            continue
        for ext in exts:
            entry = (plugin_dir / str(ext)).resolve()
            rel = (plugin_dir / str(ext)).relative_to(root).as_posix()
            if not entry.is_relative_to(plugin_dir.resolve()):
                problems.append(f"{comp.id}: {rel}: entry points outside its plugin directory")
            elif not entry.is_file():
                problems.append(f"{comp.id}: {rel}: entry named by openclaw.extensions is "
                                "missing")
            else:
                found.append((plugin_id, entry))
    return found, problems


def import_problems(project: Project, node: Node,
                    timeout: float = IMPORT_TIMEOUT_S) -> list[str]:
    """Import every entry with `node`; one problem per entry that does not load, naming it."""
    found, problems = entries(project)
    if node.path is None or not found:
        return problems
    root = Path(project.root).resolve()
    args = json.dumps([[pid, str(path)] for pid, path in found])
    try:
        proc = subprocess.run([node.path, "--input-type=module", "-e", _IMPORT_JS, args],
                              capture_output=True, text=True, timeout=timeout, cwd=root)
    except subprocess.TimeoutExpired:
        return problems + [f"importing the OpenClaw entries took over {timeout:g}s "
                           f"({node.note}); an entry must not block at import"]
    try:
        results = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return problems + [f"node ({node.note}) could not run the entry check: "
                           f"{(proc.stderr or proc.stdout).strip()[:500]}"]
    for res in results:
        if res.get("ok"):
            continue
        path = Path(res["file"])
        detail = str(res.get("error") or "").strip()
        lines = [ln.strip() for ln in detail.splitlines()
                 if ln.strip() and not ln.strip().startswith("at ")][:3]
        where = _syntax_error_at(node.path, path, root) if "SyntaxError" in detail else None
        problems.append(f"{_rel(path, root)}: does not load under Node {node.version}: "
                        + " | ".join(lines) + (f" (at {where})" if where else ""))
    return problems


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _syntax_error_at(node: str, entry: Path, root: Path) -> Optional[str]:
    """`file:line` of a syntax error in the entry or the modules beside it (ESM import errors
    do not say which file); `node --check` names it."""
    candidates = [entry] + sorted(entry.parent.glob("*.js")) + sorted(entry.parent.glob("*.mjs"))
    for path in dict.fromkeys(candidates):
        try:
            proc = subprocess.run([node, "--check", str(path)], capture_output=True, text=True,
                                  timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or [""])[0]
            line = first.rsplit(":", 1)[-1] if ":" in first else ""
            return f"{_rel(path, root)}:{line}" if line.isdigit() else _rel(path, root)
    return None
