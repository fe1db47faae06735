"""docs/architecture.md is the map: every module is named in it, and its table of imports per
package is what the code imports (read with `ast`, nothing imported)."""

from __future__ import annotations

import re
from pathlib import Path

from imports import REPO, imports, module_name

DOC = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
TOPS = ("fleet", "lab")  # the product and the checkout's lab
PACKAGES = {f"{top}.{p.name}" for top in TOPS for p in (REPO / top).iterdir()
            if (p / "__init__.py").is_file()}


def sources() -> list[Path]:
    return [path for top in TOPS for path in sorted((REPO / top).rglob("*.py"))]


def package_of(module: str) -> str | None:
    """`fleet.deploy.api` -> `fleet.deploy`; `fleet` (its `__init__`) -> `fleet`; else None."""
    parts = module.split(".")
    if parts[0] not in TOPS:
        return None
    two = ".".join(parts[:2])
    return two if two in PACKAGES else parts[0]


def actual_imports() -> dict[str, tuple[set, set]]:
    """package -> (packages imported at module level, packages imported only in functions)."""
    table: dict[str, tuple[set, set]] = {}
    for path in sources():
        own = package_of(module_name(path))
        if own in TOPS:
            continue
        top, inner = table.setdefault(own, (set(), set()))
        for imp in imports(path):
            other = package_of(imp.name)
            if other and other != own:
                (top if imp.module_level else inner).add(other)
    return {pkg: (top, inner - top) for pkg, (top, inner) in table.items()}


def documented_imports() -> dict[str, tuple[set, set]]:
    table = {}
    names = {*PACKAGES, *TOPS}
    for row in re.finditer(r"^\| `((?:fleet|lab)\.\w+)` \|([^|]*)\|([^|]*)\|$", DOC,
                           re.MULTILINE):
        top, inner = ({n for n in re.findall(r"`([\w.]+)`", cell) if n in names}
                      for cell in (row.group(2), row.group(3)))
        table[row.group(1)] = (top, inner)
    return table


def test_the_import_table_is_what_the_code_imports():
    assert documented_imports() == actual_imports()


def test_every_module_is_named_in_its_package_line():
    section = DOC.split("### Modules, package by package", 1)[1].split("\n## ", 1)[0]
    bullets = {m.group(1): m.group(2) for m in re.finditer(
        r"^- \*\*`((?:fleet|lab)/(?:[\w/]+/)?)`\*\*(.*?)(?=^- |\Z)", section,
        re.MULTILINE | re.DOTALL)}
    missing = []
    for path in sources():
        if path.name == "__init__.py" or path.parent == REPO / "fleet" / "plugins":
            continue
        folder = path.parent.relative_to(REPO).as_posix() + "/"
        if f"`{path.name}`" not in bullets.get(folder, ""):
            missing.append(f"{folder}{path.name}")
    assert not missing, ("modules not listed under 'Modules, package by package' in "
                         f"docs/architecture.md: {missing}")
