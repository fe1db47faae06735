"""The hand-made deploy loop fleet replaces (README, first paragraph) as a faithful script.

Per host, one after another: `scp` the memory-continuity files, `scp` the mc files, `ssh` to restart
the gateway; then `ssh` to each host to grep the version. The only change from the hand-made loop is
the restart: its `pkill -f ...; sleep 2; nohup ... &` over ssh kills its own ssh shell (`pkill -f`
matches the shell's `-c` command line, see fleet/installer/manager.py), so here the restart is the
gateway's own `restart` (stop by pidfile, start, wait until ready), which is also what makes the
comparison fair: both contenders end with a verified gateway.

Each host gets its own manual install beside fleet's (`~/.openclaw-manual`, plugins as plain
directories, the gateway runtime pre-installed under `~/manual-runtime` as OpenClaw would be), so
the contenders never touch each other's files.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path

from fleet.deploy.inventory import Host

STATE = ".openclaw-manual"
RUNTIME = "manual-runtime"
CONFIG = {"agents": {"list": [{"id": "main", "default": True}]},
          "plugins": {"entries": {"memory-continuity": {"enabled": True, "config": {}},
                                  "mc": {"enabled": True, "config": {}}}}}


class ManualFailed(RuntimeError):
    pass


class ManualLoop:
    """scp/ssh with the OpenSSH client, strict host keys, the harness key; no connection reuse."""

    def __init__(self, key: Path, known_hosts: Path, timeout: float = 60.0):
        self.key = key
        self.known_hosts = known_hosts
        self.timeout = timeout

    def _opts(self) -> list[str]:
        return ["-i", str(self.key), "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR"]

    def _check(self, cmd: list[str], what: str) -> str:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout,
                              stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise ManualFailed(f"{what} exited {proc.returncode}: "
                               f"{(proc.stderr or proc.stdout).strip()[-300:]}")
        return proc.stdout

    def ssh(self, host: Host, command: str) -> str:
        return self._check(["ssh", *self._opts(), "-p", str(host.port),
                            f"{host.user}@{host.host}", command], f"ssh {host.name}")

    def scp(self, host: Host, files: list[Path], remote_dir: str) -> None:
        self._check(["scp", "-q", *self._opts(), "-P", str(host.port), *map(str, files),
                     f"{host.user}@{host.host}:{remote_dir}/"], f"scp {host.name}")

    # one-time: the host as a hand-managed host is before a deploy (gateway runtime installed)
    def setup(self, host: Host, artifact: Path, plugin_files: dict[str, list[Path]]) -> None:
        self.scp(host, [artifact], ".")
        config = shlex.quote(json.dumps(CONFIG))
        dirs = " ".join(f"~/{STATE}/extensions/{pid}" for pid in plugin_files)
        self.ssh(host, f"rm -rf ~/{RUNTIME} && mkdir -p ~/{RUNTIME} {dirs} && "
                       f"python3 -m zipfile -e ~/{artifact.name} ~/{RUNTIME} && "
                       f"rm -f ~/{artifact.name} && printf %s {config} > ~/{STATE}/openclaw.json")
        for pid, files in plugin_files.items():
            self.scp(host, files, f"{STATE}/extensions/{pid}")
        self.ssh(host, self.restart_command())

    @staticmethod
    def restart_command() -> str:
        return (f"cd / && PYTHONPATH=$HOME/{RUNTIME} python3 -m fleet.gateway "
                f"--state-dir $HOME/{STATE} restart --timeout 120")

    def deploy(self, hosts: list[Host], plugin_files: dict[str, list[Path]],
               version: str) -> float:
        """The loop (copy, copy, restart; then grep) for every host; seconds.

        Raises if a host shows another version.
        """
        t0 = time.perf_counter()
        for host in hosts:  # copy and restart: sequential, host after host
            for pid, files in plugin_files.items():
                self.scp(host, files, f"{STATE}/extensions/{pid}")
            self.ssh(host, self.restart_command())
        for host in hosts:  # then verify every host
            out = self.ssh(host, f"grep version ~/{STATE}/extensions/memory-continuity/"
                                 "package.json")
            if f'"{version}"' not in out:
                raise ManualFailed(f"{host.name}: version check printed {out.strip()!r}")
        return time.perf_counter() - t0
