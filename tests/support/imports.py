"""What a Python source file imports, read with `ast` (nothing is imported or run).

Shared by the tests that guard the package boundaries (host side, product vs lab) and the
architecture doc's import table.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class Import:
    line: int
    name: str          # absolute module name; `from m import x` gives both `m` and `m.x`
    module_level: bool  # False when the import sits inside a function


def module_name(path: Path, root: Path = REPO) -> str:
    """`fleet/deploy/api.py` -> `fleet.deploy.api`; a package's `__init__.py` -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path = REPO, source: str | None = None) -> list[Import]:
    """Every import of the file at `path` (its text, or `source`), relative ones resolved."""
    package = module_name(path, root)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend(Import(child.lineno, alias.name, not in_function)
                             for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (child.level - 1)]
                    base = ".".join(parts + ([child.module] if child.module else []))
                found.append(Import(child.lineno, base, not in_function))
                found.extend(Import(child.lineno, f"{base}.{alias.name}", not in_function)
                             for alias in child.names)
            visit(child, in_function or isinstance(child, (ast.FunctionDef,
                                                           ast.AsyncFunctionDef)))

    text = path.read_text(encoding="utf-8") if source is None else source
    visit(ast.parse(text, filename=str(path)), False)
    return found
