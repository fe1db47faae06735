"""`verify`: every file read; every drift, bad version, gap or broken rule named."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import tomllib
from release_fixtures import MAIN, Repo

from fleet.release.component import load_project
from fleet.release.verify import verify

MC_PKG = "fleet/plugins/mc/package.json"
MC_MANIFEST = "fleet/plugins/mc/openclaw.plugin.json"
MCONT_MANIFEST = "fleet/plugins/memory_continuity/openclaw.plugin.json"


def run_verify(repo: Repo, *args: str, env=None) -> subprocess.CompletedProcess:
    # PYTHONSAFEPATH: the repo copy's partial `fleet/` in the cwd must not shadow the package
    env = dict(os.environ if env is None else env, PYTHONSAFEPATH="1")
    return subprocess.run([sys.executable, "-m", "invoke", "-r", str(MAIN), "verify", *args],
                          cwd=repo.path, capture_output=True, text=True, timeout=120, env=env)


def set_json(repo: Repo, rel: str, key: str, value) -> None:
    data = json.loads(repo.read(rel))
    data[key] = value
    repo.write(rel, json.dumps(data, indent=2) + "\n")


def test_declared_components_and_their_files_agree(repo):
    report = verify(load_project(repo.path))
    assert report.ok, report.problems
    by_comp = {}
    for row in report.rows:
        by_comp.setdefault(row.component, []).append(row.path)
    assert set(by_comp) == {"memory-continuity", "mc", "fleet"}
    assert all(len(paths) >= 2 for paths in by_comp.values())
    assert report.versions["mc"] == json.loads(repo.read(MC_PKG))["version"]
    assert report.versions["memory-continuity"] == json.loads(repo.read(MCONT_MANIFEST))["version"]
    pyproject = tomllib.loads(repo.read("pyproject.toml"))
    assert report.versions["fleet"] == pyproject["project"]["version"]


def test_cli_table_lists_every_file_and_exits_zero(repo):
    proc = run_verify(repo)
    assert proc.returncode == 0, proc.stderr
    for rel in ("pyproject.toml", "fleet/__init__.py"):
        assert rel in proc.stdout
    assert "memory-continuity" in proc.stdout and "mc" in proc.stdout


def test_disagreeing_files_name_the_file_and_both_values(repo):
    current = json.loads(repo.read(MC_PKG))["version"]
    set_json(repo, MC_PKG, "version", "9.9.9")
    proc = run_verify(repo)
    assert proc.returncode == 1
    out = proc.stdout.replace("\n", " ")
    assert "disagree" in out and MC_PKG in proc.stdout.replace("\n", "")
    assert "'9.9.9'" in out and f"'{current}'" in out


def test_json_output_reports_problems(repo):
    set_json(repo, MC_PKG, "version", "not-a-version")
    proc = run_verify(repo, "--json")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["ok"] is False
    # a package.json holds a version npm reads: semver's rules, not PEP 440's
    assert any("not-a-version" in p and "semver 2.0" in p and MC_PKG in p
               for p in data["problems"])
    assert data["versions"]["mc"] is None


def test_missing_file_and_missing_key(repo):
    (repo.path / MC_PKG).unlink()
    data = json.loads(repo.read(MCONT_MANIFEST))
    del data["version"]
    repo.write(MCONT_MANIFEST, json.dumps(data))
    problems = verify(load_project(repo.path)).problems
    assert any(MC_PKG in p and "missing" in p for p in problems)
    assert any(MCONT_MANIFEST in p and "`version` is missing" in p for p in problems)


def test_python_and_toml_version_drift(repo):
    text = repo.read("fleet/__init__.py")
    repo.write("fleet/__init__.py", text.replace("__version__ = \"", "__version__ = \"7"))
    problems = verify(load_project(repo.path)).problems
    assert any(p.startswith("fleet: version files disagree") and "fleet/__init__.py" in p
               and "pyproject.toml" in p for p in problems)


def test_dependency_on_an_unmatched_version(repo):
    set_json(repo, MC_MANIFEST, "requires", ["memory-continuity>=99"])
    problems = verify(load_project(repo.path)).problems
    assert any("memory-continuity>=99" in p and MC_MANIFEST in p for p in problems)


def test_dependency_on_an_unknown_component(repo):
    set_json(repo, MC_MANIFEST, "requires", ["memory-continuity", "no-such-plugin"])
    problems = verify(load_project(repo.path)).problems
    assert len(problems) == 1 and "'no-such-plugin'" in problems[0]


def test_dependency_rule_checked_against_planned_versions(repo):
    set_json(repo, MC_MANIFEST, "requires", ["memory-continuity<6"])
    project = load_project(repo.path)
    assert verify(project).ok
    assert not verify(project, {"memory-continuity": "6.0.0"}).ok


def test_bad_config_names_the_table_and_fix(repo):
    text = repo.read("pyproject.toml")
    repo.write("pyproject.toml", text.replace('files = ["pyproject.toml:project.version"',
                                              'files = ["pyproject.toml"'))
    proc = run_verify(repo)
    assert proc.returncode == 1
    assert "[tool.fleet.components.fleet]" in proc.stderr and "<file>:<key>" in proc.stderr


MC_ENTRY = "fleet/plugins/mc/index.js"


def test_verify_imports_each_openclaw_entry_under_node(repo, node):
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(node).parent),
                                                 os.environ.get("PATH", "")]))
    proc = run_verify(repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout.replace("\n", " ")
    assert "OpenClaw entries imported with node" in out
    assert MC_ENTRY in out and "fleet/plugins/memory_continuity/index.js" in out


def test_verify_fails_naming_an_entry_with_a_syntax_error(repo, node):
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(node).parent),
                                                 os.environ.get("PATH", "")]))
    repo.write(MC_ENTRY, repo.read(MC_ENTRY).replace("commands: [", "commands: [[", 1))
    proc = run_verify(repo, "--json", env=env)
    assert proc.returncode == 1
    problems = json.loads(proc.stdout)["problems"]
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{MC_ENTRY}: does not load under Node ")
    assert "SyntaxError" in problems[0] and f"(at {MC_ENTRY}:" in problems[0]


def test_a_syntax_error_in_the_bridge_is_named_for_both_entries(repo, node):
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(node).parent),
                                                 os.environ.get("PATH", "")]))
    bridge = "fleet/plugins/bridge.mjs"
    repo.write(bridge, repo.read(bridge) + "\nexport const broken = ;\n")
    proc = run_verify(repo, "--json", env=env)
    assert proc.returncode == 1
    problems = json.loads(proc.stdout)["problems"]
    assert sorted(p.split(":")[0] for p in problems) == [
        MC_ENTRY, "fleet/plugins/memory_continuity/index.js"]
    # each plugin's own bridge.mjs (a link to the one source) is where node finds the error
    assert sorted(p.rsplit("(at ", 1)[1].split(":")[0] for p in problems) == [
        "fleet/plugins/mc/bridge.mjs", "fleet/plugins/memory_continuity/bridge.mjs"], problems


def test_verify_without_node_24_skips_the_import_with_a_note(repo, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "node"
    fake.write_text("#!/bin/sh\necho v20.11.1\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"]),
               FLEET_OPENCLAW_HOME=str(tmp_path / "no-toolchain"))
    repo.write(MC_ENTRY, "this is not javascript (\n")  # not imported: no usable node
    proc = run_verify(repo, "--json", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notes = json.loads(proc.stdout)["notes"]
    assert notes[0] == (f"OpenClaw entries not imported: {fake} is Node 20.11.1, older than 24 "
                        "(in the checkout: `invoke openclaw.install`)")
    assert notes[1].startswith("OpenClaw proof: stale since")  # the entry changed since


def test_a_missing_entry_is_a_problem_with_or_without_node(repo, tmp_path):
    (repo.path / MC_ENTRY).unlink()
    env = dict(os.environ, PATH=os.pathsep.join(["/usr/bin", "/bin"]),
               FLEET_OPENCLAW_HOME=str(tmp_path / "no-toolchain"))
    proc = run_verify(repo, "--json", env=env)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["problems"] == [
        f"mc: {MC_ENTRY}: entry named by openclaw.extensions is missing"]


# A contributor's version file: Rich markup, an OSC window title, a clear screen, a bidi override
HOSTILE_VERSION = "[link=http://evil.example]x[/link]\x1b]0;pwned\x07\x1b[2J\u202e"
SHOWN_VERSION = r"[link=http://evil.example]x[/link]\x1b]0;pwned\x07\x1b[2J\u202e"
RAW = ("\x1b", "\x07", "\u202e")  # what must not reach the terminal but as Rich's own colours


def test_a_hostile_version_file_is_shown_escaped_never_as_markup_and_exact_in_json(repo):
    set_json(repo, MC_PKG, "version", HOSTILE_VERSION)
    wide = {**os.environ, "COLUMNS": "5000"}  # no cell folds, so each text is one line
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        wide.pop(name, None)
    proc = run_verify(repo, env=wide)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    for char in RAW:
        assert char not in proc.stdout + proc.stderr, repr(proc.stdout)
    assert any(MC_PKG in line and SHOWN_VERSION in line for line in proc.stdout.splitlines())
    assert any(line.startswith("problem: ") and SHOWN_VERSION in line
               for line in proc.stdout.splitlines()), proc.stdout

    # as on a terminal: Rich's colours come out, a hyperlink (OSC 8) or the title never does
    proc = run_verify(repo, env={**wide, "FORCE_COLOR": "1", "TTY_COMPATIBLE": "1",
                                 "TERM": "xterm-256color"})
    plain = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)
    assert "\x1b[" in proc.stdout and not any(char in plain for char in RAW), repr(plain)
    assert SHOWN_VERSION in plain

    proc = run_verify(repo, "--json", env=wide)
    assert not any(char in proc.stdout for char in RAW)  # JSON-escaped
    files = json.loads(proc.stdout)["files"]
    assert HOSTILE_VERSION in [f["version"] for f in files if f["path"] == MC_PKG]
