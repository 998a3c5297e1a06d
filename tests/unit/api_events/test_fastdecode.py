"""The generated decoders of usual Event bodies (api/events/fastdecode.py) agree with the
generic decoder and the strict check wherever they answer, and answer for the usual bodies."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from event_bodies import odd_bodies, v1_events
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.api_events.rest_harness import NS_PATH, RestHarness, event

from apiserver.api.events import convert, fastdecode
from apiserver.api.events.schema import EVENT_CORE_V1, EVENT_V1
from apiserver.apimachinery.schema import Struct
from apiserver.apimachinery.strict import find_strict_errors

EVENTS = NS_PATH.format(ns="ns1")

#: (fast decoder, generic decoder, strict schema) of each served version.
VERSIONS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], Struct]] = {
    "v1": (fastdecode.V1, convert.v1_to_internal, EVENT_V1),
    "core": (fastdecode.CORE_V1, convert.core_v1_to_internal, EVENT_CORE_V1),
}


def as_core(body: dict[str, Any]) -> dict[str, Any]:
    """A v1 body with its fields under their core/v1 names (values, odd ones included, kept)."""
    return {convert.V1_TO_INTERNAL.get(key, key): value for key, value in body.items()}


def generic(decode: Callable[[Any], Any], body: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", orjson.dumps(decode(body))
    except convert.DecodeError as error:
        return "error", error.message


def dicts(value: Any) -> set[int]:
    """The ids of every dict in ``value``."""
    if isinstance(value, dict):
        return {id(value)}.union(*(dicts(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(dicts(v) for v in value))
    return set()


def check(version: str, body: dict[str, Any]) -> Any:
    """What the fast decoder answers for ``body``, checked against the generic ways."""
    fast, decode, schema = VERSIONS[version]
    before = copy.deepcopy(body)
    got = fast(body)
    assert body == before
    if got is not None:
        # Same object, same key order (orjson keeps it), and nothing shared with the body.
        assert generic(decode, body) == ("ok", orjson.dumps(got))
        assert not dicts(got) & dicts(body)
        # No unknown field (the raw text has no duplicate: it is re-encoded).
        assert find_strict_errors(orjson.dumps(body), schema, content_type="json") == []
    return got


@settings(max_examples=800, deadline=None)
@given(odd_bodies(), st.sampled_from(sorted(VERSIONS)))
def test_odd_bodies_decode_as_the_generic_decoder_or_go_its_way(
    body: dict[str, Any], version: str
) -> None:
    check(version, as_core(body) if version == "core" else body)


def _usual(body: dict[str, Any]) -> bool:
    """A body the fast decoder must take: no list field, MicroTimes in canonical form (the
    times of :data:`event_bodies.MICRO` that are not: an offset, no fraction digits)."""
    meta = body.get("metadata", {})
    if "finalizers" in meta or "ownerReferences" in meta:
        return False
    series = body.get("series") or {}
    odd = {"2025-01-01T00:00:00.123456+02:00", "2025-03-01T10:00:00Z"}
    return body.get("eventTime") not in odd and series.get("lastObservedTime") not in odd


@settings(max_examples=500, deadline=None)
@given(v1_events(), st.sampled_from(sorted(VERSIONS)))
def test_usual_bodies_take_the_fast_way(body: dict[str, Any], version: str) -> None:
    got = check(version, as_core(body) if version == "core" else body)
    assert (got is not None) == _usual(body)


@pytest.mark.parametrize(
    ("version", "body"),
    [
        ("v1", {"note": "a", "bogus": 1}),  # unknown at the top
        ("v1", {"regarding": {"kind": "Pod", "extra": 1}}),  # unknown in a struct
        ("v1", {"series": {"count": 1, "lastObservedTime": "x", "y": 2}}),
        ("v1", {"metadata": {"finalizers": ["f"]}}),  # a field decoded only the generic way
        ("v1", {"metadata": {"labels": {"a": None}}}),  # null in a map: "" the generic way
        ("v1", {"metadata": {"labels": []}}),  # an empty value of another kind
        ("v1", {"note": 1}),  # type errors
        ("v1", {"deprecatedCount": True}),
        ("v1", {"deprecatedCount": 2**31}),
        ("v1", {"deprecatedCount": 1.0}),
        ("v1", {"eventTime": "2025-01-01T00:00:00.5Z"}),  # a time to parse
        ("v1", {"eventTime": "2025-02-30T00:00:00.000000Z"}),  # a time that does not exist
        ("v1", {"eventTime": "2025-01-01T24:00:00.000000Z"}),
        ("v1", {"eventTime": "2025-01-01T00:60:00.000000Z"}),
        ("v1", {"eventTime": "\u0662025-01-01T00:00:00.000000Z"}),  # a non-ASCII digit
        ("v1", {"deprecatedFirstTimestamp": "2025-01-01T00:00:00.000000Z"}),  # micro for Time
        ("v1", {"eventTime": "0000-01-01T00:00:00.000000Z"}),
        ("v1", {"kind": 1}),
        ("core", {"involvedObject": "Pod"}),
        ("core", {"note": "a"}),  # a v1 name in a core body
        ("v1", {"message": "a"}),  # and a core name in a v1 body
    ],
)
def test_unusual_bodies_go_the_generic_way(version: str, body: dict[str, Any]) -> None:
    assert check(version, body) is None


def test_zero_values_and_nulls_are_dropped_and_structs_kept() -> None:
    body = {
        "kind": "Event",
        "apiVersion": None,
        "metadata": None,
        "note": "",
        "deprecatedCount": 0,
        "deprecatedFirstTimestamp": "0001-01-01T00:00:00Z",
        "series": {},
        "related": None,
        "deprecatedSource": {"host": ""},
    }
    assert check("v1", body) == {
        "metadata": {},
        "involvedObject": {},
        "source": {},
        "series": {},
    }


def test_a_duplicate_key_in_a_usual_body_is_still_found(api: RestHarness) -> None:
    body = json.dumps(event("d1", note="a")).replace('"note": "a"', '"note": "a", "note": "b"')
    reply = api.post(EVENTS, body.encode())
    assert reply.code == 201
    assert reply.all("warning") == ['299 - "duplicate field \\"note\\""']
    assert reply.json()["note"] == "b"
    reply = api.post(EVENTS + "?fieldValidation=Ignore", body.replace("d1", "d2").encode())
    assert reply.code == 201
    assert reply.all("warning") == []


@pytest.fixture
def api() -> RestHarness:
    return RestHarness()
