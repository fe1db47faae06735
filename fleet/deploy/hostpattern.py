"""Host patterns after `--hosts`, read as Ansible reads `--limit` and a play's `hosts:`.

    web,db            union: web's hosts, then db's (`:` separates too: `web:db`)
    production:!pi    exclusion: production's hosts except pi
    web:&staging      intersection: web's hosts that are also in staging
    web*  ~db\\d+      a shell wildcard (`*`, `?`, `[...]`) or, after `~`, a regular expression,
                      matched against group and host names

As in Ansible (https://docs.ansible.com/ansible/latest/inventory_guide/intro_patterns.html), the
order of the terms does not matter: the plain terms are united first, then each `&` term keeps
the hosts it also selects, then each `!` term removes its hosts; a pattern of only `&`/`!` terms
starts from `all`. A term that is exactly a host or group name is that name, whatever characters
it holds, so every name the inventory accepts stays selectable.

Where fleet differs, on purpose: a term that selects nothing (a typo, `!web9` for `!web3`) is an
error naming it, not a warning; and a wildcard in a plain term never reaches a sandbox host (as
`all` does not; name them or their group), while in `&` and `!` terms it does, since those only
narrow a selection.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass

WILDCARD_CHARS = "*?["
REGEX_PREFIX = "~"


class PatternError(ValueError):
    """A term that names nothing, a bad regular expression, or a pattern with no terms."""


@dataclass(frozen=True)
class Term:
    op: str  # "" (union), "&" (intersection) or "!" (exclusion)
    text: str  # a name, a wildcard or `~regex`, without its operator

    def __str__(self) -> str:
        return self.op + self.text

    @property
    def wildcard(self) -> bool:
        return self.text.startswith(REGEX_PREFIX) or any(c in self.text for c in WILDCARD_CHARS)


def parse(spec: str | list[str], is_name: Callable[[str], bool]) -> list[Term]:
    """The terms of `spec` (a string, or items already split): split at `,`, then at `:` unless
    the item is a name (`is_name`); `!`/`&` in front is the operator unless the whole item is a
    name."""
    items = spec.split(",") if isinstance(spec, str) else [str(i) for i in spec]
    terms: list[Term] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        parts = [item] if is_name(item) or item.startswith(REGEX_PREFIX) else item.split(":")
        for part in parts:
            part = part.strip()
            if not part:
                continue
            if part[0] in "!&" and not is_name(part) and len(part) > 1:
                terms.append(Term(part[0], part[1:].strip()))
            else:
                terms.append(Term("", part))
    return terms


def matcher(text: str) -> Callable[[str], bool]:
    """A wildcard or `~regex` as a test on names (Ansible: fnmatch anchored at both ends,
    a regular expression anchored at the start)."""
    if text.startswith(REGEX_PREFIX):
        try:
            rx = re.compile(text[len(REGEX_PREFIX):])
        except re.error as exc:
            raise PatternError(f"'{text}' is not a valid regular expression ({exc})") from None
        return lambda name: rx.match(name) is not None
    rx = re.compile(fnmatch.translate(text))
    return lambda name: rx.match(name) is not None


def evaluate(terms: list[Term], resolve: Callable[[Term], list[str]],
             everything: Callable[[], list[str]]) -> list[str]:
    """Host names of `terms` in first-selected order: plain terms united, then `&`, then `!`.
    `resolve` gives one term's hosts (raising for a term that selects nothing); `everything`
    is `all`, the start of a pattern without plain terms."""
    if not terms:
        raise PatternError("the pattern has no terms")
    plain = [t for t in terms if not t.op]
    chosen: list[str] = []
    for term in plain:
        chosen.extend(h for h in resolve(term) if h not in chosen)
    if not plain:
        chosen = list(everything())
    for term in (t for t in terms if t.op == "&"):
        keep = set(resolve(term))
        chosen = [h for h in chosen if h in keep]
    for term in (t for t in terms if t.op == "!"):
        drop = set(resolve(term))
        chosen = [h for h in chosen if h not in drop]
    return chosen
