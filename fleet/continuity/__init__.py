"""fleet.continuity: the host-side continuity core (standard library only, Python 3.9+).

`document` (CURRENT_STATE.md), `tokens` (budgets), `snapshot` and `history` (what is injected),
`paths` (OpenClaw workspaces and session keys), `store` (locked, atomic writes), `schema` (config).
"""
