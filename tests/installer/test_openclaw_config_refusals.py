"""openclaw.json that a deploy must not, or cannot, rewrite, through the artifact's installer as
the control side runs it: a read-only file or directory, a file above the size bound, bytes
that are not UTF-8, something that is not a regular file. Each is refused before the release is
unpacked, naming the file and the fix, and the file is byte for byte what it was."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest
from deploy_helpers import fake_openclaw_cli, run_installer

CONFIG = {"gateway": {"port": 9, "auth": {"mode": "none"}}, "agents": {"list": []}}


@pytest.fixture
def host(tmp_path):
    """An OpenClaw host whose CLI says 2026.9.6 (a release the artifact was proven on) and
    whose config lives in its own directory, `etc/openclaw.json`."""
    cli = fake_openclaw_cli(tmp_path / "openclaw", "2026.9.6")
    state = tmp_path / "state"
    state.mkdir()
    etc = tmp_path / "etc"
    etc.mkdir()
    config = etc / "openclaw.json"
    config.write_text(json.dumps(CONFIG, indent=2) + "\n")
    yield cli, state, config
    etc.chmod(0o755)


def install(art, cli: Path, state: Path, config: Path) -> tuple[int, dict]:
    return run_installer(art.path, "install", "--state-dir", str(state), "--sha256", art.sha256,
                         "--manager", "openclaw", "--manager-opt", f"openclaw={cli}",
                         "--manager-opt", "port=9", "--manager-opt", f"config={config}")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def unchanged_host(state: Path) -> None:
    assert not (state / "fleet" / "releases").exists()
    assert not (state / "fleet" / "current").exists()


def test_a_read_only_openclaw_json_is_refused_naming_it_and_the_fix(host, artifacts):
    cli, state, config = host
    config.chmod(0o444)
    before = digest(config)
    code, out = install(artifacts(), cli, state, config)
    assert code != 0 and out["result"] == "refused", out
    assert f"{config} is read-only (mode 0444" in out["reason"]
    assert f"chmod u+w {config}" in out["reason"] and "nothing was changed" in out["reason"]
    assert digest(config) == before and (config.stat().st_mode & 0o777) == 0o444
    unchanged_host(state)


def test_a_read_only_directory_is_refused_naming_it_and_the_fix(host, artifacts):
    cli, state, config = host
    config.parent.chmod(0o555)
    before = digest(config)
    code, out = install(artifacts(), cli, state, config)
    assert code != 0 and out["result"] == "refused", out
    assert f"{config.parent} is read-only (mode 0555)" in out["reason"]
    assert f"chmod u+w {config.parent}" in out["reason"]
    assert digest(config) == before and sorted(config.parent.iterdir()) == [config]
    unchanged_host(state)


def test_a_config_above_the_bound_is_refused_at_once_unread(host, artifacts):
    cli, state, config = host
    with config.open("w") as fh:  # valid JSON, 5 MiB: above the 4 MiB bound
        fh.write('{"gateway": {"port": 9}, "blob": "' + "x" * (5 * 1024 * 1024) + '"}\n')
    before = digest(config)
    t0 = time.monotonic()
    code, out = install(artifacts(), cli, state, config)
    assert code != 0 and out["result"] == "refused", out
    assert f"{config}: 5,242,917 bytes, larger than 4 MiB;" in out["reason"]
    assert "at most 4 MiB (docs/openclaw.md)" in out["reason"]
    assert time.monotonic() - t0 < 60 and digest(config) == before
    unchanged_host(state)


def test_bytes_that_are_not_utf8_are_named_by_file_line_and_column(host, artifacts):
    cli, state, config = host
    config.write_bytes(b'{\n  "agents": {"name": "caf\xe9"},\n  "gateway": {"port": 9}\n}\n')
    before = digest(config)
    code, out = install(artifacts(), cli, state, config)
    assert code != 0 and out["result"] == "refused", out
    assert (f"{config}:2: not UTF-8 (byte 0xe9 at line 2, column 26, offset 27)"
            in out["reason"]), out["reason"]
    assert "UnicodeDecodeError" not in out["reason"] and "openclaw.json is UTF-8" in out["reason"]
    assert digest(config) == before
    unchanged_host(state)


def test_a_fifo_in_its_place_is_refused_without_waiting_on_it(host, artifacts):
    cli, state, config = host
    config.unlink()
    os.mkfifo(config)
    code, out = install(artifacts(), cli, state, config)
    assert code != 0 and out["result"] == "refused", out
    assert f"{config}: a FIFO, not a regular file" in out["reason"]
    assert config.is_fifo()
    unchanged_host(state)
