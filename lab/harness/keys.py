"""The run's SSH client key: ed25519, generated per run, never baked into the image.

Each harness run makes its own keypair and hands only the public half to the containers (through
their environment at creation), so an image or a leaked container never opens another run's hosts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fleet.continuity.atomicfile import atomic_write


@dataclass(frozen=True)
class ClientKey:
    """A private key file on disk and its OpenSSH public line."""

    path: Path
    public: str


def generate_key(
    directory: Path, name: str = "id_ed25519", comment: str = "fleet-harness"
) -> ClientKey:
    """Write a fresh ed25519 keypair (private 0600, OpenSSH format) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()
    public = f"{public} {comment}"
    path = directory / name
    atomic_write(path, private, 0o600)
    path.with_name(path.name + ".pub").write_text(public + "\n")
    return ClientKey(path=path, public=public)


def load_key(path: Path) -> ClientKey:
    """Reload a key written by generate_key (e.g. by `harness.status` after `harness.up`)."""
    public = path.with_name(path.name + ".pub").read_text().strip()
    return ClientKey(path=path, public=public)
