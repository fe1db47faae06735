"""One version-bearing file: where the version sits (JSON key path, TOML key, Python variable), and
how to read it and to rewrite only that value so the rest of the file stays byte for byte the same.

Re-dumping a JSON or TOML file would reorder keys, change indentation and lose comments; instead we
locate the exact span of the value in the text, cross-check it against a real parser, and splice.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from json.decoder import scanstring
from pathlib import Path
from typing import Any

from fleet.release import ecosystem
from fleet.release.error import ReleaseError

try:  # Python >= 3.11
    import tomllib as _toml
except ImportError:  # pragma: no cover - Python 3.10 control machines
    try:
        import tomli as _toml  # type: ignore[no-redef]
    except ImportError:
        _toml = None  # type: ignore[assignment]

KINDS = {".json": "json", ".toml": "toml", ".py": "python"}


class VersionFileError(ReleaseError):
    """A version-bearing file is missing, malformed, or lacks its key."""


def load_toml(text: str, where: str) -> dict:
    """Parse TOML text, naming the file in any error."""
    if _toml is None:  # pragma: no cover
        raise ReleaseError("reading TOML needs Python >= 3.11 or the `tomli` package "
                           "(pip install tomli)")
    try:
        return _toml.loads(text)
    except _toml.TOMLDecodeError as exc:
        raise VersionFileError(f"{where}: invalid TOML: {exc}; fix the syntax") from exc


@dataclass(frozen=True)
class VersionFile:
    """`path` (relative to the project root, POSIX) and the `key` holding the version in it."""

    path: str
    key: str

    @classmethod
    def parse(cls, spec: Any, where: str) -> VersionFile:
        """Build from a `"path:key"` string as written in `[tool.fleet]`."""
        if not isinstance(spec, str) or ":" not in spec:
            raise ReleaseError(f"{where}: expected \"<file>:<key>\" "
                               f"(e.g. \"package.json:version\"), got {spec!r}")
        path, _, key = spec.rpartition(":")
        if not path or not key:
            raise ReleaseError(f"{where}: {spec!r} needs both a file and a key")
        if Path(path).suffix not in KINDS:
            raise ReleaseError(f"{where}: {path} is not a .json, .toml or .py file; "
                               "only those can carry a version")
        return cls(path, key)

    @property
    def kind(self) -> str:
        return KINDS[Path(self.path).suffix]

    @property
    def ecosystem(self) -> str:
        """Whose rules its version follows (fleet.release.ecosystem): JSON npm's, else Python's."""
        return ecosystem.of_kind(self.kind)

    @property
    def label(self) -> str:
        return f"{self.path} `{self.key}`"

    def text(self, root: Path) -> str:
        """The file's text; VersionFileError if it is missing."""
        target = Path(root) / self.path
        try:
            return target.read_bytes().decode("utf-8")  # keep \r\n exactly as written
        except FileNotFoundError as exc:
            raise VersionFileError(f"{self.path}: file is missing (declared in [tool.fleet]); "
                                   "restore it or fix the component's `files`") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise VersionFileError(f"{self.path}: cannot read: {exc}") from exc

    def read(self, root: Path) -> str:
        """The version string stored in this file."""
        return self.locate(self.text(root))[2]

    def locate(self, text: str) -> tuple[int, int, str]:
        """(start, end, value): the span to replace and the current value."""
        if self.kind == "json":
            return _locate_json(text, self)
        if self.kind == "toml":
            return _locate_toml(text, self)
        return _locate_python(text, self)

    def replace(self, text: str, new: str) -> str:
        """`text` with only the version value changed to `new`."""
        start, end, _ = self.locate(text)
        if self.kind == "json":
            return text[:start] + json.dumps(new) + text[end:]
        return text[:start] + new + text[end:]


# --- JSON ------------------------------------------------------------------------------------
_WS = re.compile(r"[ \t\n\r]*")


def _locate_json(text: str, vf: VersionFile) -> tuple[int, int, str]:
    try:
        json.loads(text)
    except ValueError as exc:
        raise VersionFileError(f"{vf.path}: invalid JSON: {exc}; fix the syntax") from exc
    parts = vf.key.split(".")
    decoder = json.JSONDecoder()
    pos = _WS.match(text, 0).end()
    for depth, part in enumerate(parts):
        if text[pos:pos + 1] != "{":
            where = ".".join(parts[:depth]) or "the top level"
            raise VersionFileError(f"{vf.path}: {where} is not an object, so `{vf.key}` "
                                   "cannot be found; fix the key in [tool.fleet]")
        found = None
        pos = _WS.match(text, pos + 1).end()
        while text[pos] != "}":
            key, pos = scanstring(text, pos + 1)
            pos = _WS.match(text, pos).end() + 1  # the ':'
            pos = _WS.match(text, pos).end()
            _, end = decoder.raw_decode(text, pos)
            if key == part:
                found = (pos, end)  # JSON keeps the last duplicate; so do we
            pos = _WS.match(text, end).end()
            if text[pos] == ",":
                pos = _WS.match(text, pos + 1).end()
        if found is None:
            raise VersionFileError(f"{vf.path}: key `{vf.key}` is missing; add it or fix the "
                                   "component's `files` in [tool.fleet]")
        pos = found[0]
    start, end = found
    if text[start] != '"':
        raise VersionFileError(f"{vf.path}: `{vf.key}` is {text[start:end]!r}, not a string; "
                               "write the version as a JSON string")
    return start, end, json.loads(text[start:end])


# --- TOML ------------------------------------------------------------------------------------
_TABLE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_ARRAY_TABLE = re.compile(r"^\s*\[\[")
_ASSIGN = re.compile(r"""^\s*([A-Za-z0-9_\-."' ]+?)\s*=\s*(?:"([^"\\\n]*)"|'([^'\n]*)')""")


def _toml_key(raw: str) -> str:
    return ".".join(p.strip().strip("\"'") for p in raw.split("."))


def _locate_toml(text: str, vf: VersionFile) -> tuple[int, int, str]:
    data: Any = load_toml(text, vf.path)
    for part in vf.key.split("."):
        if not isinstance(data, dict) or part not in data:
            raise VersionFileError(f"{vf.path}: key `{vf.key}` is missing; add it or fix the "
                                   "component's `files` in [tool.fleet]")
        data = data[part]
    if not isinstance(data, str):
        raise VersionFileError(f"{vf.path}: `{vf.key}` is {data!r}, not a string; "
                               "write the version as a quoted string")
    table: str | None = ""
    in_multiline = False
    offset = 0
    for line in text.splitlines(keepends=True):
        here, offset = offset, offset + len(line)
        if line.count('"""') % 2 or line.count("'''") % 2:
            in_multiline = not in_multiline
            continue
        if in_multiline:
            continue
        if _ARRAY_TABLE.match(line):
            table = None
            continue
        m = _TABLE.match(line)
        if m:
            table = _toml_key(m.group(1))
            continue
        m = _ASSIGN.match(line)
        if m and table is not None:
            full = _toml_key(m.group(1)) if not table else f"{table}.{_toml_key(m.group(1))}"
            group = 2 if m.group(2) is not None else 3
            if full == vf.key and m.group(group) == data:
                return here + m.start(group), here + m.end(group), data
    raise VersionFileError(f"{vf.path}: `{vf.key}` = {data!r} is not written as a plain one-line "
                           "string, so it cannot be rewritten safely; write it as key = \"X\"")


# --- Python ----------------------------------------------------------------------------------
def _locate_python(text: str, vf: VersionFile) -> tuple[int, int, str]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise VersionFileError(f"{vf.path}: invalid Python: {exc}") from exc
    value = None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == vf.key for t in targets):
            val = node.value
            if not (isinstance(val, ast.Constant) and isinstance(val.value, str)):
                raise VersionFileError(f"{vf.path}: `{vf.key}` is not a string literal; "
                                       f"write {vf.key} = \"X\"")
            value = val.value
    if value is None:
        raise VersionFileError(f"{vf.path}: `{vf.key}` is missing; add {vf.key} = \"X\" at "
                               "module level or fix the component's `files` in [tool.fleet]")
    pattern = re.compile(rf"^{re.escape(vf.key)}"
                         r"""\s*(?::\s*str\s*)?=\s*(?:"([^"\\\n]*)"|'([^'\n]*)')""", re.M)
    found = None
    for m in pattern.finditer(text):
        group = 1 if m.group(1) is not None else 2
        if m.group(group) == value:
            found = (m.start(group), m.end(group))
    if found is None:
        raise VersionFileError(f"{vf.path}: `{vf.key}` is not written as a plain one-line string "
                               f"at the start of a line; write {vf.key} = \"X\"")
    return found[0], found[1], value
