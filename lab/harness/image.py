"""The harness host image, built offline: debootstrap rootfs, cached tar, docker import, layer.

No registry can be pulled, so the base is a Debian rootfs made by `debootstrap` from the machine's
apt mirror. The tar is cached on disk keyed by the hash of its inputs, the imported image is tagged
with the same hash, and the small sshd/users layer is tagged with the hash of its own inputs, so
nothing is rebuilt unless an input changes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BASE_REPO = "fleet-harness-base"
HOST_REPO = "fleet-harness-host"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# The Debian releases a host can be built from, with the python3 each ships: bookworm for the
# cloud VM, bullseye for the Raspberry Pi of that generation (the oldest Python the host side
# supports, so 3.9 is exercised on a real host through the real deploy path).
SUITES = {"bookworm": "3.11", "bullseye": "3.9"}
DEFAULT_SUITE = "bookworm"
FILES_DIR = Path(__file__).with_name("files")
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEBOOTSTRAP_TIMEOUT_S = 1800
BUILD_LOCK_TIMEOUT_S = 2400

# The layer over the imported rootfs. Users log in as on the real hosts (opc on a cloud VM,
# administrator on a Raspberry Pi), never root; their shadow field is '*' (no password, but not
# locked: with UsePAM no a '!' would refuse keys).
USERS_RUN = """\
 && rm -f /etc/ssh/ssh_host_* \\
 && useradd -m -s /bin/bash -p '*' opc \\
 && useradd -m -s /bin/bash -p '*' administrator \\
 && for u in opc administrator; do \\
      install -d -m 0700 -o $u -g $u /home/$u/.ssh; \\
      install -d -m 0755 -o $u -g $u /home/$u/.openclaw; \\
    done"""

# init "tini": host-init (under docker's tini) keeps sshd in the foreground, no service manager.
DOCKERFILE = """\
FROM {base}
COPY sshd-harness.conf /etc/ssh/sshd_config.d/00-fleet-harness.conf
COPY host-init.sh /usr/local/sbin/host-init
RUN chmod 0755 /usr/local/sbin/host-init \\
 && chmod 0644 /etc/ssh/sshd_config.d/00-fleet-harness.conf \\
""" + USERS_RUN + """
LABEL lab.harness.image="1"
CMD ["/usr/local/sbin/host-init"]
"""

# init "systemd": systemd is PID 1; sshd is Debian's ssh.service, the run's keys come from a
# oneshot before it, users linger (their systemd --user starts at boot) and have the gateway's
# user unit, so the `systemd` gateway manager's `systemctl --user restart` acts for real.
SYSTEMD_DOCKERFILE = """\
FROM {base}
COPY sshd-harness.conf /etc/ssh/sshd_config.d/00-fleet-harness.conf
COPY sshd-systemd.conf /etc/ssh/sshd_config.d/01-fleet-systemd.conf
COPY fleet-harness-keys.sh /usr/local/sbin/fleet-harness-keys
COPY fleet-harness-keys.service /etc/systemd/system/fleet-harness-keys.service
COPY fleet-gateway.service /etc/systemd/user/fleet-gateway.service
RUN chmod 0755 /usr/local/sbin/fleet-harness-keys \\
 && chmod 0644 /etc/ssh/sshd_config.d/*.conf /etc/systemd/user/fleet-gateway.service \\
""" + USERS_RUN + """ \\
 && install -d /var/lib/systemd/linger && touch /var/lib/systemd/linger/opc \\
      /var/lib/systemd/linger/administrator \\
 && systemctl enable fleet-harness-keys.service ssh.service \\
 && systemctl mask getty.target console-getty.service systemd-udevd.service \\
      systemd-modules-load.service sys-kernel-config.mount sys-kernel-debug.mount
LABEL lab.harness.image="1"
STOPSIGNAL SIGRTMIN+3
CMD ["/sbin/init"]
"""
# libatomic1: the Node binary of the OpenClaw layer (which goes over this image) links it.
SYSTEMD_PACKAGES = ("systemd", "systemd-sysv", "dbus", "libpam-systemd", "libatomic1")
INITS = ("tini", "systemd")


def layer_files(init: str) -> list[Path]:
    """The files the layer of `init` copies (its own directory plus the shared sshd drop-in)."""
    return [FILES_DIR / "sshd-harness.conf", *sorted((FILES_DIR / init).iterdir())]


def flavor(suite: str, init: str = "tini") -> str:
    """The name an image is known by in a run: the suite, plus `+systemd` for systemd hosts."""
    return suite if init == "tini" else f"{suite}+{init}"


class ImageError(RuntimeError):
    """The host image could not be built; the message says which step and why."""


@dataclass(frozen=True)
class RootfsSpec:
    """Everything the debootstrap rootfs depends on; its hash names the cached tar and base tag."""

    suite: str = "bookworm"
    variant: str = "minbase"
    packages: tuple[str, ...] = ("openssh-server", "python3", "procps", "iproute2")
    mirror: str = DEFAULT_MIRROR
    arch: str = field(default_factory=lambda: _dpkg_arch())
    debootstrap_version: str = field(default_factory=lambda: _debootstrap_version())

    def key(self) -> str:
        """Short content hash of the inputs (stable across runs and machines with equal inputs)."""
        blob = json.dumps(
            {
                "suite": self.suite,
                "variant": self.variant,
                "packages": sorted(self.packages),
                "mirror": self.mirror,
                "arch": self.arch,
                "debootstrap": self.debootstrap_version,
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _dpkg_arch() -> str:
    try:
        out = subprocess.run(
            ["dpkg", "--print-architecture"], capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip() or "amd64"
    except (OSError, subprocess.SubprocessError):
        return "amd64"


def _debootstrap_version() -> str:
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "debootstrap"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def mirror_from_sources(paths: list[Path] | None = None, suite: str = "bookworm") -> str:
    """$FLEET_HARNESS_MIRROR, else the first apt mirror here that serves `suite` (so an Ubuntu
    machine's archive is never used for Debian), else deb.debian.org."""
    env = os.environ.get("FLEET_HARNESS_MIRROR")
    if env:
        return env.rstrip("/")
    if paths is None:
        paths = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in paths:
        try:
            text = path.read_text()
        except OSError:
            continue
        for uri, suites in _source_entries(text):
            if suite in suites and uri.startswith(("http://", "https://")):
                return uri.rstrip("/")
    return DEFAULT_MIRROR


def _source_entries(text: str) -> list[tuple[str, list[str]]]:
    """(uri, suites) from deb822 stanzas and one-line `deb` entries."""
    entries: list[tuple[str, list[str]]] = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, list[str]] = {}
        for line in stanza.splitlines():
            line = line.strip()
            if line.startswith("#"):
                continue
            if line.startswith("deb "):
                parts = [p for p in line.split() if not p.startswith("[")]
                if len(parts) >= 3:
                    entries.append((parts[1], [parts[2]]))
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.split()
        if "deb" in fields.get("types", ["deb"]):
            entries += [(uri, fields.get("suites", [])) for uri in fields.get("uris", [])]
    return entries


def default_cache_dir() -> Path:
    """$FLEET_HARNESS_CACHE, else ~/.cache/fleet/harness (XDG_CACHE_HOME honoured)."""
    env = os.environ.get("FLEET_HARNESS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fleet" / "harness"


@contextlib.contextmanager
def _file_lock(path: Path, timeout: float):
    """Exclusive lock so two test sessions never debootstrap the same rootfs at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ImageError(f"timed out after {timeout:.0f}s waiting for {path}") from None
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_rootfs(spec: RootfsSpec, cache_dir: Path, log=print) -> Path:
    """Return the cached rootfs tar for `spec`, running debootstrap only when it is missing."""
    tar_path = cache_dir / f"rootfs-{spec.key()}.tar"
    if tar_path.exists():
        return tar_path
    if os.geteuid() != 0:
        raise ImageError("debootstrap needs root to build the harness rootfs (run as root)")
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is not installed (apt-get install debootstrap)")
    if not Path(DEBIAN_KEYRING).is_file():
        raise ImageError(f"{DEBIAN_KEYRING} is missing, so debootstrap cannot verify Debian's "
                         "archive (apt-get install debian-archive-keyring)")
    with _file_lock(cache_dir / f"rootfs-{spec.key()}.lock", BUILD_LOCK_TIMEOUT_S):
        if tar_path.exists():
            return tar_path
        work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=cache_dir))
        try:
            root = work / "root"
            cmd = [
                "debootstrap",
                f"--variant={spec.variant}",
                f"--include={','.join(spec.packages)}",
                f"--arch={spec.arch}",
                spec.suite,
                str(root),
                spec.mirror,
            ]
            log(f"harness: debootstrap {spec.suite} from {spec.mirror} (cold build, minutes)")
            _run(cmd, DEBOOTSTRAP_TIMEOUT_S, "debootstrap")
            _trim_rootfs(root)
            partial = work / "rootfs.tar"
            _run(
                ["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."],
                600,
                "tar",
            )
            os.replace(partial, tar_path)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return tar_path


def _trim_rootfs(root: Path) -> None:
    """Drop caches and the build machine's host keys; each container makes its own."""
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
        target = root / sub
        if target.is_dir():
            for entry in target.iterdir():
                if entry.is_file() and entry.name != "lock":
                    entry.unlink()
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()


def _run(cmd: list[str], timeout: float, what: str) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ImageError(f"{what} did not finish within {timeout:.0f}s") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise ImageError(f"{what} failed (exit {proc.returncode}):\n{tail}")


def _dockerfile(init: str) -> str:
    return SYSTEMD_DOCKERFILE if init == "systemd" else DOCKERFILE


def layer_key(base_tag: str, init: str = "tini") -> str:
    """Hash of the layer's inputs: base tag, Dockerfile text and the files it copies."""
    digest = hashlib.sha256(base_tag.encode() + _dockerfile(init).encode())
    for path in layer_files(init):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _image_exists(client, tag: str) -> bool:
    import docker.errors  # noqa: PLC0415

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def import_base(client, tar_path: Path, key: str) -> str:
    """docker import the rootfs tar once; the tag carries the rootfs key."""
    tag = f"{BASE_REPO}:{key}"
    if _image_exists(client, tag):
        return tag
    if not tar_path.is_file():  # a missing path would be retried as a URL by docker-py
        raise ImageError(f"rootfs tar {tar_path} is missing")
    client.api.import_image_from_file(
        str(tar_path), repository=BASE_REPO, tag=key, changes=['CMD ["/bin/sh"]']
    )
    if not _image_exists(client, tag):
        raise ImageError(f"docker import of {tar_path} did not produce {tag}")
    return tag


def build_layer(client, base_tag: str, init: str = "tini") -> str:
    """Build the sshd/users layer over the base, offline (network none, no pull)."""
    import docker.errors  # noqa: PLC0415

    tag = f"{HOST_REPO}:{layer_key(base_tag, init)}"
    if _image_exists(client, tag):
        return tag
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        _add_bytes(tar, "Dockerfile", _dockerfile(init).format(base=base_tag).encode())
        for path in layer_files(init):
            _add_bytes(tar, path.name, path.read_bytes())
    context.seek(0)
    try:
        client.images.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            rm=True,
            forcerm=True,
            pull=False,
            network_mode="none",
            labels={"lab.harness.image": "1"},
            timeout=600,
        )
    except docker.errors.BuildError as exc:
        lines = [str(entry.get("stream") or entry.get("error") or "") for entry in exc.build_log]
        raise ImageError(f"building {tag} failed: {exc.msg}\n{''.join(lines)[-3000:]}") from exc
    return tag


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


@dataclass
class ImageBuild:
    """What ensure_image did, for timing reports."""

    tag: str
    rootfs: Path
    seconds: float
    built_rootfs: bool
    built_layer: bool


def ensure_image(client, cache_dir: Path | None = None, spec: RootfsSpec | None = None,
                 log=print, suite: str = DEFAULT_SUITE, init: str = "tini") -> ImageBuild:
    """Return the host image tag for Debian `suite` with `init` ("tini": sshd under docker's
    init; "systemd": systemd as PID 1), building only the parts whose inputs changed."""
    started = time.monotonic()
    cache_dir = cache_dir or default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    if suite not in SUITES:
        raise ImageError(f"unknown Debian suite {suite!r} for a harness host; "
                         f"one of {', '.join(SUITES)}")
    if init not in INITS:
        raise ImageError(f"unknown init {init!r} for a harness host; one of {', '.join(INITS)}")
    if spec is None:
        packages = RootfsSpec.packages + (SYSTEMD_PACKAGES if init == "systemd" else ())
        spec = RootfsSpec(suite=suite, packages=packages, mirror=mirror_from_sources(suite=suite))
    key = spec.key()
    base_tag = f"{BASE_REPO}:{key}"
    host_tag = f"{HOST_REPO}:{layer_key(base_tag, init)}"
    if _image_exists(client, host_tag):
        return ImageBuild(host_tag, cache_dir / f"rootfs-{key}.tar",
                          time.monotonic() - started, False, False)
    tar_existed = (cache_dir / f"rootfs-{key}.tar").exists()
    tar_path = build_rootfs(spec, cache_dir, log=log)
    import_base(client, tar_path, key)
    tag = build_layer(client, base_tag, init)
    return ImageBuild(tag, tar_path, time.monotonic() - started, not tar_existed, True)

