"""The benchmark-only tools (the rivals, matplotlib): the `bench` extra, in a venv of its own.

ansible-core, pyinfra, matplotlib and asyncssh are never needed by fleet or its tests; they are the
optional `bench` extra of pyproject.toml. `invoke bench` installs that extra on first use into
`.fleet/bench-venv`, apart from the environment that runs fleet, because the rivals' own
dependencies would change what is measured: pyinfra 3 pins paramiko < 5 (fleet's control side
runs on paramiko 5) and brings gevent. The rivals run as programs from that venv; the plots are
drawn by its Python when the running one has no matplotlib.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

VENV = Path(".fleet") / "bench-venv"
# The `bench` extra of pyproject.toml (kept equal by tests/bench/test_bench_pure.py).
BENCH_EXTRA = ("ansible-core>=2.17", "pyinfra>=3,<4", "matplotlib>=3.7",
               "asyncssh>=2.14,<3")


class ToolUnavailable(RuntimeError):
    """A benchmark-only tool could not be found or installed; the message says how to fix it."""


def venv_dir(venv: Path | None = None) -> Path:
    return (venv or VENV).absolute()


def ensure_venv(venv: Path | None = None, log=print) -> Path:
    """The bench venv's bin dir, creating it and installing the `bench` extra if needed."""
    root = venv_dir(venv)
    bin_dir = root / "bin"
    marker = root / ".bench-extra"
    if marker.exists() and marker.read_text() == "\n".join(BENCH_EXTRA):
        return bin_dir
    log(f"bench: installing the bench extra ({', '.join(BENCH_EXTRA)}) into {root} "
        "(benchmark only)")
    try:
        if not (bin_dir / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
        subprocess.run([str(bin_dir / "pip"), "install", "-q", *BENCH_EXTRA], check=True,
                       timeout=1800)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolUnavailable(f"cannot install the bench extra into {root}: {exc}; "
                              f"try `{bin_dir / 'pip'} install {' '.join(BENCH_EXTRA)}`") from exc
    marker.write_text("\n".join(BENCH_EXTRA))
    return bin_dir


def executable(name: str, venv: Path | None = None, log=print) -> Path:
    """A rival's program (`ansible-playbook`, `pyinfra`) from the bench venv."""
    exe = ensure_venv(venv, log) / name
    if not os.access(exe, os.X_OK):
        raise ToolUnavailable(f"{exe} is missing: reinstall with `{exe.parent / 'pip'} install "
                              f"{' '.join(BENCH_EXTRA)}`")
    return exe


def python(venv: Path | None = None, log=print) -> Path:
    """The bench venv's interpreter (it has matplotlib)."""
    return ensure_venv(venv, log) / "python"
