"""User-supplied patterns (`ignorePatterns`) that can never freeze the process.

Python's `re` backtracks: `(a+)+$` against 27 `a`s and a `!` runs for seconds, doubling per
character, holding the GIL the whole time (so no timeout and no other thread runs). Patterns a user
types into `/mc settings` are therefore compiled here instead, into a Thompson NFA that is run
breadth-first (every alternative advanced together, one step per character): time is linear in the
text (at most MAX_TEXT characters) times the program size, whatever the pattern.

The language is the usual regex subset that needs no backtracking: literals and `\\`-escapes,
`.`, classes `[a-z_]` / `[^...]`, `\\d \\w \\s \\D \\W \\S`, anchors `^ $ \\b \\B`, groups
`(...)` / `(?:...)`, `|`, and quantifiers `* + ? {n} {n,} {n,m}` (a trailing `?` is accepted and
changes nothing: only *whether* it matches counts). Backreferences, lookaround and inline flags
need backtracking or change meaning, so they are refused with the reason. Matching is
case-insensitive, as `ignorePatterns` always was.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

MAX_PATTERN = 100  # characters
MAX_REPEAT = 100  # largest n or m in {n,m}
MAX_PROGRAM = 2000  # instructions after expanding counted repetition
MAX_TEXT = 2000  # characters of the subject that are looked at


class PatternError(ValueError):
    """The pattern is outside the safe language or malformed; the message says why and where."""


Pred = Callable[[str], bool]

_CLASS_ESCAPES = {
    "d": lambda c: c.isdecimal(),
    "w": lambda c: c.isalnum() or c == "_",
    "s": lambda c: c.isspace(),
}
_LITERAL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}


def _fold(c: str) -> str:
    return c.lower()


def _is_word(c: Optional[str]) -> bool:
    return c is not None and (c.isalnum() or c == "_")


# AST nodes: ("pred", fn) ("assert", kind) ("cat", [nodes]) ("alt", [nodes])
# ("rep", node, min, max_or_None) ("empty",)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, why: str, at: Optional[int] = None) -> PatternError:
        where = self.pos if at is None else at
        return PatternError(f"pattern {self.text!r}: {why} (at character {where})")

    def peek(self) -> Optional[str]:
        return self.text[self.pos] if self.pos < len(self.text) else None

    def take(self) -> str:
        c = self.text[self.pos]
        self.pos += 1
        return c

    def parse(self) -> tuple:
        node = self.alternation()
        if self.pos != len(self.text):
            raise self.fail("unbalanced ')'")
        return node

    def alternation(self) -> tuple:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.take()
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def sequence(self) -> tuple:
        items: List[tuple] = []
        while self.peek() is not None and self.peek() not in "|)":
            items.append(self.quantified())
        return ("cat", items) if items else ("empty",)

    def quantified(self) -> tuple:
        start = self.pos
        atom = self.atom()
        c = self.peek()
        if c is None or c not in "*+?{":
            return atom
        if c == "{" and not self._counted_ahead():
            return atom  # a literal "{", as in Python's re
        if atom[0] == "assert":
            raise self.fail("a quantifier cannot follow an anchor", start)
        if c == "*":
            self.take()
            lo, hi = 0, None
        elif c == "+":
            self.take()
            lo, hi = 1, None
        elif c == "?":
            self.take()
            lo, hi = 0, 1
        else:
            lo, hi = self.counted()
        if self.peek() == "?":
            self.take()  # lazy: the same set of matches
        if self.peek() is not None and self.peek() in "*+{" and (
                self.peek() != "{" or self._counted_ahead()):
            raise self.fail("a quantifier cannot follow a quantifier (possessive/double)")
        return ("rep", atom, lo, hi)

    def _counted_ahead(self) -> bool:
        end = self.text.find("}", self.pos)
        if end < 0:
            return False
        body = self.text[self.pos + 1:end]
        parts = body.split(",")
        return 1 <= len(parts) <= 2 and parts[0].isdigit() and all(
            p.isdigit() or p == "" for p in parts[1:])

    def counted(self) -> Tuple[int, Optional[int]]:
        self.take()  # "{"
        end = self.text.index("}", self.pos)
        body = self.text[self.pos:end]
        self.pos = end + 1
        lo_s, _, hi_s = body.partition(",")
        lo = int(lo_s)
        hi: Optional[int] = lo if "," not in body else (int(hi_s) if hi_s else None)
        if lo > MAX_REPEAT or (hi is not None and hi > MAX_REPEAT):
            raise self.fail(f"counted repetition above {MAX_REPEAT}")
        if hi is not None and hi < lo:
            raise self.fail(f"{{{body}}}: the maximum is below the minimum")
        return lo, hi

    def atom(self) -> tuple:
        c = self.take()
        if c == "(":
            if self.peek() == "?":
                if self.text.startswith("?:", self.pos):
                    self.pos += 2
                else:
                    nxt = self.text[self.pos:self.pos + 3]
                    kind = ("lookaround is" if nxt[:2] in ("?=", "?!") or nxt in ("?<=", "?<!")
                            else "named groups and inline flags are")
                    raise self.fail(f"{kind} not supported (they need a backtracking engine "
                                    "or change the matching rules); use plain (...) groups")
            node = self.alternation()
            if self.peek() != ")":
                raise self.fail("missing ')'")
            self.take()
            return node
        if c == ")":
            raise self.fail("unbalanced ')'", self.pos - 1)
        if c in "*+?":
            raise self.fail(f"nothing to repeat before {c!r}", self.pos - 1)
        if c == "^":
            return ("assert", "^")
        if c == "$":
            return ("assert", "$")
        if c == ".":
            return ("pred", lambda ch: ch != "\n")
        if c == "[":
            return ("pred", self.char_class())
        if c == "\\":
            return self.escape()
        f = _fold(c)
        return ("pred", lambda ch, f=f: _fold(ch) == f)

    def escape(self) -> tuple:
        if self.peek() is None:
            raise self.fail("a pattern cannot end with '\\'")
        c = self.take()
        if c.isdigit() and c != "0":
            raise self.fail(f"backreference \\{c} is not supported (it needs a backtracking "
                            "engine)", self.pos - 2)
        if c in "bB":
            return ("assert", c)
        if c in "AZ":
            return ("assert", "^" if c == "A" else "z")
        pred = self._class_escape(c)
        if pred is not None:
            return ("pred", pred)
        lit = self._literal_escape(c)
        f = _fold(lit)
        return ("pred", lambda ch, f=f: _fold(ch) == f)

    @staticmethod
    def _class_escape(c: str) -> Optional[Pred]:
        base = _CLASS_ESCAPES.get(c.lower())
        if base is None:
            return None
        if c.isupper():
            return lambda ch, base=base: not base(ch)
        return base

    def _literal_escape(self, c: str) -> str:
        if c in _LITERAL_ESCAPES:
            return _LITERAL_ESCAPES[c]
        if c.isalnum():
            raise self.fail(f"unknown escape \\{c}", self.pos - 2)
        return c

    def char_class(self) -> Pred:
        negate = False
        if self.peek() == "^":
            self.take()
            negate = True
        items: List[Pred] = []
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise self.fail("missing ']'")
            if c == "]" and not first:
                self.take()
                break
            first = False
            self.take()
            if c == "\\":
                if self.peek() is None:
                    raise self.fail("missing ']'")
                e = self.take()
                pred = self._class_escape(e)
                if pred is not None:
                    items.append(pred)
                    continue
                c = "\b" if e == "b" else self._literal_escape(e)
            if self.peek() == "-" and self.pos + 1 < len(self.text) and \
                    self.text[self.pos + 1] != "]":
                self.take()
                hi = self.take()
                if hi == "\\":
                    hi = self._literal_escape(self.take())
                if ord(hi) < ord(c):
                    raise self.fail(f"bad range {c}-{hi}")
                lo_o, hi_o = ord(c), ord(hi)
                items.append(lambda ch, a=lo_o, b=hi_o: any(
                    a <= ord(v) <= b for v in {ch, ch.lower(), ch.upper()} if len(v) == 1))
            else:
                f = _fold(c)
                items.append(lambda ch, f=f: _fold(ch) == f)
        if negate:
            return lambda ch: not any(p(ch) for p in items)
        return lambda ch: any(p(ch) for p in items)


# Program: list of instructions ("pred", fn) ("split", a, b) ("jmp", a) ("assert", kind) ("match",)

def _emit(node: tuple, prog: list) -> None:
    kind = node[0]
    if len(prog) > MAX_PROGRAM:
        raise PatternError(f"pattern too large after expanding repetitions (> {MAX_PROGRAM})")
    if kind in ("pred", "assert"):
        prog.append(node)
    elif kind == "empty":
        pass
    elif kind == "cat":
        for item in node[1]:
            _emit(item, prog)
    elif kind == "alt":
        jumps = []
        branches = node[1]
        for i, branch in enumerate(branches):
            if i < len(branches) - 1:
                split = len(prog)
                prog.append(["split", split + 1, None])
                _emit(branch, prog)
                jumps.append(len(prog))
                prog.append(["jmp", None])
                prog[split][2] = len(prog)
            else:
                _emit(branch, prog)
        for j in jumps:
            prog[j][1] = len(prog)
    elif kind == "rep":
        _, atom, lo, hi = node
        for _ in range(lo):
            _emit(atom, prog)
        if hi is None:
            split = len(prog)
            prog.append(["split", split + 1, None])
            _emit(atom, prog)
            prog.append(["jmp", split])
            prog[split][2] = len(prog)
        else:
            ends = []
            for _ in range(hi - lo):
                split = len(prog)
                prog.append(["split", split + 1, None])
                ends.append(split)
                _emit(atom, prog)
            for split in ends:
                prog[split][2] = len(prog)


class SafePattern:
    """A compiled pattern; `search(text)` is linear in `min(len(text), MAX_TEXT)`."""

    def __init__(self, source: str) -> None:
        if not isinstance(source, str):
            raise PatternError(f"pattern must be a string, got {type(source).__name__}")
        if len(source) > MAX_PATTERN:
            raise PatternError(f"pattern {source[:40]!r}...: longer than {MAX_PATTERN} characters")
        self.pattern = source
        prog: list = []
        _emit(_Parser(source).parse(), prog)
        prog.append(("match",))
        if len(prog) > MAX_PROGRAM:
            raise PatternError(f"pattern {source!r}: too large after expanding repetitions")
        self._prog = [tuple(i) for i in prog]

    def _closure(self, pcs: List[int], text: str, i: int, out: List[int], seen: set,
                 cut: bool = False) -> bool:
        """Add the threads reachable from `pcs` at position i without consuming; True on match."""
        prog = self._prog
        stack = list(reversed(pcs))
        prev = text[i - 1] if i > 0 else None
        cur = text[i] if i < len(text) else None
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            ins = prog[pc]
            op = ins[0]
            if op == "match":
                return True
            if op == "jmp":
                stack.append(ins[1])
            elif op == "split":
                stack.append(ins[2])
                stack.append(ins[1])
            elif op == "assert":
                k = ins[1]
                ok = ((k == "^" and i == 0)
                      or (k == "$" and ((i == len(text) and not cut)
                                        or (i == len(text) - 1 and cur == "\n" and not cut)))
                      or (k == "z" and i == len(text) and not cut)
                      or (k == "b" and _is_word(prev) != _is_word(cur))
                      or (k == "B" and _is_word(prev) == _is_word(cur)))
                if ok:
                    stack.append(pc + 1)
            else:
                out.append(pc)
        return False

    def search(self, text: str) -> bool:
        """Does the pattern match anywhere in the first MAX_TEXT characters of `text`?
        (Where the text was cut, `$` does not match: that is not its end.)"""
        text = text or ""
        cut = len(text) > MAX_TEXT
        text = text[:MAX_TEXT]
        prog = self._prog
        current: List[int] = []
        seen: set = set()
        if self._closure([0], text, 0, current, seen, cut):
            return True
        for i, ch in enumerate(text):
            nxt: List[int] = []
            seen = set()
            advanced = [pc + 1 for pc in current if prog[pc][1](ch)]
            advanced.append(0)  # a match may also start at the next position
            if self._closure(advanced, text, i + 1, nxt, seen, cut):
                return True
            current = nxt
        return False


def compile_pattern(source: str) -> SafePattern:
    """Compile or raise PatternError saying why the pattern is refused."""
    return SafePattern(source)
