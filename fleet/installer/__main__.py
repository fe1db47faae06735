"""`python3 -m fleet.installer ...` (from an unpacked release) is the same as running the .pyz.

`supervise --state-dir D` as the fleet manager starts it (supervision.command) goes straight to
the supervisor: a process that lives as long as its gateway needs neither the CLI's parser nor
the installer's modules, which were most of its start-up CPU.
"""

from __future__ import annotations

import sys

from fleet.installer import supervision

_state_dir = supervision.spawned_state_dir(sys.argv[1:])
if _state_dir is not None:
    sys.exit(supervision.main(_state_dir))

from fleet.installer.cli import main  # noqa: E402  (not before: the supervisor needs none of it)

sys.exit(main())
