"""ListBodies: reuse by (revision, URI), bounded in entries and bytes, oldest out first."""

from __future__ import annotations

from apiserver.api.events.encoding import ListBodies


def test_a_body_is_found_only_under_its_revision_and_uri() -> None:
    bodies = ListBodies()
    bodies.put((5, b"/apis/x?limit=1"), b"five")
    assert bodies.get((5, b"/apis/x?limit=1")) == b"five"
    assert bodies.get((6, b"/apis/x?limit=1")) is None
    assert bodies.get((5, b"/apis/x?limit=2")) is None


def test_entries_are_bounded_oldest_first() -> None:
    bodies = ListBodies(max_entries=2)
    bodies.put((1, b"a"), b"1")
    bodies.put((2, b"a"), b"2")
    bodies.put((3, b"a"), b"3")
    assert len(bodies) == 2
    assert bodies.get((1, b"a")) is None
    assert bodies.get((3, b"a")) == b"3"


def test_bytes_are_bounded_and_huge_bodies_are_not_kept() -> None:
    bodies = ListBodies(max_bytes=100)
    bodies.put((1, b"a"), b"x" * 20)
    bodies.put((2, b"a"), b"y" * 20)
    bodies.put((3, b"a"), b"z" * 20)
    bodies.put((4, b"a"), b"w" * 20)
    bodies.put((5, b"a"), b"v" * 21)  # 101 bytes would exceed the budget: the oldest goes
    assert bodies.get((1, b"a")) is None
    assert bodies.get((5, b"a")) == b"v" * 21
    assert bodies.get((2, b"a")) == b"y" * 20
    bodies.put((6, b"a"), b"h" * 26)  # more than a quarter of the budget
    assert bodies.get((6, b"a")) is None
