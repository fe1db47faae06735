r"""Text fleet did not write, on the operator's terminal: shown, never obeyed.

Whoever can write a host's state dir, answer for its installer, edit an inventory or
ssh_config, or commit to the checkout chooses text fleet prints: a log line, a lock's owner and
message, a temp file's name, a doctor's finding, a release name, a host name, a version file's
contents. Printed as it is, an ESC sequence clears the screen, retitles the window or plants a
hyperlink, a C1 control does the same on terminals that obey 8-bit controls, a bidi override
(U+202E) shows characters in another order than they are, and a zero-width or tag character
makes two different names look alike; printed as a `str` through Rich, `[link=...]` becomes a
hyperlink and `[red]` a style. So every task shows such text through this module, and `--json`
keeps it exact:

- `visible()` writes every control character (C0 but tab and, in multi-line text, newline;
  DEL; C1), every invisible formatting character (Unicode `Cf`: bidi controls, zero-width and
  tag characters), line and paragraph separators and lone surrogates as Python escapes
  (`\x1b`, `\x9b`, `\r`, `\u202e`, `\U000e0041`). Everything else, non-ASCII letters
  included, stays as it is, so ordinary text prints byte for byte as before. A backslash is
  not doubled: `\x1b` on the terminal may also be those four characters; `--json` tells.
- `cell()` is that text as a Rich `Text`, which Rich never reads as markup or emoji codes (a
  `str` table cell or `console.print(str)` would be).
- `json_text()` is `json.dumps` with only JSON escaping, also for what a terminal would obey
  among the characters `json.dumps(ensure_ascii=False)` leaves raw (C1, DEL, `Cf`, U+2028).
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from rich.style import Style
from rich.text import Text

# Unicode categories a terminal obeys or shows as nothing: controls, format characters (bidi,
# zero-width, tags), surrogates (no terminal can even encode a lone one), line/paragraph breaks.
HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SUSPECT = re.compile("[^\x20-\x7e]")  # printable ASCII never needs a look
_JSON_WHITESPACE = frozenset("\t\n\r")  # raw in json.dumps output only between tokens
_SHORT = {"\n": "\\n", "\r": "\\r"}  # as Python's repr spells them (tab is always kept)


def _escape(char: str) -> str:
    code = ord(char)
    if char in _SHORT:
        return _SHORT[char]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: object, multiline: bool = False) -> str:
    """`text` (str() of anything else) with every character a terminal would obey or hide
    written as its escape; tab stays, and newline too with `multiline` (output where a line
    break is legitimate, such as a table cell; never in line-oriented output, where a host's
    newline could forge a line of fleet's own)."""
    raw = text if isinstance(text, str) else str(text)
    keep = "\t\n" if multiline else "\t"

    def one(found: re.Match) -> str:
        char = found.group()
        if char in keep or unicodedata.category(char) not in HIDDEN:
            return char
        return _escape(char)

    return _SUSPECT.sub(one, raw)


def cell(text: object, style: str | Style = "") -> Text:
    """Host or inventory text as a Rich `Text` for a table cell or a printed line: escaped by
    `visible` (newlines kept: they stay inside the cell) and never read as markup."""
    return Text(visible(text, multiline=True), style=style)


def _json_escape(found: re.Match) -> str:
    char = found.group()
    if char in _JSON_WHITESPACE or unicodedata.category(char) not in HIDDEN:
        return char
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON spells a character beyond the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(value: Any, **dumps: Any) -> str:
    """`json.dumps(value, **dumps)` whose raw characters include nothing a terminal obeys: the
    parsed document is exactly the same (the characters are JSON-escaped, inside strings, the
    only place json.dumps writes them raw), and ordinary text is byte for byte the same."""
    return _SUSPECT.sub(_json_escape, json.dumps(value, **dumps))
