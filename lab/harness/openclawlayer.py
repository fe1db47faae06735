"""The OpenClaw layer: a cached image layer with Node + OpenClaw over a harness host image.

Nothing is downloaded while building: Node and `openclaw` come from the project's own toolchain
cache (lab.openclaw.toolchain, filled by `invoke openclaw.install` from npm), and the scripted
model server (fleet/openclaw/model.py, stdlib only) is copied beside them. The layer's tag is the
hash of its inputs (base image, pinned versions, the model's and wrapper's bytes, this file's
Dockerfile), so it is built once per change. The login user runs OpenClaw; the model runs inside
each container on its own loopback, as a systemd user service of that user on systemd hosts.
"""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import tarfile
import tempfile
import time
from pathlib import Path

from fleet.deploy.inventory import Host
from fleet.installer.protocol import OPENCLAW
from lab.harness.image import ImageError, _image_exists
from lab.openclaw import toolchain as oc_toolchain
from lab.openclaw.sandbox import QUIET_ENV
from lab.openclaw.sandbox import base_config as sandbox_config

OPENCLAW_REPO = "fleet-harness-openclaw"
PREFIX = "/opt/openclaw"
MODEL_PORT = 18790  # the scripted model's port on each container's own loopback
GATEWAY_PORT = 18789  # OpenClaw's default
UNIT = "openclaw-gateway.service"  # what `openclaw gateway install` creates for the user
READY_TIMEOUT_S = 420.0  # a first start takes 30-120 s on a busy 2-core machine
# Deploys to an OpenClaw host wait longer for readiness than the harness default (30 s).
TIMEOUTS = {"ready": 300, "command": 600}
# Any HTTP(S) a process there still tries goes to a closed loopback port (Node honours the proxy
# variables with NODE_USE_ENV_PROXY); the container's DNS is 127.0.0.1 too (hosts.create_host).
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
LABEL lab.harness.image="1"
"""


def find_toolchain() -> oc_toolchain.Toolchain:
    """The installed toolchain, or an ImageError saying how to install it."""
    found = oc_toolchain.find()
    if found is None:
        raise ImageError("the OpenClaw toolchain is not installed in "
                         f"{oc_toolchain.install_dir()}: run `invoke openclaw.install` first")
    try:
        oc_toolchain.complete_lifecycle(found)  # the hosts' users could not write there
    except oc_toolchain.ToolchainError as exc:
        raise ImageError(str(exc)) from None
    return found


def layer_key(base_tag: str, tool: oc_toolchain.Toolchain) -> str:
    """Hash of what the layer is made of (the toolchain by its pinned versions, copied only once
    its package lifecycle is complete: layers copied before that could not start OpenClaw)."""
    digest = hashlib.sha256()
    for part in (base_tag, DOCKERFILE, WRAPPER, MODEL_UNIT, oc_toolchain.node_package(),
                 tool.node_version, tool.openclaw_version, "lifecycle complete"):
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
                                labels={"lab.harness.image": "1"}, timeout=1200)
        except docker.errors.BuildError as exc:
            lines = [str(e.get("stream") or e.get("error") or "") for e in exc.build_log]
            raise ImageError(f"building {tag} failed: {exc.msg}\n{''.join(lines)[-3000:]}"
                             ) from exc
    return tag


def _add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def gateway_options() -> dict[str, str]:
    """The inventory's `gateway.options` for an OpenClaw host of the harness: OpenClaw runs as
    the user's service, from this image's pinned Node, kept off the network (no mDNS, update
    checks or catalogs: lab.openclaw.sandbox.QUIET_ENV)."""

    opts = {"mode": "service", "node": f"{PREFIX}/bin/node",
            "openclaw": f"{PREFIX}/node_modules/openclaw/openclaw.mjs"}
    opts.update({f"env.{key}": value for key, value in QUIET_ENV.items()})
    return opts


def base_config(state_dir: str) -> dict:
    """The first openclaw.json of a harness OpenClaw host: the sandbox's (loopback, a token of
    its own, the scripted model as the agents' provider, no heartbeat or update checks)."""
    host = Host(name="harness", state_dir=state_dir, manager=OPENCLAW,
                manager_options={"port": str(GATEWAY_PORT), "model_port": str(MODEL_PORT)})
    return sandbox_config(host)


def setup_script(state_dir: str) -> str:
    """Shell for the login user: config, the model's service, OpenClaw's own service install.
    The quiet environment goes into the user manager's environment (inherited by the service)
    before the install: OpenClaw refuses to install over service files it did not write."""

    config = json.dumps(base_config(state_dir), indent=2) + "\n"
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in QUIET_ENV.items())
    state = shlex.quote(state_dir)
    return (
        f"set -e; mkdir -p {state}/workspace {state}/logs; "
        f"if [ ! -e {state}/openclaw.json ]; then umask 077; "
        f"printf %s {shlex.quote(config)} > {state}/openclaw.json; fi; "
        f"systemctl --user set-environment {env} OPENCLAW_STATE_DIR={state}; "
        "systemctl --user enable --now fleet-model.service; "
        f"{env} OPENCLAW_STATE_DIR={state} openclaw gateway install"
    )


def main_pid(harness, name: str) -> int:
    out = harness.ssh(name, f"systemctl --user show -p MainPID --value {UNIT}", timeout=30)
    return int(out.stdout.strip() or 0) if out.ok else 0


def wait_ready(harness, name: str, old_pid: int = 0, timeout: float = READY_TIMEOUT_S) -> int:
    """Wait until OpenClaw's service runs a main pid other than `old_pid` that logged
    `[gateway] ready`; return that pid."""
    deadline = time.monotonic() + timeout
    while True:
        pid = main_pid(harness, name)
        if pid not in (0, old_pid):
            log = harness.ssh(name, f"journalctl --user -u {UNIT} _PID={pid} --no-pager -o cat",
                              timeout=30)
            if "[gateway] ready" in log.stdout:
                return pid
        if time.monotonic() > deadline:
            tail = harness.ssh(name, f"journalctl --user -u {UNIT} -n 30 --no-pager", timeout=30)
            raise ImageError(f"{name}: OpenClaw's gateway was not ready within {timeout:.0f}s "
                             f"(main pid {pid}, previous {old_pid}):\n{tail.stdout}")
        time.sleep(2)


def prepare_host(harness, name: str) -> int:
    """Install OpenClaw's service on a started OpenClaw host and wait until its gateway is ready
    (what an operator did once on the real host before fleet deploys to it); its pid."""
    host = harness.hosts[name]
    result = harness.ssh(name, setup_script(host.state_dir), timeout=300)
    if not result.ok:
        raise ImageError(f"{name}: setting up OpenClaw failed ({result.code}):\n"
                         f"{(result.stdout + result.stderr)[-3000:]}")
    return wait_ready(harness, name)
