"""The product never needs the lab: `pip install .` ships `fleet` only, and nothing in `fleet`
imports `lab` (benchmarks, harness, toolchain, scripted model), at module level or in a function.

An import of the lab from the product works in the checkout, where `lab/` is on the path, and
breaks only for an operator who installed the package: so this reads every product module's
source and names each offending import.
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

import tomllib
from imports import REPO, imports, module_name

PRODUCT = sorted((REPO / "fleet").rglob("*.py"))


def lab_imports(path: Path, source: str | None = None) -> list[str]:
    return [f"{module_name(path)}:{imp.line} imports {imp.name}"
            for imp in imports(path, source=source)
            if imp.name == "lab" or imp.name.startswith("lab.")]


def test_no_product_module_imports_the_lab():
    assert len(PRODUCT) > 100  # a moved tree would make the check pass vacuously
    bad = [line for path in PRODUCT for line in lab_imports(path)]
    assert not bad, ("the product (fleet/) must not import the checkout's lab (it is not "
                     "installed); pass what it needs through fleet/cli/extension.py:\n"
                     + "\n".join(bad))


def test_the_check_catches_lab_imports_anywhere_in_a_module():
    probe = REPO / "fleet" / "deploy" / "_probe.py"
    source = ("import lab\n"
              "def f():\n    from lab.openclaw import toolchain\n"
              "from fleet.cli import deploy\n")
    assert lab_imports(probe, source) == ["fleet.deploy._probe:1 imports lab",
                                         "fleet.deploy._probe:3 imports lab.openclaw",
                                         "fleet.deploy._probe:3 imports lab.openclaw.toolchain"]


def test_the_package_ships_only_the_product():
    # setuptools' `packages.find` include patterns (fnmatch): `lab` must match none of them.
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = [module_name(init.parent) for init in REPO.glob("*/**/__init__.py")
                if ".venv" not in init.parts and init.parts[len(REPO.parts)] in ("fleet", "lab")]
    shipped = {p for p in packages if any(fnmatch(p, pattern) for pattern in include)}
    assert {"fleet", "fleet.gateway", "fleet.deploy", "fleet.cli"} <= shipped
    assert {p for p in packages if p.startswith("lab")}.isdisjoint(shipped)
