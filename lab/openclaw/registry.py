"""A real npm registry on 127.0.0.1 for the tests: Verdaccio, from the npm registry, on the
toolchain's Node.

`install()` puts Verdaccio VERDACCIO_VERSION into the toolchain cache once (`invoke
openclaw.install` does it; beside the OpenClaw installs, the same lock). `Registry` runs one
on a free loopback port with its own temp config and storage and no uplinks (it never reaches
out: a package it does not hold is a 404), anyone may publish and read (a test registry), and
stops it again; every wait has a timeout. Its log (`log`) has a line per request it served.
`npmrc()` is the user config a client needs to publish to it (npm insists on a token for a
publish; this registry takes any).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from fleet.continuity import detached
from lab.openclaw import toolchain

VERDACCIO_VERSION = "6.8.0"  # 6.10 wants a newer Node than the one npm ships for 26.x tests
START_TIMEOUT_S = 120.0
STOP_GRACE_S = 5.0
CONFIG = """\
storage: {storage}
auth:
  htpasswd:
    file: {home}/htpasswd
    max_users: -1
uplinks: {{}}
packages:
  '**':
    access: $all
    publish: $all
    unpublish: $all
web:
  enable: false
log: {{type: stdout, format: pretty, level: http}}
"""


class RegistryError(RuntimeError):
    """The registry cannot be installed or started; the message says why and what to do."""


def install_dir(home: Path | None = None) -> Path:
    return (home or toolchain.cache_home()) / f"verdaccio-{VERDACCIO_VERSION}"


def entry(home: Path | None = None) -> Path | None:
    """Verdaccio's start script when it is installed, else None."""
    script = install_dir(home) / "node_modules" / "verdaccio" / "bin" / "verdaccio"
    return script if script.is_file() else None


def install(home: Path | None = None, npm: str = "npm", log=None) -> Path:
    """Install Verdaccio unless it is there; its start script."""
    found = entry(home)
    if found is not None:
        return found
    npm_path = shutil.which(npm)
    if npm_path is None:
        raise RegistryError(f"`{npm}` is not on PATH: install Node.js's npm (Debian: `apt-get "
                            "install npm`), then run `invoke openclaw.install` again")
    target = install_dir(home)
    target.parent.mkdir(parents=True, exist_ok=True)
    with toolchain.locked(target.parent):  # the OpenClaw installs' lock: one npm at a time
        return entry(home) or _install(npm_path, target, log)


def _install(npm_path: str, target: Path, log) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix=f".partial-{target.name}-", dir=target.parent))
    try:
        tmp.chmod(0o755)
        (log or (lambda _line: None))(f"npm install verdaccio@{VERDACCIO_VERSION} into {target}")
        proc = subprocess.run([npm_path, "install", "--prefix", str(tmp), "--no-audit",
                               "--no-fund", "--omit=dev", f"verdaccio@{VERDACCIO_VERSION}"],
                              capture_output=True, text=True, timeout=toolchain.INSTALL_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise RegistryError(f"npm could not install verdaccio@{VERDACCIO_VERSION} (exit "
                                f"{proc.returncode}):\n{(proc.stderr or proc.stdout)[-2000:]}")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return entry(target.parent)


class Registry:
    """One Verdaccio on 127.0.0.1:<port>, its config and storage under `work`; a context
    manager that stops it."""

    def __init__(self, work: Path, node: Path, port: int) -> None:
        script = entry()
        if script is None:
            raise RegistryError(f"Verdaccio {VERDACCIO_VERSION} is not installed in "
                                f"{install_dir()}: run `invoke openclaw.install`")
        self.work, self.port = Path(work), port
        self.url = f"http://127.0.0.1:{port}/"
        self.work.mkdir(parents=True, exist_ok=True)
        config = self.work / "config.yaml"
        config.write_text(CONFIG.format(storage=self.work / "storage", home=self.work))
        self.log = self.work / "registry.log"
        self.child = detached.Child([str(node), str(script), "--config", str(config),
                                     "--listen", f"127.0.0.1:{port}"], self.log,
                                    cwd=str(self.work))
        try:
            self._wait()
        except BaseException:
            self.stop()
            raise

    def _wait(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(self.url + "-/ping", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            code = self.child.exit_code()
            if code is not None or time.monotonic() > deadline:
                why = f"exited with code {code}" if code is not None else \
                    f"did not answer within {START_TIMEOUT_S:.0f}s"
                raise RegistryError(f"Verdaccio on {self.url} {why}{self.child.log_tail()}")
            time.sleep(0.3)

    def npmrc(self) -> Path:
        """A user npmrc with this registry and a token for it (npm publishes only with one)."""
        path = self.work / "npmrc"
        path.write_text(f"registry={self.url}\n//127.0.0.1:{self.port}/:_authToken=fleet-test\n")
        return path

    def stop(self) -> None:
        if self.child.exit_code() is None:
            self.child.stop(STOP_GRACE_S, group=True)

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
