"""A stand-in gateway for installer tests (stdlib): loads plugins, answers `health` on the socket.

Used through the installer's `command` manager so the installer's own logic (locks, faults,
switch, rollback) is tested without depending on the real gateway's start-up time.
Usage: python3 fakegw.py restart|stop|serve STATE_DIR
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def load_plugins(state: Path) -> dict:
    plugins = {}
    ext = state / "extensions"
    for link in sorted(ext.iterdir()) if ext.is_dir() else []:
        manifest = json.loads((link / "openclaw.plugin.json").read_text())
        pkg = json.loads((link / "package.json").read_text())
        real = Path(os.path.realpath(link))  # <release>/fleet/plugins/<pkg>
        stem = Path(pkg.get("fleet", {}).get("entry", "__init__.py")).stem
        module = f"fleet.plugins.{real.name}" + ("" if stem == "__init__" else f".{stem}")
        info = {"version": manifest["version"], "loaded": True, "error": None}
        sys.path.insert(0, str(real.parent.parent.parent))
        try:
            importlib.import_module(module)
        except Exception as exc:
            info.update(loaded=False, error=f"{type(exc).__name__}: {exc}")
        plugins[manifest["id"]] = info
    return plugins


def serve(state: Path) -> None:
    run = state / "run"
    run.mkdir(parents=True, exist_ok=True)
    plugins = load_plugins(state)
    release = os.path.basename(os.path.realpath(state / "fleet" / "current"))
    started = time.time()
    sock_path = run / "gateway.sock"
    if sock_path.exists():
        sock_path.unlink()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(sock_path))
    srv.listen(8)
    (run / "gateway.pid").write_text(str(os.getpid()))
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    while True:
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(2)
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
            req = json.loads(data or b"{}")
            if req.get("op") == "health":
                result = {"pid": os.getpid(), "started_at": started,
                          "uptime_s": time.time() - started,
                          "versions": {k: v["version"] for k, v in plugins.items() if v["loaded"]},
                          "plugins": plugins, "release": release}
                conn.sendall((json.dumps({"ok": True, "result": result}) + "\n").encode())
            else:
                conn.sendall(b'{"ok": false, "error": "unknown op"}\n')


def stop(state: Path) -> None:
    pidfile = state / "run" / "gateway.pid"
    try:
        pid = int(pidfile.read_text())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    pidfile.unlink(missing_ok=True)


def start(state: Path) -> None:
    (state / "logs").mkdir(parents=True, exist_ok=True)
    with open(state / "logs" / "gateway.log", "ab") as log:
        subprocess.Popen([sys.executable, __file__, "serve", str(state)], stdin=subprocess.DEVNULL,
                         stdout=log, stderr=log, start_new_session=True)
    deadline = time.time() + 10
    while time.time() < deadline:
        if (state / "run" / "gateway.pid").exists():
            return
        time.sleep(0.02)
    sys.exit("fake gateway did not start")


if __name__ == "__main__":
    cmd, state_dir = sys.argv[1], Path(sys.argv[2])
    if cmd == "serve":
        serve(state_dir)
    elif cmd == "stop":
        stop(state_dir)
    else:
        stop(state_dir)
        (state_dir / "run" / "gateway.pid").unlink(missing_ok=True)
        start(state_dir)
