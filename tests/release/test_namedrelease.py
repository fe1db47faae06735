"""`deploy --release NAME`: a kept build, else a clean build of the release's tag (or a git
ref), byte for byte what that release made; an unknown name lists what exists."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from deploy_helpers import stop_gateways
from release_fixtures import commit_file, make_repo, task_env

from fleet.release import namedrelease
from fleet.release.artifact import build_artifact
from fleet.release.error import ReleaseError

HOST_TREES = ("fleet/continuity", "fleet/plugins", "fleet/gateway", "fleet/installer")


@pytest.fixture
def released(tmp_path):
    """A checkout whose release `version` is tagged, then moved on by one commit; with the
    artifact that release built (outside the checkout)."""
    repo = make_repo(tmp_path, extra_trees=HOST_TREES)
    art = build_artifact(repo.path, tmp_path / "release-dist")
    repo.git("tag", "-a", f"v{art.version}", "-m", "release")  # the main tag format
    layout = repo.path / "fleet/gateway/layout.py"
    commit_file(repo.path, "fleet/gateway/layout.py", layout.read_text() + "# later work\n",
                "later work")
    return repo, art


def test_a_release_tag_builds_the_artifact_that_release_made(released, tmp_path):
    repo, art = released
    assert build_artifact(repo.path, tmp_path / "head").sha256 != art.sha256  # HEAD moved on
    for name in (art.version, f"v{art.version}"):
        found, where = namedrelease.resolve(repo.path, tmp_path / name, name)
        assert found.sha256 == art.sha256 and found.version == art.version, where
        assert "+dirty" not in found.version and "built from" in where
    assert repo.git("worktree", "list").count("\n") == 0  # the temporary worktree is gone


def test_a_kept_build_is_used_and_a_damaged_one_refused(released, tmp_path):
    repo, art = released
    kept = build_artifact(repo.path, repo.path / "dist")
    found, where = namedrelease.resolve(repo.path, tmp_path / "out", kept.version)
    assert found == kept.path and where.startswith("kept build")
    kept.path.write_bytes(kept.path.read_bytes() + b"x")
    with pytest.raises(ReleaseError, match="does not match .*sha256"):
        namedrelease.resolve(repo.path, tmp_path / "out", kept.version)


def test_an_unknown_name_lists_kept_builds_and_tags(released, tmp_path):
    repo, art = released
    with pytest.raises(ReleaseError) as info:
        namedrelease.resolve(repo.path, tmp_path / "out", "9.9.9")
    assert "no release '9.9.9'" in str(info.value)
    assert f"v{art.version}" in str(info.value)


def test_deploy_release_dry_run_plans_the_tagged_build_and_writes_nothing(released, tmp_path):
    repo, art = released
    (repo.path / "inventory.yaml").write_text(
        "hosts:\n  sb1: {connection: local, state_dir: .fleet/sandbox/sb1}\n"
        "groups:\n  sandbox: {hosts: [sb1]}\n")
    before = sorted(p.name for p in repo.path.iterdir())

    def deploy(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", "from fleet.cli.program import main; main()", "deploy",
             "-H", "sandbox", "--dry-run", "--json", *args], cwd=repo.path,
            capture_output=True, text=True, timeout=300, env=task_env())

    proc = deploy("--release", art.version)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["artifact"]["sha256"] == art.sha256 and doc["artifact"]["version"] == art.version
    assert sorted(p.name for p in repo.path.iterdir()) == before  # no dist/, no .fleet/
    proc = deploy("--release", "9.9.9")
    assert proc.returncode == 2 and "no release '9.9.9'" in json.loads(proc.stdout)["error"]


SANDBOX = """\
vars: {gateway: {manager: fleet}, timeouts: {ready: 30, command: 120}}
hosts:
  sb1: {connection: local, state_dir: .fleet/sandbox/sb1}
  sb2: {connection: local, state_dir: .fleet/sandbox/sb2}
groups:
  sandbox: {hosts: [sb1, sb2]}
"""


def fleet(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import sys; sys.argv[0] = 'fleet'; "
         "from fleet.cli.program import main; main()", *args], cwd=cwd, capture_output=True,
        text=True, timeout=300, env=task_env(), stdin=subprocess.DEVNULL)


def test_deploy_tag_dry_run_names_the_tags_build_and_refuses_a_second_artifact(released):
    repo, art = released
    (repo.path / "inventory.yaml").write_text(SANDBOX)
    before = sorted(p.name for p in repo.path.iterdir())
    proc = fleet(repo.path, "deploy", "--dry-run", "--json", "--tag", f"v{art.version}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["artifact"]["sha256"] == art.sha256 and doc["artifact"]["version"] == art.version
    assert f"--tag v{art.version}: built from refs/tags/v{art.version}" in proc.stderr
    assert f"plan {art.version} ({art.sha256[:12]})" in proc.stderr
    assert sorted(p.name for p in repo.path.iterdir()) == before  # no dist/, no .fleet/
    proc = fleet(repo.path, "deploy", "--dry-run", "--json", "--tag", art.version)  # no `v`
    error = json.loads(proc.stdout)["error"]
    assert proc.returncode == 2 and "no such tag" in error and f"v{art.version}" in error
    for other in (["--release", art.version], ["--artifact", str(art.path)]):
        proc = fleet(repo.path, "deploy", "--dry-run", "--json", "--tag", f"v{art.version}",
                     *other)
        error = json.loads(proc.stdout)["error"]
        assert proc.returncode == 2 and "--tag" in error and other[0] in error, error


def test_deploy_of_a_named_release_runs_exactly_that_build_on_the_sandbox(released):
    repo, art = released
    (repo.path / "inventory.yaml").write_text(SANDBOX)
    try:
        for how in (["--tag", f"v{art.version}"], ["--release", art.version]):
            proc = fleet(repo.path, "deploy", "--json", *how)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            proc = fleet(repo.path, "status", "--json")
            assert proc.returncode == 0, proc.stdout + proc.stderr
            hosts = json.loads(proc.stdout)["hosts"]
            assert sorted(h["host"] for h in hosts) == ["sb1", "sb2"]
            for h in hosts:
                assert h["to"]["sha256"] == art.sha256, h
                assert h["to"]["version"] == art.version and h["data"]["ready"], h
    finally:
        stop_gateways([repo.path / ".fleet/sandbox/sb1", repo.path / ".fleet/sandbox/sb2"])
