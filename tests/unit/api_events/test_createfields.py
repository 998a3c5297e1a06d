"""The memo of a create's managedFields agrees with the general computation."""

from __future__ import annotations

import copy
from typing import Any

from event_bodies import similar_v1_events, v1_events
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.api.events import convert
from apiserver.api.events.createfields import CreateManagedFields, shape
from apiserver.api.events.schema import EVENT_V1

API = "events.k8s.io/v1"
T1 = "2025-01-01T00:00:00Z"
T2 = "2025-06-01T12:34:56Z"


def memo(size: int = 1024) -> CreateManagedFields:
    return CreateManagedFields(API, EVENT_V1, convert.internal_to_v1, size=size)


def created(body: dict[str, Any], name: str = "e1") -> dict[str, Any]:
    """The internal object a create stores, before its managedFields."""
    internal = convert.v1_to_internal(body)
    meta = internal["metadata"]
    meta.pop("managedFields", None)
    meta.setdefault("name", name)
    meta["namespace"] = "ns1"
    meta["uid"] = "00000000-0000-4000-8000-000000000001"
    meta["creationTimestamp"] = T1
    return internal


BASE: dict[str, Any] = {
    "metadata": {"generateName": "b-", "labels": {"app": "web"}},
    "eventTime": "2025-01-01T00:00:00.000000Z",
    "reportingController": "example.com/c",
    "reportingInstance": "i-1",
    "action": "Act",
    "reason": "Why",
    "type": "Normal",
    "regarding": {"kind": "Pod", "namespace": "ns1", "name": "p-1"},
    "note": "hello",
}


def agreed(fields: CreateManagedFields, obj: dict[str, Any], manager: str, now: str) -> Any:
    """The memo's entries, checked against the general computation (on a copy of ``obj``)."""
    got = fields.entries(obj, manager, now)
    assert got == fields.compute(copy.deepcopy(obj), manager, now)
    return got


def test_a_hit_equals_the_computation_at_its_own_time() -> None:
    fields = memo()
    first = created(BASE, "b-aaaaa")
    agreed(fields, first, "kubectl", T1)
    other = copy.deepcopy(BASE)
    other["note"] = "another note"
    other["regarding"]["name"] = "p-2"
    other["metadata"]["labels"]["app"] = "db"
    second = created(other, "b-bbbbb")
    assert shape(second) == shape(first)
    assert agreed(fields, second, "kubectl", T2)[0]["time"] == T2
    assert len(fields) == 1


def test_what_the_set_names_is_part_of_the_shape() -> None:
    changes = (
        lambda b: b["metadata"]["labels"].update(tier="x"),  # another label key
        lambda b: b["metadata"].pop("labels"),
        lambda b: b.pop("note"),
        lambda b: b.update(note=""),  # empty: omitted, like a missing one
        lambda b: b.update(related={"kind": "Node"}),
        lambda b: b.update(series={"count": 2, "lastObservedTime": b["eventTime"]}),
        lambda b: b["metadata"].update(finalizers=["f1"]),
        lambda b: b["metadata"].update(finalizers=["f2"]),
    )
    fields = memo()
    agreed(fields, created(BASE), "m", T1)
    for change in changes:
        body = copy.deepcopy(BASE)
        change(body)
        agreed(fields, created(body), "m", T1)
    # Every change but the empty note (same shape as no note) made a shape of its own.
    assert len(fields) == len(changes)


def test_empty_values_have_shapes_of_their_own() -> None:
    """Objects built in code need not be canonical: an empty value is omitted, a set one is
    not, so emptiness is part of the shape even where decoding never leaves one."""
    fields = memo()
    for note, count in (("x", 3), ("", 3), ("x", 0)):
        obj = created(BASE)
        obj["message"] = note
        obj["count"] = count
        agreed(fields, obj, "m", T1)
    assert len(fields) == 3


def test_the_manager_is_part_of_the_key() -> None:
    fields = memo()
    obj = created(BASE)
    agreed(fields, obj, "a", T1)
    assert agreed(fields, obj, "b", T1)[0]["manager"] == "b"


def test_managed_fields_in_the_body_take_the_general_path() -> None:
    fields = memo()
    obj = created(BASE)
    obj["metadata"]["managedFields"] = [
        {
            "manager": "other",
            "operation": "Update",
            "apiVersion": API,
            "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:note": {}, "f:deprecatedCount": {}},
        }
    ]
    assert len(agreed(fields, obj, "m", T2)) == 2
    assert len(fields) == 0


def test_entries_are_fresh_objects() -> None:
    fields = memo()
    obj = created(BASE)
    agreed(fields, obj, "m", T1)
    fields.entries(obj, "m", T1)[0]["fieldsV1"]["f:note"]["mutated"] = {}
    agreed(fields, obj, "m", T1)


def test_the_memo_is_bounded() -> None:
    fields = memo(size=2)
    for key in ("a", "b", "c", "d"):
        body = copy.deepcopy(BASE)
        body["metadata"]["labels"] = {key: "v"}
        agreed(fields, created(body), "m", T1)
    assert len(fields) == 2


def agree_on_all(bodies: list[dict[str, Any]], manager: str) -> None:
    """Bodies through one memo, each twice (the second time a hit for sure)."""
    fields = memo()
    for index, body in enumerate(bodies):
        try:
            obj = created(body, f"e{index}")
        except convert.DecodeError:
            continue
        now = T1 if index % 2 else T2
        agreed(fields, obj, manager, now)
        agreed(fields, obj, manager, now)


@settings(max_examples=300, deadline=None)
@given(st.lists(v1_events(), min_size=1, max_size=8), st.sampled_from(["m", "kubectl"]))
def test_memo_agrees_with_the_computation(bodies: list[dict[str, Any]], manager: str) -> None:
    """Objects of varied and repeated shapes: hits and misses both agree."""
    agree_on_all(bodies, manager)


@settings(max_examples=300, deadline=None)
@given(similar_v1_events())
def test_memo_agrees_on_near_misses(bodies: list[dict[str, Any]]) -> None:
    """Bodies one small edit apart: a hit only where the set would be the same."""
    agree_on_all(bodies, "m")
