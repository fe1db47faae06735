"""docs/architecture.md is the map: every module is named in it, and its table of imports per
package is what the code imports (read with `ast`, nothing imported)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
PACKAGES = sorted(p.name for p in (ROOT / "fleet").iterdir() if (p / "__init__.py").is_file())


def package_of(module: str) -> str | None:
    """`fleet.deploy.api` -> `deploy`; `fleet` (its `__init__`) -> `fleet`; not fleet: None."""
    parts = module.split(".")
    if parts[0] != "fleet":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else "fleet"


def imported(path: Path, module: str) -> list[tuple[str, bool]]:
    """(imported module, at module level?) for every import in a file."""
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, not in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = module.split(".")[: -child.level]
                    if path.name == "__init__.py":
                        package = module.split(".")[: len(module.split(".")) - child.level + 1]
                    base = ".".join(package + ([child.module] if child.module else []))
                found.append((base, not in_function))
                found.extend((f"{base}.{alias.name}", not in_function) for alias in child.names)
            visit(child, in_function or isinstance(child, (ast.FunctionDef,
                                                           ast.AsyncFunctionDef)))

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def actual_imports() -> dict[str, tuple[set, set]]:
    """package -> (packages imported at module level, packages imported only in functions)."""
    table: dict[str, tuple[set, set]] = {}
    for path in sorted((ROOT / "fleet").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        own = package_of(module)
        if own == "fleet":
            continue
        top, inner = table.setdefault(own, (set(), set()))
        for name, at_top in imported(path, module):
            other = package_of(name)
            if other and other != own:
                (top if at_top else inner).add(other)
    return {pkg: (top, inner - top) for pkg, (top, inner) in table.items()}


def documented_imports() -> dict[str, tuple[set, set]]:
    table = {}
    names = {*PACKAGES, "fleet"}
    for row in re.finditer(r"^\| `fleet\.(\w+)` \|([^|]*)\|([^|]*)\|$", DOC, re.MULTILINE):
        top, inner = ({n for n in re.findall(r"`(\w+)`", cell) if n in names}
                      for cell in (row.group(2), row.group(3)))
        table[row.group(1)] = (top, inner)
    return table


def test_the_import_table_is_what_the_code_imports():
    assert documented_imports() == actual_imports()


def test_every_module_is_named_in_its_package_line():
    section = DOC.split("### Modules, package by package", 1)[1].split("\n###", 1)[0]
    bullets = {m.group(1): m.group(2) for m in re.finditer(
        r"^- \*\*`(fleet/[\w/]+/)`\*\*(.*?)(?=^- |\Z)", section, re.MULTILINE | re.DOTALL)}
    missing = []
    for path in sorted((ROOT / "fleet").rglob("*.py")):
        if path.name == "__init__.py" or path.parent == ROOT / "fleet" / "plugins":
            continue
        folder = path.parent.relative_to(ROOT).as_posix() + "/"
        if f"`{path.name}`" not in bullets.get(folder, ""):
            missing.append(f"{folder}{path.name}")
    assert not missing, ("modules not listed under 'Modules, package by package' in "
                         f"docs/architecture.md: {missing}")
