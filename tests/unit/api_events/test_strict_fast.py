"""The quick strict check never calls a body clean that the full check finds problems in."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from event_bodies import v1_events
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.api.events.schema import EVENT_V1
from apiserver.apimachinery.patch import strict_errors
from apiserver.apimachinery.strict import find_strict_errors
from apiserver.apimachinery.strict_fast import certainly_clean, no_duplicates

BODY: dict[str, Any] = {
    "apiVersion": "events.k8s.io/v1",
    "kind": "Event",
    "metadata": {
        "name": "e",
        "labels": {"a:b": "c:d"},
        "ownerReferences": [{"uid": "u", "name": "p", "kind": "Pod", "apiVersion": "v1"}],
        "managedFields": [{"manager": "m", "fieldsV1": {"f:x": {}, "f:x:y": {}}}],
    },
    "eventTime": "2024-01-01T00:00:00.000000Z",
    "regarding": {"kind": "Pod", "name": "a:b"},
    "note": 'colons: "::" and {"k": 1}',
}


def quick(raw: bytes) -> bool:
    return certainly_clean(raw, orjson.loads(raw), EVENT_V1)


def full(raw: bytes) -> list[str]:
    return find_strict_errors(raw, EVENT_V1, content_type="json")


@pytest.mark.parametrize("indent", [None, 2])
def test_a_clean_body_is_clean(indent: int | None) -> None:
    raw = json.dumps(BODY, indent=indent).encode()
    assert full(raw) == []
    assert quick(raw)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"kind": "Event"', '"kind": "Event", "kind": "Event"'),  # top-level duplicate
        ('"name": "e"', '"name": "e", "name": "f"'),  # in metadata
        ('"a:b": "c:d"', '"a:b": "c:d", "a:b": "x"'),  # in a map
        ('"uid": "u"', '"uid": "u", "uid": "u"'),  # in a list item
        ('"f:x": {}', '"f:x": {}, "f:x": {}'),  # in opaque fieldsV1: not a problem
        ('"kind": "Event"', '"kind": "Event", "bogus": 1'),  # unknown
        ('"kind": "Pod"', '"kind": "Pod", "bogus": {"a": 1}'),  # unknown in an atomic struct
        ('"uid": "u"', '"uid": "u", "bogus": 1'),  # unknown in a list item
        ('"kind": "Event"', '"kind": "Ev\\u003aent"'),  # an escaped colon: cannot vouch
    ],
)
def test_a_body_with_possible_problems_is_not_clean(old: str, new: str) -> None:
    text = json.dumps(BODY)
    assert old in text
    raw = text.replace(old, new, 1).encode()
    assert not quick(raw)


def test_a_duplicate_balanced_by_an_escaped_colon_is_not_clean() -> None:
    # The dropped member takes one ":" away, the escape would add one back.
    raw = b'{"kind":"Event","kind":"Ev\\u003aent"}'
    assert full(raw) == ['duplicate field "kind"']
    assert not quick(raw)


def test_strict_errors_uses_the_quick_answer_only_when_clean() -> None:
    raw = b'{"kind":"Event","metadata":{"name":"a","name":"b"},"bogus":1}'
    expected = full(raw)
    assert expected == ['duplicate field "metadata.name"', 'unknown field "bogus"']
    assert strict_errors(raw, "json", EVENT_V1, decoded=orjson.loads(raw)) == expected


@st.composite
def json_texts(draw: Any) -> tuple[bytes, bool]:
    """An Event body's JSON, maybe with members written twice; and whether any was."""
    body = draw(v1_events(unknown=True))
    repeated = False

    def dump(value: Any) -> str:
        nonlocal repeated
        if isinstance(value, dict):
            members = [json.dumps(k) + ":" + dump(v) for k, v in value.items()]
            if members and draw(st.integers(0, 9)) == 0:
                index = draw(st.integers(0, len(members) - 1))
                members.insert(index, members[index])
                repeated = True
            return "{" + ",".join(members) + "}"
        if isinstance(value, list):
            return "[" + ",".join(dump(v) for v in value) + "]"
        return json.dumps(value, ensure_ascii=draw(st.booleans()))

    return dump(body).encode(), repeated


@settings(max_examples=500, deadline=None)
@given(json_texts())
def test_clean_means_no_problems(case: tuple[bytes, bool]) -> None:
    raw, repeated = case
    problems = full(raw)
    clean = quick(raw)
    if clean:
        assert problems == []
    if not repeated and not problems:
        # Not only safe but useful: a body without problems or repeats is recognised.
        assert clean
    assert strict_errors(raw, "json", EVENT_V1, decoded=orjson.loads(raw)) == problems


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"kind":"Event","note":"a:b"}', True),  # its own re-encoding: no count needed
        (b'{"kind": "Event", "note": "a:b"}', True),  # spaces: counted
        (b'{"kind":"Event","note":"a","note":"b"}', False),
        (b'{"kind":"Event","note":"a:b","note":"b"}', False),
        (b'{"note":"a\\u003a","note":"b"}', False),
    ],
)
def test_no_duplicates(raw: bytes, expected: bool) -> None:
    assert no_duplicates(raw, orjson.loads(raw)) is expected
