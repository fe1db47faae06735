from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fleet.continuity.schema import validate

MANIFEST = (Path(__file__).resolve().parents[2] / "fleet" / "plugins" / "memory_continuity"
            / "openclaw.plugin.json")
SCHEMA = json.loads(MANIFEST.read_text())["configSchema"]


def test_manifest_has_the_13_anchor_keys_and_the_bridge_keys_with_defaults_and_hints():
    manifest = json.loads(MANIFEST.read_text())
    assert manifest["id"] == "memory-continuity" and manifest["version"] == "5.0.0"
    defaults = validate({}, SCHEMA)
    assert defaults == {
        "maxStateLines": 50, "archiveOnNew": True, "autoExtract": True, "maxArchiveCount": 20,
        "ignorePatterns": [], "sessionLogging": True, "tailProtectCount": 3,
        "summaryEnabled": True, "relevanceInjection": True, "maxRelevanceItems": 3,
        "archiveDecayDays": 30, "subagentSeed": True, "subagentRecovery": True,
        "python": "", "bridgeTimeoutMs": 0,  # read by the OpenClaw entry (bridge.mjs)
    }
    assert set(manifest["uiHints"]) == set(defaults)


def test_given_values_are_kept_and_defaults_fill_the_rest():
    out = validate({"subagentSeed": False, "ignorePatterns": ["^x"]}, SCHEMA)
    assert out["subagentSeed"] is False and out["ignorePatterns"] == ["^x"]
    assert out["archiveOnNew"] is True


@pytest.mark.parametrize(
    "config,key",
    [({"typo": 1}, "typo"), ({"archiveOnNew": "yes"}, "archiveOnNew"),
     ({"maxArchiveCount": -1}, "maxArchiveCount"), ({"ignorePatterns": [3]}, "ignorePatterns[0]"),
     ({"tailProtectCount": True}, "tailProtectCount")],
)
def test_bad_values_name_the_key(config, key):
    with pytest.raises(ValueError, match=re.escape(f"config key '{key}'")):
        validate(config, SCHEMA)
