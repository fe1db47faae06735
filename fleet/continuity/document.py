"""The CURRENT_STATE.md document: lossless parse/render, whole-section access, template.

Users and agents edit this file by hand, so the parser must never lose what it does not understand:
an unmodified document renders back byte for byte (unknown sections, text outside sections, CRLF).
Sections are read whole (the original plugin read only their first line, which
dropped data).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import List, Optional

TITLE = "# Current State"
LAST_UPDATED_PREFIX = "> Last updated:"

SECTIONS = (
    "Objective",
    "Current Step",
    "Key Decisions",
    "Next Action",
    "Blockers",
    "Unsurfaced Results",
)

# Values that mean "nothing here" (the original plugin's list).
PLACEHOLDER_VALUES = frozenset(
    {
        "",
        "none",
        "n/a",
        "na",
        "idle",
        "[one sentence: what are we trying to accomplish]",
        "[exactly what should happen next]",
    }
)

_HEADING_RE = re.compile(r"^##[ \t]+(.*?)[ \t]*\r?\n?$")
_LAST_UPDATED_RE = re.compile(r"^>[ \t]*last updated:[ \t]*(.*?)[ \t]*\r?\n?$", re.IGNORECASE)
# Everything Python or a Markdown viewer might treat as a line break inside a value.
# Control characters other than tab and newline (NUL, ANSI escapes, C1): never written raw.
_CONTROL_RE = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f]")
_LINE_BREAKS_RE = re.compile("\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def iso_now() -> str:
    """UTC now in JS `toISOString()` form (`2026-03-31T07:51:52.123Z`), as the JS plugin stamps."""
    return to_iso(datetime.now(timezone.utc))


def to_iso(moment: datetime) -> str:
    """`moment` (naive = local time) in JS `toISOString()` form, UTC with milliseconds."""
    utc = moment.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def template(now_iso: Optional[str] = None) -> str:
    """The original plugin's empty state file, byte for byte, one trailing newline."""
    stamp = now_iso or iso_now()
    return (
        f"{TITLE}\n{LAST_UPDATED_PREFIX} {stamp}\n\n"
        "## Objective\nNone\n\n"
        "## Current Step\nNone\n\n"
        "## Key Decisions\n- None\n\n"
        "## Next Action\nNone\n\n"
        "## Blockers\nNone\n\n"
        "## Unsurfaced Results\nNone\n"
    )


def is_meaningful(value: Optional[str]) -> bool:
    """False for empty and placeholder values (the original plugin's list).

    `- None`, `None.` and `TBD` are real values.
    """
    if value is None:
        return False
    return value.strip().lower() not in PLACEHOLDER_VALUES


def neutralize(text: str) -> str:
    """Make untrusted text safe as a section body: one `\\n` per line break, and no line that could
    be read as a heading (`#` at line start) or a `> Last updated:` line (prefixed with `\\`).

    Control characters other than tab and newline (NUL, ESC of ANSI sequences, C1) become
    U+FFFD, so a child cannot put terminal escapes or NULs into a parent's file.
    Idempotent: an escaped line starts with `\\`, so neutralising twice changes nothing.
    """
    lines = _CONTROL_RE.sub("\ufffd", _LINE_BREAKS_RE.sub("\n", text)).split("\n")
    out = []
    for line in lines:
        bare = line.lstrip()
        if bare.startswith("#") or _LAST_UPDATED_RE.match(bare):
            line = "\\" + line
        out.append(line)
    return "\n".join(out)


def _split_lines(text: str) -> List[str]:
    """Split after every `\\n`, keeping it; joining the result gives `text` back exactly."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _norm_name(name: str) -> str:
    return " ".join(name.split()).lower()


class _Section:
    __slots__ = ("heading", "name", "body")

    def __init__(self, heading: str, name: str, body: List[str]):
        self.heading = heading
        self.name = name
        self.body = body


class StateDocument:
    """A parsed state file. `render()` of an unmodified document equals the parsed text."""

    def __init__(self, preamble: List[str], sections: List[_Section]):
        self._preamble = preamble
        self._sections = sections

    @classmethod
    def parse(cls, text: str) -> StateDocument:
        """Parse any text; never raises (non-state text simply has no known sections)."""
        if not isinstance(text, str):
            raise TypeError(f"StateDocument.parse expects str, got {type(text).__name__}")
        preamble: List[str] = []
        sections: List[_Section] = []
        for line in _split_lines(text):
            m = _HEADING_RE.match(line)
            if m:
                sections.append(_Section(line, _norm_name(m.group(1)), []))
            elif sections:
                sections[-1].body.append(line)
            else:
                preamble.append(line)
        return cls(preamble, sections)

    @classmethod
    def new(cls, now_iso: Optional[str] = None) -> StateDocument:
        return cls.parse(template(now_iso))

    def render(self) -> str:
        parts = list(self._preamble)
        for sec in self._sections:
            parts.append(sec.heading)
            parts.extend(sec.body)
        return "".join(parts)

    # -- sections -------------------------------------------------------------------------------

    def section_names(self) -> List[str]:
        """Heading names in file order, as written (trimmed)."""
        out = []
        for sec in self._sections:
            m = _HEADING_RE.match(sec.heading)
            out.append(m.group(1) if m else sec.name)
        return out

    def _find(self, name: str) -> Optional[_Section]:
        key = _norm_name(name)
        for sec in self._sections:
            if sec.name == key:
                return sec
        return None

    def has(self, section: str) -> bool:
        return self._find(section) is not None

    def get(self, section: str) -> str:
        """Whole body of the first section named `section` (any case), stripped; '' if absent.

        Line endings are returned as `\\n` whatever the file uses.
        """
        sec = self._find(section)
        if sec is None:
            return ""
        return "".join(sec.body).replace("\r\n", "\n").strip()

    def _newline(self) -> str:
        for line in self._preamble + [s.heading for s in self._sections]:
            if line.endswith("\r\n"):
                return "\r\n"
            if line.endswith("\n"):
                return "\n"
        return "\n"

    def set(self, section: str, body: str) -> None:
        """Replace a section's body (neutralised, see `neutralize`), adding the section if missing.

        The blank lines that separated the section from the next one are kept, so the rest of the
        document renders unchanged.
        """
        nl = self._newline()
        value = neutralize(body.strip("\n")).strip("\n")
        new_lines = [line + nl for line in value.split("\n")]
        sec = self._find(section)
        if sec is None:
            self._insert(section, new_lines, nl)
            return
        trailing = []
        for line in reversed(sec.body):
            if line.strip():
                break
            trailing.insert(0, line)
        is_last = sec is self._sections[-1]
        if not trailing and not is_last:
            trailing = [nl]
        if is_last and sec.body and not sec.body[-1].endswith("\n"):
            # The file had no final newline; keep it that way.
            new_lines[-1] = new_lines[-1][: -len(nl)]
            trailing = []
        sec.body = new_lines + trailing

    def _insert(self, section: str, body: List[str], nl: str) -> None:
        name = section.strip()
        heading = f"## {name}{nl}"
        new = _Section(heading, _norm_name(name), body)
        order = [_norm_name(s) for s in SECTIONS]
        idx = len(self._sections)
        if new.name in order:
            later = set(order[order.index(new.name) + 1 :])
            for i, sec in enumerate(self._sections):
                if sec.name in later:
                    idx = i
                    break
        if idx < len(self._sections):
            new.body = body + [nl]
        else:
            prev = self._sections[-1].body if self._sections else self._preamble
            if prev and not prev[-1].endswith("\n"):
                prev[-1] += nl
            if prev and prev[-1].strip():
                prev.append(nl)
        self._sections.insert(idx, new)

    # -- timestamp ------------------------------------------------------------------------------

    @property
    def last_updated(self) -> Optional[str]:
        """The `> Last updated:` value from the header (text before the first section), or None."""
        for line in self._preamble:
            m = _LAST_UPDATED_RE.match(line)
            if m:
                return m.group(1) or None
        return None

    def touch(self, now_iso: Optional[str] = None) -> None:
        """Set the header's `> Last updated:` line, adding it under the title when missing."""
        stamp = now_iso or iso_now()
        nl = self._newline()
        for i, line in enumerate(self._preamble):
            if _LAST_UPDATED_RE.match(line):
                ending = nl if line.endswith("\n") else ""
                if line.endswith("\r\n"):
                    ending = "\r\n"
                self._preamble[i] = f"{LAST_UPDATED_PREFIX} {stamp}{ending}"
                return
        new_line = f"{LAST_UPDATED_PREFIX} {stamp}{nl}"
        for i, line in enumerate(self._preamble):
            if line.startswith("# "):
                if not line.endswith("\n"):
                    self._preamble[i] = line + nl
                self._preamble.insert(i + 1, new_line)
                return
        self._preamble.insert(0, new_line)
