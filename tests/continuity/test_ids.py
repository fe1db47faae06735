"""The host side's random ids are the ids `uuid.uuid4()` makes: same text, same version and
variant, never the same twice."""

from __future__ import annotations

import uuid

from fleet.continuity import ids


def test_uuid4_is_a_version_4_uuid_in_the_standard_text():
    for _ in range(200):
        text = ids.uuid4()
        parsed = uuid.UUID(text)
        assert str(parsed) == text  # lowercase, 8-4-4-4-12
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_uuid4_hex_is_the_same_id_without_dashes():
    for _ in range(200):
        text = ids.uuid4_hex()
        parsed = uuid.UUID(hex=text)
        assert parsed.hex == text and len(text) == 32
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_ids_do_not_repeat():
    made = [ids.uuid4() for _ in range(5000)] + [ids.uuid4_hex() for _ in range(5000)]
    assert len(set(made)) == len(made)
