"""The OpenClaw layer: a cached image layer with Node + OpenClaw over a harness host image.

Nothing is downloaded while building: Node and `openclaw` come from the project's own toolchain
cache (fleet.openclaw.toolchain, filled by `invoke openclaw.install` from npm), and the scripted
model server (fleet/openclaw/model.py, stdlib only) is copied beside them. The layer's tag is the
hash of its inputs (base image, pinned versions, the model's and wrapper's bytes, this file's
Dockerfile), so it is built once per change. The login user runs OpenClaw; the model runs inside
each container on its own loopback, as a systemd user service of that user on systemd hosts.
"""

from __future__ import annotations

import hashlib
import tarfile
import tempfile
from pathlib import Path

from fleet.harness.image import ImageError, _image_exists
from fleet.openclaw import toolchain as oc_toolchain

OPENCLAW_REPO = "fleet-harness-openclaw"
PREFIX = "/opt/openclaw"
MODEL_PORT = 18790  # the scripted model's port on each container's own loopback
MODEL_SOURCE = Path(oc_toolchain.__file__).with_name("model.py")

WRAPPER = f"""#!/bin/sh
# openclaw on the pinned Node of this image ({PREFIX}); OpenClaw spawns node, so it is on PATH.
PATH={PREFIX}/bin:$PATH
export PATH
exec {PREFIX}/bin/node {PREFIX}/node_modules/openclaw/openclaw.mjs "$@"
"""

MODEL_UNIT = f"""\
# The scripted model for this user's OpenClaw, on the container's loopback only.
[Unit]
Description=fleet scripted model (OpenAI-compatible, 127.0.0.1:{MODEL_PORT})

[Service]
ExecStart=/usr/bin/python3 {PREFIX}/model.py --port {MODEL_PORT} --log %h/model-requests.jsonl
Restart=on-failure

[Install]
WantedBy=default.target
"""

DOCKERFILE = f"""\
FROM {{base}}
COPY node_modules {PREFIX}/node_modules
COPY model.py {PREFIX}/model.py
COPY openclaw.sh /usr/local/bin/openclaw
COPY fleet-model.service /etc/systemd/user/fleet-model.service
RUN install -d {PREFIX}/bin \\
 && ln -s {PREFIX}/node_modules/{{node_package}}/bin/node {PREFIX}/bin/node \\
 && chmod 0755 /usr/local/bin/openclaw {PREFIX}/model.py \\
 && chmod 0644 /etc/systemd/user/fleet-model.service \\
 && {PREFIX}/bin/node --version
LABEL fleet.harness.image="1"
"""


def find_toolchain() -> oc_toolchain.Toolchain:
    """The installed toolchain, or an ImageError saying how to install it."""
    found = oc_toolchain.find()
    if found is None:
        raise ImageError("the OpenClaw toolchain is not installed in "
                         f"{oc_toolchain.install_dir()}: run `invoke openclaw.install` first")
    return found


def layer_key(base_tag: str, tool: oc_toolchain.Toolchain) -> str:
    """Hash of what the layer is made of (the toolchain by its pinned versions)."""
    digest = hashlib.sha256()
    for part in (base_tag, DOCKERFILE, WRAPPER, MODEL_UNIT, oc_toolchain.node_package(),
                 tool.node_version, tool.openclaw_version):
        digest.update(part.encode() + b"\0")
    digest.update(MODEL_SOURCE.read_bytes())
    return digest.hexdigest()[:16]


def ensure_layer(client, base_tag: str, cache_dir: Path, log=print) -> str:
    """Return the OpenClaw image tag over `base_tag`, building it if its inputs changed."""
    import docker.errors  # noqa: PLC0415

    tool = find_toolchain()
    tag = f"{OPENCLAW_REPO}:{layer_key(base_tag, tool)}"
    if _image_exists(client, tag):
        return tag
    log(f"harness: building the OpenClaw layer {tag} (Node {tool.node_version}, "
        f"openclaw {tool.openclaw_version})")
    dockerfile = DOCKERFILE.format(base=base_tag, node_package=oc_toolchain.node_package())
    cache_dir.mkdir(parents=True, exist_ok=True)
    # The context (~0.9 GB of node_modules) goes through a temporary tar on disk, not memory.
    with tempfile.TemporaryFile(dir=cache_dir) as context:
        with tarfile.open(fileobj=context, mode="w") as tar:
            for name, text in (("Dockerfile", dockerfile), ("openclaw.sh", WRAPPER),
                               ("fleet-model.service", MODEL_UNIT)):
                _add_text(tar, name, text)
            tar.add(str(MODEL_SOURCE), arcname="model.py")
            tar.add(str(tool.root / "node_modules"), arcname="node_modules")
        context.seek(0)
        try:
            client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True,
                                forcerm=True, pull=False, network_mode="none",
                                labels={"fleet.harness.image": "1"}, timeout=1200)
        except docker.errors.BuildError as exc:
            lines = [str(e.get("stream") or e.get("error") or "") for e in exc.build_log]
            raise ImageError(f"building {tag} failed: {exc.msg}\n{''.join(lines)[-3000:]}"
                             ) from exc
    return tag


def _add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    import io  # noqa: PLC0415

    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))
