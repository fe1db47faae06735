"""The `=== CONTINUITY RECOVERY ===` block injected at agent start, bounded.

The original plugin injected only each section's first line and applied no cap; we inject whole
sections, so every section has a token budget and the whole block one more, keeping the prompt
cost bounded.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from .document import StateDocument, is_meaningful
from .tokens import estimate_tokens, truncate_tokens

BEGIN = "=== CONTINUITY RECOVERY ==="
END = "=== END RECOVERY ==="
OBJECTIVE_BUDGET = 300
SECTION_BUDGET = 200
BLOCK_BUDGET = 1200
_MIN_SECTION_BUDGET = 20
INDENT = "  "

# (section, label, value shown when the section is empty)
_FIELDS = (
    ("Objective", "Objective", ""),
    ("Current Step", "Current Step", "unknown"),
    ("Key Decisions", "Key Decisions", "None"),
    ("Next Action", "Next Action", "unknown"),
    ("Blockers", "Blockers", "None"),
    ("Unsurfaced Results", "Unsurfaced Results", "None"),
)


def format_field(label: str, value: str) -> str:
    """`Label: first line`, further lines indented under it so none can pose as a marker line."""
    lines = value.split("\n")
    out = [f"{label}: {lines[0]}"]
    out.extend(INDENT + line if line else "" for line in lines[1:])
    return "\n".join(out)


def _render(values: List[Tuple[str, str]], stamp: str) -> str:
    lines = [BEGIN]
    lines.extend(format_field(label, value) for label, value in values)
    lines.append(f"Last Updated: {stamp}")
    lines.append(END)
    return "\n".join(lines)


def build_snapshot(
    doc: StateDocument,
    block_budget: int = BLOCK_BUDGET,
    objective_budget: int = OBJECTIVE_BUDGET,
    section_budget: int = SECTION_BUDGET,
) -> Optional[str]:
    """The recovery block, or None when the Objective is not meaningful (nothing to recover)."""
    objective = doc.get("Objective")
    if not is_meaningful(objective):
        return None
    values: List[Tuple[str, str]] = []
    for section, label, empty in _FIELDS:
        raw = doc.get(section) or empty
        budget = objective_budget if section == "Objective" else section_budget
        values.append((label, truncate_tokens(raw, budget)))
    stamp = doc.last_updated or "unknown"
    stamp = truncate_tokens(stamp.split("\n")[0], 20)
    block = _render(values, stamp)
    # Over the block budget: shrink the largest non-Objective value until it fits.
    for _ in range(4 * len(values)):
        excess = estimate_tokens(block) - block_budget
        if excess <= 0:
            break
        idx = max(range(1, len(values)), key=lambda i: estimate_tokens(values[i][1]))
        label, value = values[idx]
        current = estimate_tokens(value)
        if current <= _MIN_SECTION_BUDGET:
            idx = 0
            label, value = values[0]
            current = estimate_tokens(value)
        target = max(_MIN_SECTION_BUDGET, current - excess - 2)
        if target >= current:
            break
        values[idx] = (label, truncate_tokens(value, target))
        block = _render(values, stamp)
    return block
