"""What one OpenClaw gateway can tell fleet about its plugins: one record, detected once per host.

Why one record: the releases fleet supports (2026.4.24 - 2026.9.6) differ in which RPCs answer,
which fields `plugins.list` carries and where a plugin that fails to load shows up. The manager
(fleet/installer/openclawgw.py) reads this record instead of comparing versions here and there.
It is detected from what the gateway says of itself, not from its version number, so a release
in between is handled by what it does. What the releases do, read from their built code (dist/)
and checked on real gateways:

- every release's `hello-ok` lists the methods it serves (`features.methods`), a plugin's own
  methods (`<id>.ready`) included once it registered; the list is complete whenever the gateway
  answers a connect (plugins load before the gateway takes connections, or it refuses them
  while they load);
- `plugins.list`: absent before 2026.8; 2026.8 lists the installed catalog only (`state`
  enabled/disabled/error from the plugin's metadata, nothing of what runs); 2026.9 adds each
  plugin's `runtime` (`state` active/unloaded/..., the load `error`);
- `plugins.reload`: 2026.9 only; its answer names a plugin that throws at load;
- every release logs a plugin that fails while loading (fleet/installer/openclawlog.py).
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, List, NamedTuple, Optional

# what `plugins.list` carries
NO_LISTING = "none"  # no such RPC
CATALOG = "catalog"  # installed plugins and their config state, nothing of the runtime
RUNTIME = "runtime"  # each plugin's runtime state and load error too


class Capabilities(NamedTuple):
    """What a gateway of OpenClaw `version` serves and how it reports a plugin's load error."""

    version: Optional[str]
    methods: Optional[FrozenSet[str]]  # None: not known (the CLI path has no hello-ok)
    listing: str  # NO_LISTING, CATALOG or RUNTIME

    def serves(self, method: str) -> Optional[bool]:
        """Whether the gateway serves `method`; None when it did not say what it serves."""
        return None if self.methods is None else method in self.methods

    @property
    def reload(self) -> bool:
        """It replaces plugins in process (`plugins.reload`), naming one that throws; also when
        it did not say what it serves (then the answer tells)."""
        return self.serves("plugins.reload") is not False

    @property
    def runtime_listing(self) -> bool:
        """Its `plugins.list` says whether each plugin runs, and why not: a plugin it lists as
        not active yet may still be loading. Without it, a plugin whose `<id>.ready` the
        gateway does not know once it is ready did not load."""
        return self.listing == RUNTIME

    def load_errors(self) -> List[str]:
        """Where this gateway names a plugin's load error, the most direct first."""
        where = ["the plugins.reload answer"] if self.reload else []
        if self.runtime_listing:
            where.append("plugins.list runtime.error")
        return where + ["the gateway's log"]

    def describe(self) -> Dict[str, Any]:
        return {"version": self.version, "plugins_list": self.listing,
                "plugins_reload": self.reload, "load_errors": self.load_errors()}


def listing_kind(listing: Optional[Dict[str, Any]]) -> str:
    """What a `plugins.list` answer carries (None: the gateway has no such RPC)."""
    if listing is None:
        return NO_LISTING
    entries = [p for p in listing.get("plugins") or [] if isinstance(p, dict)]
    return RUNTIME if any(isinstance(p.get("runtime"), dict) for p in entries) else CATALOG


def detect(hello: Dict[str, Any], listing: Optional[Dict[str, Any]]) -> Capabilities:
    """The record of the gateway that answered `hello` (its hello-ok, {} when there was none)
    and `listing` (its `plugins.list` answer, None when it has no such RPC)."""
    server = hello.get("server") if isinstance(hello.get("server"), dict) else {}
    features = hello.get("features") if isinstance(hello.get("features"), dict) else {}
    methods = features.get("methods")
    return Capabilities(
        version=str(server["version"]) if server.get("version") else None,
        methods=frozenset(str(m) for m in methods) if isinstance(methods, list) else None,
        listing=listing_kind(listing))
