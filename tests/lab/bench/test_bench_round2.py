"""Pure parts of the round-2 benchmarks (failures, continuity at scale, real OpenClaw)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from lab.bench.run import parse_selection

REPO = Path(__file__).resolve().parents[3]


def test_round_two_benchmarks_are_selectable_by_name():
    assert parse_selection("ocgateway,hung,hookscale,failfast") == [
        "hookscale", "failfast", "hung", "ocgateway"]
    assert "ocgateway" not in parse_selection("all")  # needs the OpenClaw toolchain


def _base(tmp_path: Path):
    from fleet.deploy.api import load_artifact

    path = tmp_path / "fleet-1.0.0.pyz"
    files = {"fleet/plugins/memory_continuity/plugin.py":
             b'"""doc"""\n\nfrom __future__ import annotations\n\nX = 1\n'}
    manifest = {"version": "1.0.0", "components": {}, "files": {
        k: hashlib.sha256(v).hexdigest() for k, v in files.items()}}
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("fleet_manifest.json", json.dumps(manifest))
    return load_artifact(path)


def test_a_broken_release_variant_lists_its_edited_file_and_fails_at_import(tmp_path: Path):
    from lab.bench.artifacts import variant
    from lab.bench.failures import PLUGIN_ENTRY, break_plugin

    broken = variant(_base(tmp_path), "x", tmp_path / "out", {PLUGIN_ENTRY: break_plugin})
    with zipfile.ZipFile(broken.path) as zf:
        source = zf.read(PLUGIN_ENTRY)
        manifest = json.loads(zf.read("fleet_manifest.json"))
    assert manifest["files"][PLUGIN_ENTRY] == hashlib.sha256(source).hexdigest()
    code = compile(source, PLUGIN_ENTRY, "exec")  # `from __future__` still comes first
    with pytest.raises(RuntimeError, match="fails to load"):
        exec(code, {})


def test_the_hook_timing_edit_fits_the_shipped_bridge_and_refuses_another():
    from lab.bench.ocgateway import SHIPPED_BRIDGES, TIMINGS_ENV, timed_bridge

    timed = timed_bridge((REPO / SHIPPED_BRIDGES[0]).read_bytes()).decode()
    assert "appendFileSync" in timed and TIMINGS_ENV in timed
    assert timed.count("async hookUntimed(name, event, ctx)") == 1
    with pytest.raises(RuntimeError, match="no longer fits"):
        timed_bridge(b"export function definePlugin() {}\n")


def test_hook_samples_leave_out_each_hooks_first_call(tmp_path: Path):
    from lab.bench.ocgateway import hook_samples

    log = tmp_path / "a.jsonl"
    lines = [{"hook": "before_prompt_build", "plugin": "mc", "ms": 250.0},
             {"hook": "before_prompt_build", "plugin": "mc", "ms": 2.0},
             {"hook": "agent_end", "plugin": "mc", "ms": 9.0},
             {"hook": "before_prompt_build", "plugin": "mc", "ms": 4.0}]
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    samples = hook_samples([log, tmp_path / "missing.jsonl"])
    assert samples["mc:before_prompt_build"] == [0.002, 0.004]
    assert samples["mc:before_prompt_build (first, starts the worker)"] == [0.25]
    assert "mc:agent_end" not in samples


def test_the_benchmarks_openclaw_inventory_is_two_sandbox_hosts_with_the_timing_file(
        tmp_path: Path):
    from fleet.deploy.inventory import load
    from lab.bench.ocgateway import HOSTS, TIMINGS_ENV, inventory_text
    from lab.openclaw.sandbox import is_sandbox

    (tmp_path / "inventory.yaml").write_text(inventory_text(tmp_path / "t"))
    hosts = load(tmp_path / "inventory.yaml").select("bench")
    assert [h.name for h in hosts] == list(HOSTS)
    assert all(is_sandbox(h) for h in hosts)
    timings = hosts[0].manager_options[f"env.{TIMINGS_ENV}"]
    assert timings == str(tmp_path / "t" / f"{HOSTS[0]}.jsonl")
    assert hosts[0].manager_options["port"] != hosts[1].manager_options["port"]


def test_history_and_archives_come_out_at_the_asked_size(tmp_path: Path):
    from datetime import datetime, timezone

    from fleet.continuity.history import related_history
    from lab.bench.hookscale import write_archives, write_history

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "CURRENT_STATE.md").write_text("# state\n")
    today = datetime(2026, 6, 1, tzinfo=timezone.utc)
    written = write_history(ws, total_bytes=300_000, days=20, today=today)
    on_disk = sum(p.stat().st_size for p in (ws / "memory").rglob("*.md")
                  if p.name != "CURRENT_STATE.md")
    assert written == on_disk and abs(written - 300_000) < 15_000
    assert len(list((ws / "memory" / "sessions").glob("*.md"))) == 20
    assert related_history(ws, "Finish the deploy pipeline for the gateway fleet", 3)
    write_archives(ws, 50)
    assert len(list((ws / "memory" / "session_archive").glob("*.md"))) == 50


def test_busy_hook_benchmark_measures_health_while_its_hook_spins_and_stops_the_gateway(
        tmp_path: Path):
    from fleet.continuity.statelayout import StateLayout
    from lab.bench import busyhook

    idle, busy = busyhook.measure(tmp_path, "cpu", calls=3)
    assert len(idle) == 3 and len(busy) == 3
    state = tmp_path / "busyhook" / "cpu" / "state"
    assert (state / "spin-running").exists()  # the busy figures were taken while it spun
    assert not StateLayout(state).socket.exists()  # and the gateway was stopped after
