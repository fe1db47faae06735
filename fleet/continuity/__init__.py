"""fleet.continuity: the host-side continuity core (standard library only, Python 3.9+).

`document` (CURRENT_STATE.md), `tokens` (budgets), `snapshot` and `history` (what is injected),
`paths` (OpenClaw workspaces and session keys), `statelayout` (every path fleet uses in a state
dir), `store` (locked, atomic writes), `schema` (config).

"The original plugin" in comments here and in `fleet.plugins` is the JavaScript memory-continuity
plugin (v5.0.1) whose formats this package keeps and whose flaws it fixes; docs/continuity.md
describes both.
"""
