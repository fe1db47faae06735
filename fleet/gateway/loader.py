"""Plugin loading: manifest validation, config with schema defaults, import, register(api).

Every `<state>/extensions/<id>/openclaw.plugin.json` is one plugin. A plugin that fails at any step
is recorded with its error (health shows it, readiness fails) and leaves no hook or command behind:
its registrations are staged and only moved to the live bus when `register(api)` returned.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
import traceback
import types
import zlib
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from fleet.continuity.schema import validate as validate_config
from fleet.gateway import hooks as hooks_mod
from fleet.gateway.api import PluginApi
from fleet.gateway.commands import CommandError, CommandRegistry
from fleet.gateway.hooks import HookBus
from fleet.gateway.layout import Layout, plugin_dirs
from fleet.gateway.manifest import PluginLoadError, entry_file, validate_manifest

log = logging.getLogger("fleet.gateway.loader")


class PluginRecord:
    """What health reports about one plugin."""

    def __init__(self, plugin_id: str, directory: Path) -> None:
        self.id = plugin_id
        self.dir = directory
        self.version: Optional[str] = None
        self.enabled = True
        self.loaded = False
        self.error: Optional[str] = None
        self.manifest: Dict[str, Any] = {}
        self.config: Dict[str, Any] = {}
        self.module: Optional[types.ModuleType] = None

    def health(self) -> Dict[str, Any]:
        return {
            "version": self.version,
            "loaded": self.loaded,
            "enabled": self.enabled,
            "error": self.error,
            "dir": str(self.dir),
        }


def release_root(directory: Path) -> Optional[Path]:
    """The directory holding the `fleet/` package this plugin ships in, if any."""
    for parent in directory.resolve().parents:
        if (parent / "fleet" / "__init__.py").is_file():
            return parent
    return None


def import_entry(plugin_id: str, directory: Path, entry: Path) -> types.ModuleType:
    """Import the entry under a unique name (plugin id + release path) as part of a package."""
    real = directory.resolve()
    # a tag of the release path, no security hash: crc32 spares every gateway start the load of
    # hashlib's OpenSSL (~3 ms of CPU)
    digest = f"{zlib.crc32(str(real).encode()):08x}"
    pkg_name = "fleet_plugin_" + re.sub(r"[^a-z0-9_]", "_", plugin_id) + "_" + digest
    root = release_root(real)
    if root is not None and str(root) not in sys.path:
        sys.path.append(str(root))
    running = Path(sys.modules["fleet"].__file__).resolve().parent.parent
    if root is not None and root != running:
        log.warning(
            "plugin %s ships in %s but this gateway runs the fleet package of %s: its "
            "`fleet.*` imports resolve to the gateway's copy (start the gateway with "
            "--release %s to run one release)", plugin_id, root, running, root,
        )
    if pkg_name not in sys.modules:
        init = real / "__init__.py"
        if init.is_file():
            spec = importlib.util.spec_from_file_location(
                pkg_name, init, submodule_search_locations=[str(real)]
            )
            pkg = _exec_module(pkg_name, spec)
        else:
            pkg = types.ModuleType(pkg_name)
            pkg.__path__ = [str(real)]
            sys.modules[pkg_name] = pkg
    mod_name = f"{pkg_name}.{entry.stem}"
    return _exec_module(mod_name, importlib.util.spec_from_file_location(mod_name, entry))


def _exec_module(name: str, spec: Any) -> types.ModuleType:
    """Import `spec` as `name`; a module that fails leaves nothing behind in sys.modules."""
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def find_register(module: types.ModuleType) -> Callable[[PluginApi], Any]:
    fn = getattr(module, "register", None)
    if callable(fn):
        return fn
    plugin = getattr(module, "plugin", None)
    fn = getattr(plugin, "register", None) or (
        plugin.get("register") if isinstance(plugin, dict) else None
    )
    if callable(fn):
        return fn
    raise PluginLoadError(f"{module.__file__}: defines no register(api) function")


def describe(exc: BaseException, entry: Optional[Path]) -> str:
    if isinstance(exc, PluginLoadError):
        return str(exc)
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    for frame in reversed(frames):
        if entry is not None and str(entry.parent) in frame.filename:
            where = f" ({Path(frame.filename).name}:{frame.lineno})"
            break
    return f"{entry or 'plugin'}: {type(exc).__name__}: {exc}{where}"


def _load_order(dirs: List[Path], manifests: Dict[str, Dict[str, Any]]) -> List[Path]:
    """Required plugins first (stable by name otherwise); cycles fall back to name order."""
    by_id = {d.name: d for d in dirs}
    order: List[Path] = []
    seen: Dict[str, int] = {}

    def visit(pid: str) -> None:
        if seen.get(pid) == 2 or pid not in by_id:
            return
        if seen.get(pid) == 1:
            return
        seen[pid] = 1
        for req in manifests.get(pid, {}).get("requires", []) or []:
            visit(req)
        seen[pid] = 2
        order.append(by_id[pid])

    for d in dirs:
        visit(d.name)
    return order


class PluginHost:
    """Loads every plugin of a state dir into one hook bus and command registry."""

    def __init__(
        self,
        layout: Layout,
        config_source: Callable[[], Dict[str, Any]],
        hooks: HookBus,
        commands: CommandRegistry,
    ) -> None:
        self.layout = layout
        self.config_source = config_source
        self.hooks = hooks
        self.commands = commands
        self.records: Dict[str, PluginRecord] = {}

    def entry_config(self, plugin_id: str) -> Dict[str, Any]:
        plugins = self.config_source().get("plugins") or {}
        entries = plugins.get("entries") if isinstance(plugins, dict) else None
        entry = (entries or {}).get(plugin_id) if isinstance(entries, dict) else None
        if entry is None:
            return {}
        if not isinstance(entry, dict):
            raise PluginLoadError(
                f"{self.layout.config_path}: plugins.entries.{plugin_id} must be an object"
            )
        return entry

    def load_all(self) -> Dict[str, PluginRecord]:
        dirs = plugin_dirs(self.layout)
        manifests: Dict[str, Dict[str, Any]] = {}
        for d in dirs:
            rec = PluginRecord(d.name, d)
            self.records[d.name] = rec
            try:
                manifests[d.name] = validate_manifest(d)
                rec.manifest = manifests[d.name]
                rec.version = rec.manifest["version"]
            except PluginLoadError as exc:
                rec.error = str(exc)
            except Exception as exc:  # one bad manifest disables its plugin, never the gateway
                rec.error = f"{d / 'openclaw.plugin.json'}: {type(exc).__name__}: {exc}"
        for d in _load_order(dirs, manifests):
            rec = self.records[d.name]
            if rec.error is None:
                self._load(rec)
        for rec in self.records.values():
            if rec.error:
                log.error("plugin %s failed to load: %s", rec.id, rec.error)
            elif rec.loaded:
                log.info("plugin %s %s loaded from %s", rec.id, rec.version, rec.dir)
            else:
                log.info("plugin %s is disabled in %s", rec.id, self.layout.config_path)
        return self.records

    def _load(self, rec: PluginRecord) -> None:
        entry: Optional[Path] = None
        try:
            cfg_entry = self.entry_config(rec.id)
            enabled = cfg_entry.get("enabled", True)
            if not isinstance(enabled, bool):
                raise PluginLoadError(
                    f"{self.layout.config_path}: plugins.entries.{rec.id}.enabled must be "
                    "true or false"
                )
            rec.enabled = enabled
            if not enabled:
                return
            rec.config = self._plugin_config(rec, cfg_entry.get("config"))
            for req in rec.manifest.get("requires", []) or []:
                other = self.records.get(req)
                if other is None or not other.loaded:
                    why = "is not installed" if other is None else (
                        "failed to load" if other.error else "is disabled"
                    )
                    raise PluginLoadError(
                        f"{rec.dir / 'openclaw.plugin.json'}: requires plugin {req!r}, which {why}"
                    )
            entry = entry_file(rec.dir, rec.id)
            module = import_entry(rec.id, rec.dir, entry)
            register = find_register(module)
            staged_hooks = HookBus(self.hooks.timeout_s)
            staged_cmds = CommandRegistry(self.commands.timeout_s)
            api = PluginApi(
                rec.id,
                rec.version or "",
                self.layout.state_dir,
                self.config_source,
                lambda rec=rec: self.fresh_config(rec),
                staged_hooks,
                staged_cmds,
                root_dir=rec.dir,
            )
            register(api)
            for cmd in staged_cmds.names():
                self.commands.register(
                    cmd["name"],
                    staged_cmds._commands[cmd["name"]]["handler"],
                    cmd["description"],
                    rec.id,
                )
            hooks_mod.absorb(self.hooks, staged_hooks)
            rec.module = module
            rec.loaded = True
        except (PluginLoadError, CommandError) as exc:
            rec.error = str(exc)
        except BaseException as exc:  # an import or register() failure of any kind
            if isinstance(exc, KeyboardInterrupt):
                raise
            rec.error = describe(exc, entry)

    def _plugin_config(self, rec: PluginRecord, raw: Any) -> Dict[str, Any]:
        """`plugins.entries.<id>.config` validated against the manifest schema, defaults applied."""
        where = f"plugins.entries.{rec.id}.config"
        schema = rec.manifest["configSchema"]
        try:
            if raw is not None and not isinstance(raw, dict):
                raise ValueError(f"{where}: must be an object")
            return validate_config(raw or {}, schema)
        except ValueError as exc:
            text = str(exc) if str(exc).startswith("plugins.") else f"{where}: {exc}"
            raise PluginLoadError(f"{self.layout.config_path}: {text}") from exc

    def allows_prompt_injection(self, plugin_id: str) -> bool:
        """False only when `plugins.entries.<id>.hooks.allowPromptInjection` is false."""
        try:
            hooks = self.entry_config(plugin_id).get("hooks")
        except PluginLoadError:
            return True
        return not (isinstance(hooks, dict) and hooks.get("allowPromptInjection") is False)

    def fresh_config(self, rec: PluginRecord) -> Dict[str, Any]:
        """The plugin's config after picking up any change of the config file."""
        self.config_source()
        return rec.config

    def refresh_configs(self) -> None:
        """Re-validate loaded plugins' configs; an invalid change keeps the previous config."""
        for rec in self.records.values():
            if not rec.loaded:
                continue
            try:
                rec.config = self._plugin_config(rec, self.entry_config(rec.id).get("config"))
            except PluginLoadError as exc:
                log.error("plugin %s keeps its previous config: %s", rec.id, exc)

    def versions(self) -> Dict[str, str]:
        return {r.id: r.version for r in self.records.values() if r.loaded and r.version}

    def health(self) -> Dict[str, Dict[str, Any]]:
        return {pid: rec.health() for pid, rec in sorted(self.records.items())}

    def ready_error(self) -> Optional[str]:
        """Why the gateway is not ready (a plugin failed), or None."""
        bad = [f"{r.id}: {r.error}" for r in self.records.values() if r.error]
        return "; ".join(bad) if bad else None
