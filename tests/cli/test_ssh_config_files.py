"""ssh_config files fleet cannot read as `ssh` would, through the `fleet` script: bytes that are
not UTF-8, a named `$FLEET_SSH_CONFIG` that is not a regular file, a file above the size bound
(an Include'd one too). Each is a usage error naming the file (and line), before any host is
touched, never a value garbled by replacement characters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fleetcli import FLEET

INVENTORY = "vars: {timeouts: {connect: 5}}\nhosts:\n  cloud: {host: h-cloud}\n"


def restart(cwd: Path, ssh_config: Path | str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-c", FLEET, "restart", "-H", "cloud", "--yes",
                           "--json"], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, FLEET_SSH_CONFIG=str(ssh_config)))
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["hosts"] == [] and not (cwd / ".fleet").exists()  # nothing was confirmed or run
    return proc.returncode, doc["error"]


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    return tmp_path


def test_bytes_that_are_not_utf8_are_an_error_naming_file_and_line(workdir):
    config = workdir / "ssh_config"
    config.write_bytes(b"# fleet hosts\nHost h-cloud\n  User op\xe9rateur\n  Port 1\n")
    code, error = restart(workdir, config)
    assert code == 2
    assert f"{config}:3: not UTF-8 (byte 0xe9 at line 3, column 10" in error, error
    assert "fix that line" in error and "\ufffd" not in error


def test_an_included_file_is_held_to_the_same_rules(workdir):
    extra = workdir / "conf.d"
    extra.mkdir()
    (extra / "a.conf").write_text("Host other\n  Port 2\n")
    (extra / "b.conf").write_bytes(b"Host h-cloud\n  HostName \xff.example\n")
    config = workdir / "ssh_config"
    config.write_text(f"Include {extra}/*.conf\n")
    code, error = restart(workdir, config)
    assert code == 2 and f"{extra / 'b.conf'}:2: not UTF-8 (byte 0xff" in error, error
    (extra / "b.conf").write_text("Host h-cloud\n  Port 1\n" + "# padding\n" * 120_000)
    code, error = restart(workdir, config)
    assert code == 2 and f"{extra / 'b.conf'}: 1,200,022 bytes, larger than 1 MiB" in error
    assert "split it with Include" in error


def test_a_file_above_the_bound_is_refused_without_reading_it_all(workdir):
    config = workdir / "ssh_config"
    with config.open("w") as fh:
        fh.write("Host h-cloud\n  Port 1\n")
        fh.write("Host filler\n  User x\n" * 2_500_000)  # ~50 MB
    t0 = time.monotonic()
    code, error = restart(workdir, config)
    assert code == 2 and f"{config}: " in error and "larger than 1 MiB" in error, error
    assert time.monotonic() - t0 < 60


@pytest.mark.parametrize("make, words", [
    (lambda p: p.mkdir(), "($FLEET_SSH_CONFIG): not a regular file"),
    (lambda p: os.mkfifo(p), "($FLEET_SSH_CONFIG): not a regular file"),
    (lambda p: None, "($FLEET_SSH_CONFIG): no such file"),
])
def test_a_named_config_that_is_not_a_regular_file_is_an_error(workdir, make, words):
    config = workdir / "ssh_config"
    make(config)
    code, error = restart(workdir, config)
    assert code == 2 and f"{config} {words}" in error, error
    assert "FLEET_SSH_CONFIG= (empty) to read none" in error
