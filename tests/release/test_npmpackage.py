"""`invoke build --npm` and every release: each plugin as an OpenClaw npm package, byte for byte
reproducible, whole on its own, its versions checked by `invoke verify`."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from release_fixtures import MAIN, PACKAGE_TREES, make_repo, task_env

from fleet.release.cut import run_release
from fleet.release.npmpackage import NPM_MTIME

HARNESS = MAIN / "tests" / "plugins" / "openclaw_api.mjs"
TREES = (*PACKAGE_TREES, "fleet/installer")  # `invoke build` makes the artifact too
PLUGINS = {"memory-continuity": "fleet/plugins/memory_continuity",
           "mc": "fleet/plugins/mc"}


@pytest.fixture
def project(tmp_path):
    root = make_repo(tmp_path, extra_trees=TREES).path
    # clutter that must never reach a package
    (root / "fleet/plugins/mc/__pycache__").mkdir(exist_ok=True)
    (root / "fleet/plugins/mc/__pycache__/plugin.cpython-311.pyc").write_bytes(b"\0junk")
    (root / "fleet/gateway/test_scratch.py").write_text("assert False\n")
    return root


def task(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "invoke", "-r", str(MAIN), *args], cwd=root,
                          capture_output=True, text=True, timeout=300, env=task_env())
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def build(root: Path, out: Path) -> dict:
    """`invoke build --npm --json`: {component: package entry of its JSON document}."""
    doc = json.loads(task(root, "build", "--npm", "--json", "--out", str(out)).stdout)
    return {p["component"]: p for p in doc["packages"]}


def members(path: Path) -> dict:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: (m, tar.extractfile(m).read()) for m in tar.getmembers()}


def source(root: Path, rel: str) -> dict:
    return json.loads((root / rel).read_text())


def test_build_npm_writes_one_package_per_plugin_the_same_bytes_every_time(project, tmp_path):
    first = build(project, tmp_path / "one")
    for path in project.rglob("*"):  # new mtimes and modes must not reach the bytes
        if path.is_file() and not path.is_symlink():
            os.utime(path, (1_900_000_000, 1_900_000_000))
    (project / "fleet/continuity/store.py").chmod(0o600)
    second = build(project, tmp_path / "two")
    assert set(first) == set(PLUGINS)
    for comp, pkg in first.items():
        own = source(project, f"{PLUGINS[comp]}/package.json")
        path = Path(pkg["path"])
        assert path.name == f"{own['name']}-{own['version']}.tgz"
        assert (pkg["name"], pkg["version"]) == (own["name"], own["version"])
        data = path.read_bytes()
        assert data == Path(second[comp]["path"]).read_bytes()
        assert pkg["sha256"] == hashlib.sha256(data).hexdigest() == second[comp]["sha256"]
        assert data[:2] == b"\x1f\x8b" and data[4:8] == b"\0\0\0\0"  # gzip, mtime 0


def test_a_package_is_laid_out_as_npm_pack_makes_it(project, tmp_path):
    packages = build(project, tmp_path / "dist")
    for comp, plugin in PLUGINS.items():
        found = members(Path(packages[comp]["path"]))
        for info, _ in found.values():
            assert info.name.startswith("package/") and info.isfile()
            assert (info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname) == \
                (NPM_MTIME, 0o644, 0, 0, "", "")
        names = {name.removeprefix("package/") for name in found}
        pkg = json.loads(found["package/package.json"][1])
        own = source(project, f"{plugin}/package.json")
        # the plugin's own package.json: its openclaw block kept, the entry moved into the tree
        assert pkg["openclaw"]["compat"] == own["openclaw"]["compat"]
        assert pkg["openclaw"]["build"] == own["openclaw"]["build"]
        assert pkg["openclaw"]["install"]["minHostVersion"] == \
            ">=" + own["openclaw"]["compat"]["minGatewayVersion"]
        assert pkg["openclaw"]["extensions"] == [f"./{plugin}/index.js"] == [pkg["main"]]
        assert found["package/openclaw.plugin.json"][1] == \
            (project / plugin / "openclaw.plugin.json").read_bytes()
        # the entry, the bridge (the link's target, as a file) and the Python core
        assert found[f"package/{plugin}/bridge.mjs"][1] == \
            (project / "fleet/plugins/bridge.mjs").read_bytes()
        for rel in ("index.js", "plugin.py", "package.json", "openclaw.plugin.json"):
            assert f"{plugin}/{rel}" in names
        assert {"fleet/__init__.py", "fleet/gateway/worker.py", "fleet/continuity/store.py",
                "fleet/plugins/__init__.py", "fleet/plugins/openclaw-proven.json",
                "README.md"} <= names
        other = next(p for c, p in PLUGINS.items() if c != comp)
        # of another plugin only the manifest of one it requires (what it reads of it)
        required = source(project, f"{plugin}/openclaw.plugin.json").get("requires", [])
        assert [n for n in names if n.startswith((other + "/", "fleet/installer/"))] == \
            ([f"{other}/openclaw.plugin.json"] if required else [])
        assert not [n for n in names if "__pycache__" in n or "/test_" in n]
        assert "Python >= 3.9" in found["package/README.md"][1].decode()


def test_an_unpacked_package_answers_ready_on_its_own(project, tmp_path, node):
    """The tarball alone, unpacked where OpenClaw puts an install (nothing of fleet beside it):
    its entry, loaded from a capture copy as OpenClaw loads it, starts the worker from the
    package and answers `<id>.ready` with the package's version; `/mc settings` answers."""
    packages = build(project, tmp_path / "dist")
    for comp, plugin in PLUGINS.items():
        ext = tmp_path / "extensions" / comp
        with tarfile.open(packages[comp]["path"], "r:gz") as tar:
            for info, data in ((m, tar.extractfile(m).read()) for m in tar.getmembers()):
                dst = ext / info.name.removeprefix("package/")
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(data)
        state = tmp_path / f"state-{comp}"
        (state / "workspace").mkdir(parents=True)
        spec = {"entry": str(ext / plugin / "index.js"), "rootDir": str(ext), "capture": True,
                "config": {"agents": {"list": [{"id": "main", "default": True}]}},
                "pluginConfig": {"python": sys.executable},
                "steps": [{"method": f"{comp}.ready", "params": {}}]}
        if comp == "mc":  # /mc settings reads memory-continuity's schema: it must be there too
            spec["steps"].append({"command": "mc", "args": "settings"})
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLEET_PYTHON")}
        env.update(OPENCLAW_STATE_DIR=str(state), HOME=str(tmp_path))
        proc = subprocess.run([node, str(HARNESS)], input=json.dumps(spec), capture_output=True,
                              text=True, timeout=120, env=env, cwd=str(tmp_path))
        assert proc.returncode == 0, proc.stderr
        step = json.loads(proc.stdout.splitlines()[1])
        assert step["ok"] is True, step
        assert step["payload"]["version"] == packages[comp]["version"]
        assert Path(step["payload"]["pluginDir"]).resolve() == (ext / plugin).resolve()
        if comp == "mc":
            text = json.loads(proc.stdout.splitlines()[2])["result"]["text"]
            assert "MC Settings" in text and "MC error" not in text, text


def test_verify_reads_the_versions_inside_built_packages(project, tmp_path):
    packages = build(project, project / "dist")
    doc = json.loads(task(project, "verify", "--json").stdout)
    rows = {(f["path"], f["key"]): f for f in doc["files"] if f["path"].startswith("dist/")}
    for pkg in packages.values():
        shown = f"dist/{Path(pkg['path']).name}"
        for key in ("package/package.json:version", "package/openclaw.plugin.json:version"):
            assert rows[(shown, key)]["version"] == pkg["version"]
            assert rows[(shown, key)]["problem"] is None
    # a package whose name and content disagree (renamed, or a stale build) is drift
    mc = Path(packages["mc"]["path"])
    wrong = mc.with_name(mc.name.replace(packages["mc"]["version"], "9.9.9"))
    mc.rename(wrong)
    proc = task(project, "verify", "--json", check=False)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and not doc["ok"]
    assert any(f"dist/{wrong.name}" in p and "9.9.9" in p and packages["mc"]["version"] in p
               for p in doc["problems"]), doc["problems"]
    wrong.write_bytes(b"not a tarball")
    doc = json.loads(task(project, "verify", "--json", check=False).stdout)
    assert any(wrong.name in p and "invoke build --npm" in p for p in doc["problems"])


def test_a_release_builds_the_packages_of_its_versions(tmp_path):
    repo = make_repo(tmp_path, extra_trees=TREES)
    out = io.StringIO()
    dry = run_release(repo.path, component="mc", dry_run=True, echo=lambda s: out.write(s))
    assert f"dist/mc-plugin-{dry.version}.tgz" in out.getvalue()
    assert not (repo.path / "dist").exists()
    result = run_release(repo.path, component="mc", echo=lambda _s: None)
    by_comp = {p.component: p for p in result.packages}
    assert by_comp["mc"].path == repo.path / "dist" / f"mc-plugin-{result.version}.tgz"
    inside = json.loads(members(by_comp["mc"].path)["package/package.json"][1])
    assert inside["version"] == result.version == source(
        repo.path, "fleet/plugins/mc/package.json")["version"]
    assert by_comp["memory-continuity"].version == source(
        repo.path, "fleet/plugins/memory_continuity/package.json")["version"]
    # built from the release commit: a build of the tag is the same bytes
    again = json.loads(task(repo.path, "build", "--npm", "--json", "--out",
                            str(tmp_path / "again")).stdout)["packages"]
    assert {p["sha256"] for p in again} == {p.sha256 for p in result.packages}


class _Recorder(BaseHTTPRequestHandler):
    """A loopback HTTP server that records each request's method and answers 404: whatever a
    dry run asks, it must send nothing (no PUT)."""

    seen: list = []

    def _any(self) -> None:
        type(self).seen.append(self.command)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_PUT = do_POST = do_HEAD = _any

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture
def npm() -> str:
    found = shutil.which("npm")
    if found is None:
        if os.environ.get("FLEET_REQUIRE_OPENCLAW"):
            pytest.fail("FLEET_REQUIRE_OPENCLAW is set but npm is not on PATH")
        pytest.skip("npm is not on PATH (set FLEET_REQUIRE_OPENCLAW=1 to make this an error)")
    return found


def test_release_publish_is_a_dry_run_unless_yes(tmp_path, npm):
    repo = make_repo(tmp_path, extra_trees=TREES)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    (tmp_path / "npmrc").write_text("")
    env = dict(task_env(), NPM_CONFIG_USERCONFIG=str(tmp_path / "npmrc"),
               npm_config_update_notifier="false", npm_config_fetch_retries="0")
    try:
        usage = subprocess.run([sys.executable, "-m", "invoke", "-r", str(MAIN), "release",
                                "-c", "mc", "--yes"], cwd=repo.path, capture_output=True,
                               text=True, timeout=120, env=env)
        assert usage.returncode == 2 and "--publish" in usage.stdout + usage.stderr
        proc = subprocess.run([sys.executable, "-m", "invoke", "-r", str(MAIN), "release",
                               "-c", "mc", "--publish", "--registry", url], cwd=repo.path,
                              capture_output=True, text=True, timeout=600, env=env)
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    version = source(repo.path, "fleet/plugins/mc/package.json")["version"]
    assert f"npm publish {repo.path}/dist/mc-plugin-{version}.tgz --registry {url} --dry-run" \
        in proc.stdout
    publishes = [line for line in proc.stdout.splitlines() if line.startswith("npm publish")]
    assert len(publishes) == 1 and publishes[0].endswith("--dry-run")  # only mc was released
    assert "dry run: nothing was published" in proc.stdout
    assert "PUT" not in _Recorder.seen


class _Registry(BaseHTTPRequestHandler):
    """A loopback npm registry as far as `npm publish` goes: a PUT of a version it has not got
    is kept (201), one it has is refused (403), as every npm registry does."""

    published: list = []

    def do_PUT(self) -> None:  # noqa: N802 (http.server's naming)
        doc = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        fresh = [(doc["name"], v) for v in doc.get("versions", {})
                 if (doc["name"], v) not in type(self).published]
        type(self).published.extend(fresh)
        self._answer(201 if fresh else 403, {"ok": True} if fresh else {
            "error": "You cannot publish over the previously published versions"})

    def do_GET(self) -> None:  # noqa: N802
        self._answer(404, {"error": "not found"})

    def _answer(self, code: int, doc: dict) -> None:
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args) -> None:
        pass


def test_each_release_publishes_the_packages_of_what_it_released_to_npms_registry(tmp_path, npm):
    """Two releases of one plugin in a row, for real, to the registry the user's .npmrc names:
    each publishes that plugin's new version and nothing else (the other plugin's unchanged
    version would be refused by the registry and stop the publish)."""
    repo = make_repo(tmp_path, extra_trees=TREES)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    (tmp_path / "npmrc").write_text(
        f"registry={url}\n//127.0.0.1:{server.server_address[1]}/:_authToken=test-token\n")
    env = dict(task_env(), NPM_CONFIG_USERCONFIG=str(tmp_path / "npmrc"),
               npm_config_update_notifier="false", npm_config_fetch_retries="0")
    _Registry.published = []
    seen = []
    try:
        for _ in range(2):
            proc = subprocess.run([sys.executable, "-m", "invoke", "-r", str(MAIN), "release",
                                   "-c", "mc", "--publish", "--yes"], cwd=repo.path,
                                  capture_output=True, text=True, timeout=600, env=env)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            version = source(repo.path, "fleet/plugins/mc/package.json")["version"]
            seen.append(("mc-plugin", version))
            assert f"published mc-plugin-{version}.tgz to {url}" in proc.stdout
    finally:
        server.shutdown()
    assert _Registry.published == seen and seen[0] != seen[1]


def test_a_pre_release_is_published_under_the_next_dist_tag_a_release_under_latest():
    from fleet.release.npmpublish import publish_argv  # noqa: PLC0415

    url = "http://127.0.0.1:4873/"
    pre = publish_argv(Path("mc-plugin-2.2.0-rc.1.tgz"), "2.2.0-rc.1", url, dry_run=False)
    assert pre[pre.index("--tag") + 1] == "next"
    assert "--tag" not in publish_argv(Path("mc-plugin-2.2.0.tgz"), "2.2.0", url, dry_run=False)
