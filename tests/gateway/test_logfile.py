"""The gateway log is rotated by size: whole lines, a few generations, fds follow the new file."""

from __future__ import annotations

import logging
import os

from gateway_helpers import RECORDER, run_cli, write_plugin

from fleet.gateway import logfile


def lines_of(paths):
    out = []
    for path in paths:
        if path.exists():
            out += path.read_text().splitlines(keepends=True)
    return out


def test_rotation_keeps_every_line_whole_and_drops_only_the_oldest(tmp_path):
    path = tmp_path / "gateway.log"
    stray_fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # stands for stderr
    handler = logfile.RotatingLog(path, max_bytes=200, backups=3, fds=(stray_fd,))
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.Logger("t")
    logger.addHandler(handler)
    try:
        for i in range(40):
            logger.info("line %02d %s", i, "x" * 30)
        os.write(stray_fd, b"a print after the last rotation\n")
    finally:
        handler.close()
        os.close(stray_fd)
    generations = [path.with_name(f"gateway.log.{n}") for n in (3, 2, 1)] + [path]
    assert not path.with_name("gateway.log.4").exists()
    assert all(p.stat().st_size <= 200 for p in generations[:-1])  # + the print in the last
    lines = lines_of(generations)
    assert all(line.endswith("\n") for line in lines)
    assert lines[-1] == "a print after the last rotation\n"
    numbers = [int(line.split()[1]) for line in lines[:-1]]
    assert numbers == list(range(numbers[0], 40))  # consecutive: nothing lost or split
    assert numbers[0] > 0  # the oldest generation was dropped


def test_limits_come_from_the_environment_with_safe_fallbacks():
    assert logfile.limits({}) == (logfile.MAX_BYTES, logfile.BACKUPS)
    assert logfile.limits({"FLEET_GATEWAY_LOG_MAX_BYTES": "4096",
                           "FLEET_GATEWAY_LOG_BACKUPS": "2"}) == (4096, 2)
    assert logfile.limits({"FLEET_GATEWAY_LOG_MAX_BYTES": "lots",
                           "FLEET_GATEWAY_LOG_BACKUPS": "-1"}) == (logfile.MAX_BYTES,
                                                                   logfile.BACKUPS)


def test_a_detached_gateway_rotates_its_own_log(tmp_path, state, gateways, monkeypatch):
    monkeypatch.setenv("FLEET_GATEWAY_LOG_MAX_BYTES", "400")
    monkeypatch.setenv("FLEET_GATEWAY_LOG_BACKUPS", "2")
    src = tmp_path / "plugins"
    write_plugin(src, "recorder", RECORDER, version="2.0.0")
    assert run_cli(state, "init", "--link-plugins-from", str(src)).returncode == 0
    res = run_cli(state, "start")
    assert res.returncode == 0, res.stderr
    gateways.append(state)
    for _ in range(3):
        assert run_cli(state, "restart").returncode == 0
    assert run_cli(state, "stop").returncode == 0
    log = state / "logs" / "gateway.log"
    rotated = [log.with_name(f"gateway.log.{n}") for n in (2, 1)]
    assert all(p.exists() for p in rotated) and not log.with_name("gateway.log.3").exists()
    lines = lines_of(rotated + [log])
    assert all(line.endswith("\n") and line[:4].isdigit() for line in lines), lines
    assert any("stopped" in line or "shutting down" in line or "signal" in line
               for line in log.read_text().splitlines()), log.read_text()
