"""`verify`: every file read; every drift, bad version, gap or broken rule named."""

from __future__ import annotations

import json
import subprocess
import sys

import tomllib
from release_fixtures import MAIN, Repo, task_env

from fleet.release.component import load_project
from fleet.release.verify import verify

MC_PKG = "fleet/plugins/mc/package.json"
MC_MANIFEST = "fleet/plugins/mc/openclaw.plugin.json"
MCONT_MANIFEST = "fleet/plugins/memory_continuity/openclaw.plugin.json"


def run_verify(repo: Repo, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", "-r", str(MAIN), "verify", *args],
                          cwd=repo.path, capture_output=True, text=True, timeout=120,
                          env=task_env())


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
    assert any("not-a-version" in p and "PEP 440" in p and MC_PKG in p for p in data["problems"])
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
