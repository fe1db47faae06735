"""The run's SSH client key: ed25519, generated per run, never baked into the image.

Each harness run makes its own keypair and hands only the public half to the containers (through
their environment at creation), so an image or a leaked container never opens another run's hosts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


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
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(private)
    os.replace(tmp, path)
    path.with_name(path.name + ".pub").write_text(public + "\n")
    return ClientKey(path=path, public=public)


def load_key(path: Path) -> ClientKey:
    """Reload a key written by generate_key (e.g. by `harness.status` after `harness.up`)."""
    public = path.with_name(path.name + ".pub").read_text().strip()
    return ClientKey(path=path, public=public)
