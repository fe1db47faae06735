"""The fleet plugins' part of a host's `openclaw.json`, edited without disturbing the rest.

OpenClaw loads a plugin from a directory named in `plugins.load.paths`; its entry
`plugins.entries.<id>` enables it and grants `hooks.allowConversationAccess` (without it OpenClaw
blocks the hooks that read the conversation: `before_prompt_build`, `agent_end`). So a release is
deployed to OpenClaw by pointing `plugins.load.paths` at the plugin dirs of that release (a new
path per release is also what makes a running gateway notice the change) and keeping each entry
enabled. Everything else in the file (other plugins, models, the user's settings of our plugins
under `config`) is kept as it is; paths of older fleet releases are replaced, never added to.

The file is rewritten temp + fsync + rename, with the original's mode. A file fleet cannot read
as plain JSON (OpenClaw also accepts JSON5 comments) or whose `plugins` keys have the wrong
shape is refused before anything is written, naming the file, the key and the fix; so is one
that is not a regular file, larger than MAX_BYTES or not UTF-8 (fleet/installer/textfile.py),
and one its owner made read-only, or whose directory is (`check_writable`): a rename would
replace it anyway.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shlex
import stat
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from fleet.continuity import paths, regularfile
from fleet.continuity.atomicfile import fsync_dir
from fleet.installer import textfile

MAX_BYTES = paths.CONFIG_MAX_BYTES  # the bound every reader of openclaw.json keeps
_FIX = {
    textfile.NOT_REGULAR: "openclaw.json must be a regular file (or a symlink to one); put the "
                          "config there and deploy again",
    textfile.TOO_BIG: "fleet edits an openclaw.json of at most {limit} (docs/openclaw.md); "
                      "a config this large is not one OpenClaw wrote: find what filled it, "
                      "shrink it and deploy again",
    textfile.NOT_UTF8: "openclaw.json is UTF-8 JSON; fix or remove the bytes there "
                       "(`openclaw config validate` checks the file) and deploy again",
    textfile.UNREADABLE: "make it readable for this user and deploy again",
}


class ConfigError(RuntimeError):
    """openclaw.json cannot be used as it is; nothing was written."""


def load(path: Path) -> Dict[str, Any]:
    """The config as a dict ({} when the file does not exist yet)."""
    try:
        raw = textfile.read_bytes(path, MAX_BYTES)
        text = "" if raw is None else textfile.decode(raw, path)
    except textfile.TextFileError as exc:
        raise ConfigError(f"{exc}; {_FIX[exc.kind].format(limit=textfile.size_text(MAX_BYTES))}"
                          ) from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"{path}: not plain JSON ({exc}). fleet edits openclaw.json only as plain JSON, the "
            "way OpenClaw itself writes it; remove comments and trailing commas (or let "
            "`openclaw config set` rewrite the file), check it with `openclaw config validate`, "
            "then deploy again") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a JSON object, not "
                          f"{type(data).__name__}; fix the file and deploy again")
    _check_shapes(path, data)
    return data


def _check_shapes(path: Path, data: Dict[str, Any]) -> None:
    plugins = data.get("plugins")
    if plugins is None:
        return
    where = f"{path}: key 'plugins'"
    if not isinstance(plugins, dict):
        raise ConfigError(f"{where} must be an object; fix it and deploy again")
    for key, kind in (("load", dict), ("entries", dict), ("allow", list)):
        value = plugins.get(key)
        if value is not None and not isinstance(value, kind):
            raise ConfigError(f"{where}.{key} must be {'an object' if kind is dict else 'a list'}"
                              "; fix it and deploy again")
    paths = (plugins.get("load") or {}).get("paths")
    if paths is not None and not (isinstance(paths, list)
                                  and all(isinstance(p, str) for p in paths)):
        raise ConfigError(f"{where}.load.paths must be a list of strings; fix it and deploy again")
    for plugin_id, entry in (plugins.get("entries") or {}).items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}.entries.{plugin_id} must be an object; fix it and deploy "
                              "again")
        for key in ("hooks", "config"):
            if entry.get(key) is not None and not isinstance(entry[key], dict):
                raise ConfigError(f"{where}.entries.{plugin_id}.{key} must be an object; fix it "
                                  "and deploy again")


def with_plugins(data: Dict[str, Any], plugin_dirs: Dict[str, str], releases_root: str,
                 config: Optional[Dict[str, Dict[str, Any]]] = None) -> Dict[str, Any]:
    """A copy of `data` that loads `plugin_dirs` ({id: dir}) and enables each of them.

    Load paths under `releases_root` (older fleet releases) are dropped; other paths stay in
    their order. `config` ({id: {...}}) sets keys of an entry's `config`; keys it does not name
    keep the user's values. A `plugins.allow` list, when the user has one, gains the ids.
    """
    out = copy.deepcopy(data)
    plugins = out.setdefault("plugins", {})
    load = plugins.setdefault("load", {})
    root = releases_root.rstrip(os.sep) + os.sep
    wanted = list(plugin_dirs.values())
    kept = [p for p in load.get("paths") or [] if not p.startswith(root) and p not in wanted]
    load["paths"] = kept + wanted
    entries = plugins.setdefault("entries", {})
    for plugin_id in plugin_dirs:
        entry = entries.setdefault(plugin_id, {})
        entry["enabled"] = True
        hooks = entry.setdefault("hooks", {})
        hooks["allowConversationAccess"] = True
        settings = (config or {}).get(plugin_id)
        if settings:
            entry.setdefault("config", {}).update(settings)
    allow = plugins.get("allow")
    if isinstance(allow, list):
        allow.extend(i for i in plugin_dirs if i not in allow)
    return out


def without_plugins(data: Dict[str, Any], plugin_ids: List[str],
                    releases_root: str) -> Dict[str, Any]:
    """A copy of `data` with fleet taken out (`fleet remove`): no load path under
    `releases_root`, no entry and no `plugins.allow` item for `plugin_ids`. Everything else
    (other plugins, the user's other settings) stays as it is."""
    out = copy.deepcopy(data)
    plugins = out.get("plugins")
    if not isinstance(plugins, dict):
        return out
    root = releases_root.rstrip(os.sep) + os.sep
    load = plugins.get("load")
    if isinstance(load, dict) and isinstance(load.get("paths"), list):
        load["paths"] = [p for p in load["paths"] if not str(p).startswith(root)]
    entries = plugins.get("entries")
    if isinstance(entries, dict):
        for plugin_id in plugin_ids:
            entries.pop(plugin_id, None)
    allow = plugins.get("allow")
    if isinstance(allow, list):
        plugins["allow"] = [i for i in allow if i not in plugin_ids]
    return out


def check_writable(path: Path) -> None:
    """ConfigError naming the file and the fix when fleet may not replace `path`: a file its
    owner made read-only (a rename would replace it all the same), or one this user cannot
    write, or a directory where the temp file and the lock cannot be made. Checked by mode bits
    as well as access(2), so a root deploy honours a 0444 file too. Changes nothing."""
    try:
        st: Optional[os.stat_result] = os.stat(str(path))
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot inspect it ({exc.strerror or exc})") from None
    if st is not None and (not st.st_mode & 0o222 or not os.access(str(path), os.W_OK)):
        raise ConfigError(
            f"{path} is read-only (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}): "
            "a deploy rewrites it to load the release's plugins, and fleet does not replace a "
            f"file its owner made read-only; make it writable (chmod u+w {shlex.quote(str(path))}"
            ") and deploy again")
    directory = path.parent
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent  # write_candidate creates what is missing below it
    dst = os.stat(str(directory))
    if not dst.st_mode & 0o222 or not os.access(str(directory), os.W_OK | os.X_OK):
        raise ConfigError(
            f"{directory} is read-only (mode {stat.S_IMODE(dst.st_mode):04o}): fleet replaces "
            f"{path} through a temp file beside it, and locks it there; make the directory "
            f"writable (chmod u+w {shlex.quote(str(directory))}) and deploy again")


def render(data: Dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_candidate(path: Path, data: Dict[str, Any]) -> Path:
    """`data` in a temp file beside `path` (same filesystem, original's mode), fsynced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.fleet-", suffix=".json", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(render(data))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        except FileNotFoundError:
            os.chmod(tmp, 0o600)  # OpenClaw keeps its config private
    except BaseException:
        discard(Path(tmp))
        raise
    return Path(tmp)


def commit(candidate: Path, path: Path) -> None:
    """Put a validated candidate in place atomically."""
    os.replace(str(candidate), str(path))
    fsync_dir(path.parent)


def discard(candidate: Path) -> None:
    try:
        candidate.unlink()
    except OSError:
        pass


def validation_key(data: Dict[str, Any], plugin_dirs: Dict[str, str], releases_root: str,
                   openclaw: str) -> Optional[str]:
    """What OpenClaw's verdict on `data` depends on, as one hash; None when it cannot be told.

    `openclaw config validate` reads the file and, for each plugin in `plugins.load.paths`, its
    `openclaw.plugin.json` (id, configSchema, requires...) and `package.json`; it does not run
    plugin code. Two configs that differ only in which fleet release dir a path names, checked
    against plugin files that differ only in their own `version`, get the same verdict from the
    same OpenClaw. So the key holds the config with release dir names replaced, each plugin's two
    files without `version`, and OpenClaw's version. When a manifest's `requires` names anything
    but plain plugin ids (a version range could depend on another plugin's version), versions
    are kept in the key.
    """
    root = releases_root.rstrip(os.sep) + os.sep
    norm = copy.deepcopy(data)
    paths = ((norm.get("plugins") or {}).get("load") or {}).get("paths") or []
    for i, path in enumerate(paths):
        if isinstance(path, str) and path.startswith(root):
            rest = path[len(root):].split(os.sep, 1)
            paths[i] = "<release>" + (os.sep + rest[1] if len(rest) > 1 else "")
    files: Dict[str, Any] = {}
    for plugin_id, plugin_dir in sorted(plugin_dirs.items()):
        for name in ("openclaw.plugin.json", "package.json"):
            try:
                files[f"{plugin_id}/{name}"] = json.loads(
                    regularfile.read_text(Path(plugin_dir) / name))
            except (OSError, ValueError):
                return None
    plain = all(isinstance(r, str) and r.replace("-", "").replace("_", "").isalnum()
                for f in files.values() if isinstance(f, dict)
                for r in (f.get("requires") or []))
    if plain:
        for content in files.values():
            if isinstance(content, dict):
                content.pop("version", None)
    blob = json.dumps({"config": norm, "plugins": files, "openclaw": openclaw}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
