"""The toolchain install: once, atomic, reused, and clear when npm or the registry fails.

A fake `npm` on PATH stands in for the registry (a shell script that lays out what the real
install lays out, or fails the way npm fails), so these run without network in well under a second.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from lab.openclaw import toolchain

FAKE_NPM = r"""#!/bin/sh
# fake npm: `npm install --prefix DIR ... pkgs` -> DIR/node_modules/{node pkg,npm,openclaw}
echo "$@" >> "$FAKE_NPM_CALLS"
[ "$1" = "config" ] && { echo "https://registry.example.test/"; exit 0; }
[ -n "$FAKE_NPM_FAIL" ] && { echo "$FAKE_NPM_FAIL" >&2; exit 1; }
ARGS="$*"
prefix=""; while [ $# -gt 0 ]; do [ "$1" = "--prefix" ] && prefix="$2"; shift; done
m="$prefix/node_modules"; mkdir -p "$m/NODEPKG/bin" "$m/openclaw" "$m/npm/bin"
printf '' > "$m/npm/bin/npm-cli.js"
printf '{"version": "%s"}' "${FAKE_NODE_VERSION:-NODEVER}" > "$m/NODEPKG/package.json"
ocver=$(printf '%s\n' $ARGS | sed -n 's/^openclaw@//p')
printf '{"version": "%s"}' "$ocver" > "$m/openclaw/package.json"
printf 'console.log(1)' > "$m/openclaw/openclaw.mjs"
# as with the real --ignore-scripts install: OpenClaw's own install steps are still pending
echo pending > "$m/openclaw/.openclaw-lifecycle-pending"
cat > "$m/NODEPKG/bin/node" <<EOF
#!/bin/sh
# fake node: running openclaw.mjs finishes its package lifecycle (unless told it cannot);
# npm's `run preinstall` (in the package dir) removes the install guard
for a; do
  case "\$a" in *openclaw.mjs) [ -z "\$FAKE_LIFECYCLE_STUCK" ] &&
    rm -f "\$(dirname "\$a")/.openclaw-lifecycle-pending";; esac
  [ "\$a" = "preinstall" ] && [ -z "\$FAKE_LIFECYCLE_STUCK" ] && rm -f dist/openclaw-install-guard
done
echo v${FAKE_NODE_RUNS:-NODEVER}
EOF
chmod +x "$m/NODEPKG/bin/node"
[ -n "$FAKE_NPM_DIE_AFTER" ] && exit 1
exit 0
"""


@pytest.fixture
def fake_npm(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = (FAKE_NPM.replace("NODEPKG", toolchain.node_package())
              .replace("NODEVER", toolchain.NODE_VERSION))
    npm = bindir / "npm"
    npm.write_text(script)
    npm.chmod(npm.stat().st_mode | stat.S_IEXEC)
    calls = tmp_path / "npm-calls.txt"
    monkeypatch.setenv("FAKE_NPM_CALLS", str(calls))
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return calls


def _installs(calls: Path) -> list[str]:
    return [line for line in calls.read_text().splitlines() if line.startswith("install")] \
        if calls.exists() else []


def test_find_is_none_on_an_empty_cache(tmp_path):
    assert toolchain.find(tmp_path / "cache") is None


def test_install_once_then_reused(tmp_path, fake_npm):
    home = tmp_path / "cache"
    tool = toolchain.install(home)
    assert tool.node_version == toolchain.NODE_VERSION
    assert tool.openclaw_version == toolchain.OPENCLAW_VERSION
    assert tool.argv("--version") == [str(tool.node), str(tool.openclaw), "--version"]
    # npm where a Node distribution keeps it: OpenClaw >= 2026.4.29 runs only that one
    assert (tool.node.parent.parent / "lib" / "node_modules" / "npm" / "bin" /
            "npm-cli.js").is_file()
    assert tool.env({"PATH": "/usr/bin"})["PATH"].split(os.pathsep)[0] == str(tool.node.parent)
    assert toolchain.find(home) == tool
    assert toolchain.install(home) == tool
    assert len(_installs(fake_npm)) == 1, "the second install must reuse the first"
    assert "--ignore-scripts" in _installs(fake_npm)[0]
    assert oct(tool.root.stat().st_mode & 0o777) == "0o755"


def test_each_openclaw_release_gets_its_own_install_and_can_be_removed(tmp_path, fake_npm):
    home = tmp_path / "cache"
    tools = [toolchain.install(home, version=v) for v in toolchain.OPENCLAW_VERSIONS]
    assert [t.openclaw_version for t in tools] == list(toolchain.OPENCLAW_VERSIONS)
    assert len({t.root for t in tools}) == len(tools) > 1
    assert [toolchain.find(home, version=v) for v in toolchain.OPENCLAW_VERSIONS] == tools
    assert toolchain.find(home) == tools[0]  # the default: the newest
    other = toolchain.install(home, version="2026.6.35")  # any release, for the compat matrix
    toolchain.remove(other)
    assert toolchain.find(home, version="2026.6.35") is None and not other.root.exists()
    assert toolchain.find(home, version=toolchain.OPENCLAW_VERSION) == tools[0]
    with pytest.raises(toolchain.ToolchainError, match="not a release version"):
        toolchain.install(home, version="latest; rm -rf /")


def test_cache_home_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(toolchain.HOME_ENV, str(tmp_path / "elsewhere"))
    assert toolchain.install_dir().parent == tmp_path / "elsewhere"
    monkeypatch.delenv(toolchain.HOME_ENV)
    assert toolchain.install_dir().parent.parts[-2:] == (".fleet", "openclaw")


def test_a_failed_npm_leaves_nothing_that_find_takes(tmp_path, fake_npm, monkeypatch):
    home = tmp_path / "cache"
    monkeypatch.setenv("FAKE_NPM_DIE_AFTER", "1")  # files written, then npm fails
    with pytest.raises(toolchain.ToolchainError, match="npm install failed"):
        toolchain.install(home)
    assert toolchain.find(home) is None
    assert [p.name for p in home.iterdir() if p.name != ".install.lock"] == []
    monkeypatch.delenv("FAKE_NPM_DIE_AFTER")
    assert toolchain.install(home).openclaw_version == toolchain.OPENCLAW_VERSION


def test_a_half_install_in_place_is_not_taken_and_is_replaced(tmp_path, fake_npm):
    home = tmp_path / "cache"
    half = toolchain.install_dir(home) / "node_modules" / "openclaw"
    half.mkdir(parents=True)
    (half / "package.json").write_text(json.dumps({"version": toolchain.OPENCLAW_VERSION}))
    assert toolchain.find(home) is None  # no node, no entry script
    assert toolchain.install(home).node.is_file()


def test_unreachable_registry_is_named(tmp_path, fake_npm, monkeypatch):
    monkeypatch.setenv("FAKE_NPM_FAIL", "npm error code ENOTFOUND\nnpm error network request "
                                        "to https://registry.example.test/openclaw failed")
    with pytest.raises(toolchain.ToolchainError) as info:
        toolchain.install(tmp_path / "cache")
    assert "cannot reach the npm registry https://registry.example.test/" in str(info.value)
    assert "invoke openclaw.install" in str(info.value)


def test_missing_npm_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: no npm
    with pytest.raises(toolchain.ToolchainError, match="npm.*is not on PATH"):
        toolchain.install(tmp_path / "cache")


def test_a_node_too_old_is_refused(tmp_path, fake_npm, monkeypatch):
    monkeypatch.setenv("FAKE_NODE_RUNS", "20.20.2")
    with pytest.raises(toolchain.ToolchainError, match="older than OpenClaw needs"):
        toolchain.install(tmp_path / "cache")
    assert toolchain.find(tmp_path / "cache") is None


def test_install_finishes_openclaws_own_install_steps(tmp_path, fake_npm):
    tool = toolchain.install(tmp_path / "cache")
    assert not (tool.openclaw.parent / ".openclaw-lifecycle-pending").exists()
    assert not toolchain.lifecycle_pending(tool)


def test_an_install_guard_only_its_preinstall_removes_is_removed_by_that_step(tmp_path,
                                                                             fake_npm):
    """2026.8.1: `dist/openclaw-install-guard` stays after a first start; the package's own
    preinstall script, which --ignore-scripts skipped, removes it."""
    tool = toolchain.install(tmp_path / "cache")
    guard = tool.openclaw.parent / "dist" / "openclaw-install-guard"
    guard.parent.mkdir(exist_ok=True)
    guard.write_text("OpenClaw package preinstall has not completed.\n")
    again = toolchain.install(tmp_path / "cache")
    assert again == tool and not guard.exists() and not toolchain.lifecycle_pending(tool)


def test_an_install_left_pending_is_finished_without_npm(tmp_path, fake_npm):
    tool = toolchain.install(tmp_path / "cache")
    marker = tool.openclaw.parent / ".openclaw-lifecycle-pending"
    marker.write_text("pending\n")  # an install made before fleet finished the lifecycle
    again = toolchain.install(tmp_path / "cache")
    assert again == tool and not marker.exists()
    assert len(_installs(fake_npm)) == 1


def test_a_lifecycle_that_cannot_finish_is_a_clear_error(tmp_path, fake_npm, monkeypatch):
    monkeypatch.setenv("FAKE_LIFECYCLE_STUCK", "1")
    with pytest.raises(toolchain.ToolchainError, match="package lifecycle did not finish"):
        toolchain.install(tmp_path / "cache")
