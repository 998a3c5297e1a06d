"""new_uuid: canonical random version-4 UUIDs, never repeated."""

from __future__ import annotations

import uuid

from apiserver.apimachinery import uid


def test_new_uuid_is_a_canonical_version_4_uuid() -> None:
    for _ in range(1000):
        text = uid.new_uuid()
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_new_uuid_does_not_repeat_across_refills() -> None:
    seen = {uid.new_uuid() for _ in range(3 * uid._BATCH // 16 + 7)}
    assert len(seen) == 3 * uid._BATCH // 16 + 7
