"""`python3 -m fleet.installer ...` (from an unpacked release) is the same as running the .pyz."""

from __future__ import annotations

import sys

from fleet.installer.cli import main

sys.exit(main())
