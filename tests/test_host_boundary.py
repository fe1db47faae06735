"""The host side stays what the artifact promises: standard library only, Python 3.9 grammar.

The artifact carries only the host-side packages and runs on whatever `python3` (>= 3.9) a host
has, with no pip. An import of a third-party or control-side module there works on the control
machine and breaks only on a host, so this test reads every host-side module's source (nothing
is imported or run) and names each offending import.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from imports import imports, module_name

from fleet.release.hostside import HOST_FILES
from fleet.release.hostside import HOST_PACKAGES as HOST_DIRS

ROOT = Path(__file__).resolve().parents[1]

# Exactly what the artifact ships, as module names.
HOST_PACKAGES = tuple(d.replace("/", ".") for d in HOST_DIRS)

# Standard library modules that a Python 3.9 host does not have.
NEWER_THAN_39 = {"tomllib"}


def host_modules() -> list[Path]:
    files = [ROOT / f for f in HOST_FILES]
    for package in HOST_DIRS:
        files += sorted((ROOT / package).rglob("*.py"))
    return files


def imported_names(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import in the file, relative ones resolved."""
    return [(imp.line, imp.name) for imp in imports(path, source=source)]


def allowed(name: str) -> bool:
    top = name.split(".")[0]
    if top == "__future__":
        return True
    if top in sys.stdlib_module_names:
        return top not in NEWER_THAN_39
    if name == "fleet" or name == "fleet.__version__":
        return True
    return any(name == p or name.startswith(p + ".") for p in HOST_PACKAGES)


MODULES = host_modules()


def test_the_host_side_is_found():
    # A rename that empties the list would make the checks below pass vacuously.
    assert len(MODULES) > 40
    for package in HOST_PACKAGES:
        assert any(module_name(p).startswith(package) for p in MODULES), package


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_host_module_imports_only_stdlib_and_host_packages(path):
    bad = [f"{module_name(path)}:{line} imports {name}"
           for line, name in imported_names(path) if not allowed(name)]
    assert not bad, ("host-side modules may import only the standard library (as of Python 3.9) "
                     "and fleet.continuity/plugins/gateway/installer:\n" + "\n".join(bad))


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_host_module_parses_with_python_3_9_grammar(path):
    source = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(source, filename=str(path), feature_version=(3, 9))
    except SyntaxError as exc:
        pytest.fail(f"{module_name(path)}:{exc.lineno}: not Python 3.9 syntax: {exc.msg}")
    # `X | Y` in an annotation is evaluated at import time on 3.9 unless annotations are lazy.
    lazy = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
               and any(a.name == "annotations" for a in node.names) for node in tree.body)
    if lazy:
        return
    for node in ast.walk(tree):
        annotations = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            args += [a for a in (node.args.vararg, node.args.kwarg) if a]
            annotations = [a.annotation for a in args] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        for ann in filter(None, annotations):
            assert not any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr)
                           for n in ast.walk(ann)), (
                f"{module_name(path)}:{ann.lineno}: `X | Y` annotation needs "
                "`from __future__ import annotations` on Python 3.9")


def test_the_checks_catch_what_they_guard_against():
    # The checks themselves: a third-party import, a control-side import, a newer stdlib module
    # and a `match` statement are each caught.
    src = "import yaml\nfrom fleet.deploy import api\nimport tomllib\n"
    fake = ROOT / "fleet" / "gateway" / "_probe.py"
    names = [n for _, n in imported_names(fake, src)]
    assert [n for n in names if not allowed(n)] == [
        "yaml", "fleet.deploy", "fleet.deploy.api", "tomllib"]
    relative = "from . import hooks\nfrom ..continuity import store\nfrom .. import cli\n"
    assert [n for _, n in imported_names(fake, relative)] == [
        "fleet.gateway", "fleet.gateway.hooks", "fleet.continuity", "fleet.continuity.store",
        "fleet", "fleet.cli"]
    assert not allowed("fleet.cli")
    with pytest.raises(SyntaxError):
        ast.parse("match x:\n    case 1:\n        pass\n", feature_version=(3, 9))
