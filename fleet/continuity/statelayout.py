"""Every path fleet uses inside an OpenClaw state dir, and the name of a release: one owner.

The gateway, the installer, the continuity code, the plugins and the control side's shell lines
all name these files, and a host works only while they agree (the no-op redeploy reads the
gateway's `ready.json` and pidfile in shell; the installer stops the gateway by the pidfile the
gateway holds). So they are named once, here, as docs/architecture.md's "Host state directory
layout" lists them. This module lives in `fleet.continuity`, the host package every other host
package (and the plugins) may import; it imports only `fleet.continuity.paths`.

Two forms: the class constants are POSIX paths relative to the state dir (for shell lines the
control side builds for a host whose state dir it only knows as a string, e.g. `"$S/" +
StateLayout.PIDFILE`); a `StateLayout(state_dir)` gives the absolute `Path`s of one state dir.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union

from fleet.continuity import paths

SHA_CHARS = 12  # of the artifact's SHA-256 in a release name


def release_name(version: str, sha256: str) -> str:
    """`<version>-<sha12>`: a release dir's name, what `ready.json` and every report call it."""
    return f"{version}-{sha256[:SHA_CHARS]}"


class StateLayout:
    """The paths of one state dir (made absolute once, so a later chdir changes nothing)."""

    CONFIG = paths.CONFIG_NAME  # unless $OPENCLAW_CONFIG_PATH names another (`config_path`)
    EXTENSIONS = "extensions"  # <id> -> EXTENSION_TARGET (fleet-gateway hosts)
    AGENTS = "agents"  # agents/<agentId>/sessions/<sessionId>.jsonl
    REQUESTERS = "memory-continuity/requesters.json"  # child session key -> requester
    SELFTEST = "selftest"  # <plugin>-<pid>-<random>/: a plugin self-test's scratch, removed after
    RUN = "run"
    SOCKET = "run/gateway.sock"  # the gateway's control socket (JSON lines)
    PIDFILE = "run/gateway.pid"  # flock-held by the running gateway
    READY = "run/ready.json"  # written once by a ready gateway
    LOGS = "logs"
    GATEWAY_LOG = "logs/gateway.log"
    OPENCLAW_LOG = "logs/fleet-openclaw-gateway.log"  # a supervised `openclaw gateway run`
    FLEET = "fleet"
    RELEASES = "fleet/releases"  # <release_name()>/ = an unpacked artifact + RELEASE_META
    CURRENT = "fleet/current"  # -> releases/<name> (switched atomically)
    PREVIOUS = "fleet/previous"
    ARTIFACTS = "fleet/artifacts"
    ARTIFACT = ARTIFACTS + "/{sha256}.pyz"  # an uploaded artifact: `.format(sha256=...)`
    AUDIT = "fleet/audit.jsonl"
    LOCK = "fleet/deploy.lock"  # the installer's lock
    LEASE = "fleet/run.lease"  # the fleet-wide lease of a changing run
    FAULTS = "fleet/faults"  # test seam: <step> files
    MANUAL_EXTENSIONS = "fleet/manual-extensions"  # a manual install's plugin dirs, moved aside
    OPENCLAW_PIDFILE = "fleet/openclaw-gateway.pid"
    OPENCLAW_VALIDATED = "fleet/openclaw-validated.json"  # cached `config validate` verdicts
    RELEASE_META = "fleet_release.json"  # inside a release dir: what the release holds
    MANIFEST = "fleet_manifest.json"  # an artifact's root, so a release dir's: what it ships
    RELEASE_INSTALLER = "fleet/installer/cli.py"  # inside a release dir: its installer
    RELEASE_PLUGINS = "fleet/plugins"  # inside a release dir: <pkg>/ of each plugin
    # inside a release dir: the OpenClaw releases it was proven on (fleet.continuity.openclawrange)
    RELEASE_PROOF = RELEASE_PLUGINS + "/openclaw-proven.json"

    def __init__(self, state_dir: Union[str, Path]) -> None:
        self.state_dir = Path(os.path.abspath(str(state_dir)))

    def __repr__(self) -> str:
        return f"StateLayout({str(self.state_dir)!r})"

    def _at(self, rel: str) -> Path:
        return self.state_dir / rel

    # OpenClaw's own files
    @property
    def config_path(self) -> Path:
        """`openclaw.json`, or what `$OPENCLAW_CONFIG_PATH` names (as OpenClaw resolves it)."""
        return Path(paths.resolve_config_path(None, self.state_dir))

    @property
    def extensions(self) -> Path:
        return self._at(self.EXTENSIONS)

    @staticmethod
    def extension_target(package: str) -> str:
        """What `extensions/<id>` points at: relative, through `current`, so one switch of
        `current` moves every plugin at once."""
        return os.path.join("..", StateLayout.CURRENT, StateLayout.RELEASE_PLUGINS, package)

    @property
    def agents_dir(self) -> Path:
        return self._at(self.AGENTS)

    def sessions_dir(self, agent_id: str) -> Path:
        return self.agents_dir / paths.validate_agent_id(agent_id) / "sessions"

    def transcript(self, agent_id: str, session_id: str) -> Path:
        return self.sessions_dir(agent_id) / f"{session_id}.jsonl"

    def session_index(self, agent_id: str) -> Path:
        return self.sessions_dir(agent_id) / "sessions.json"

    @property
    def requesters(self) -> Path:
        return self._at(self.REQUESTERS)

    @property
    def selftest_dir(self) -> Path:
        """Where plugin self-tests make their scratch dirs (fleet/gateway/selftest.py)."""
        return self._at(self.SELFTEST)

    # the gateway's run files and logs
    @property
    def run_dir(self) -> Path:
        return self._at(self.RUN)

    @property
    def socket(self) -> Path:
        return self._at(self.SOCKET)

    @property
    def pidfile(self) -> Path:
        return self._at(self.PIDFILE)

    @property
    def ready_file(self) -> Path:
        """`ready.json`: written once by a ready gateway, removed when it stops."""
        return self._at(self.READY)

    @property
    def log_dir(self) -> Path:
        return self._at(self.LOGS)

    @property
    def log(self) -> Path:
        """The gateway's log (rotated by size into `.1` .. `.3`)."""
        return self._at(self.GATEWAY_LOG)

    @property
    def openclaw_log(self) -> Path:
        return self._at(self.OPENCLAW_LOG)

    # the installer's files
    @property
    def fleet_dir(self) -> Path:
        return self._at(self.FLEET)

    @property
    def releases_dir(self) -> Path:
        return self._at(self.RELEASES)

    def release_dir(self, version: str, sha256: str) -> Path:
        return self.releases_dir / release_name(version, sha256)

    @property
    def current(self) -> Path:
        return self._at(self.CURRENT)

    @property
    def previous(self) -> Path:
        return self._at(self.PREVIOUS)

    @property
    def artifacts_dir(self) -> Path:
        return self._at(self.ARTIFACTS)

    def artifact(self, sha256: str) -> Path:
        return self._at(self.ARTIFACT.format(sha256=sha256))

    @property
    def audit(self) -> Path:
        return self._at(self.AUDIT)

    @property
    def lock(self) -> Path:
        return self._at(self.LOCK)

    @property
    def lease(self) -> Path:
        return self._at(self.LEASE)

    @property
    def faults_dir(self) -> Path:
        return self._at(self.FAULTS)

    @property
    def manual_extensions(self) -> Path:
        return self._at(self.MANUAL_EXTENSIONS)

    @property
    def openclaw_pidfile(self) -> Path:
        return self._at(self.OPENCLAW_PIDFILE)

    @property
    def openclaw_validated(self) -> Path:
        return self._at(self.OPENCLAW_VALIDATED)
