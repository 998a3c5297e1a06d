"""The built encoders of :mod:`apiserver.api.events.convert` write what a plain walk of the
type model writes (the walk below is the reference: Go's encoding/json rules, spelt out)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from event_bodies import v1_events
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.api.events import convert as c


def reference(value: Any, typ: Any) -> Any:
    """Go's encoding of ``value`` as ``typ``, one value at a time."""
    if isinstance(typ, c._Ptr):
        return None if value is None else reference(value, typ.elem)
    if isinstance(typ, c._Struct):
        source = value or {}
        out: dict[str, Any] = {}
        for f in typ.fields:
            item = source.get(f.name)
            never_omitted = isinstance(f.type, c._Struct | c._Time) or not f.omitempty
            if not never_omitted:
                if isinstance(f.type, c._Ptr) and item is None:
                    continue
                if not isinstance(f.type, c._Ptr) and not item:
                    continue
            if item is not None:
                out[f.name] = reference(item, f.type)
            elif isinstance(f.type, c._Struct):
                out[f.name] = reference({}, f.type)
            else:
                out[f.name] = c._zero_of(f.type)
        return out
    if isinstance(typ, c._List):
        return None if value is None else [reference(item, typ.elem) for item in value]
    if isinstance(typ, c._Map):
        return None if value is None else dict(value)
    if isinstance(typ, c._Time):
        return value or None
    return value


def reference_v1(obj: dict[str, Any], type_meta: bool) -> dict[str, Any]:
    wire = {c.INTERNAL_TO_V1[k]: v for k, v in obj.items() if k in c.INTERNAL_TO_V1}
    if type_meta:
        wire.update(kind="Event", apiVersion="events.k8s.io/v1")
    result: dict[str, Any] = reference(wire, c.V1_EVENT)
    return result


def reference_core(obj: dict[str, Any], type_meta: bool) -> dict[str, Any]:
    wire = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    if type_meta:
        wire.update(kind="Event", apiVersion="v1")
    result: dict[str, Any] = reference(wire, c.CORE_EVENT)
    return result


def same(a: Any, b: Any) -> None:
    """Equal, and in the same key order (the JSON bytes are what clients see)."""
    assert orjson.dumps(a) == orjson.dumps(b)


# Copied on every draw: a drawn {} or [] is written into objects, never shared between them.
EMPTIES: st.SearchStrategy[object] = st.sampled_from(["", 0, None, {}, [], False]).map(
    copy.deepcopy
)


@st.composite
def internal_events(draw: Any) -> dict[str, Any]:
    """Decoded Events, some with values a decoder never leaves (empty, null, kind/apiVersion)."""
    try:
        obj = c.v1_to_internal(draw(v1_events()))
    except c.DecodeError:
        obj = c.empty_internal({"name": "x"})
    for _ in range(draw(st.integers(0, 3))):
        meta = obj["metadata"]
        node = meta if isinstance(meta, dict) and draw(st.booleans()) else obj
        keys = [*node, "kind", "apiVersion", "series", "related", "labels"]
        node[draw(st.sampled_from(keys))] = draw(EMPTIES)
    return obj


@settings(max_examples=400, deadline=None)
@given(internal_events(), st.booleans())
def test_encoders_agree_with_the_reference(obj: dict[str, Any], type_meta: bool) -> None:
    before = copy.deepcopy(obj)
    same(c.internal_to_v1(obj, include_type_meta=type_meta), reference_v1(obj, type_meta))
    same(c.internal_to_core_v1(obj, include_type_meta=type_meta), reference_core(obj, type_meta))
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        same(c.encode_object_meta(meta), reference(meta, c.OBJECT_META))
    assert obj == before  # encoding never changes its input


def test_encoded_values_are_not_the_stored_ones() -> None:
    """Maps, lists and structs are copied: changing the answer leaves the object alone."""
    obj = c.v1_to_internal(
        {
            "metadata": {"name": "e", "labels": {"a": "b"}, "finalizers": ["f"]},
            "regarding": {"kind": "Pod"},
        }
    )
    out = c.internal_to_v1(obj)
    out["metadata"]["labels"]["x"] = "y"
    out["metadata"]["finalizers"].append("g")
    out["regarding"]["name"] = "p"
    assert obj["metadata"] == {"name": "e", "labels": {"a": "b"}, "finalizers": ["f"]}
    assert obj["involvedObject"] == {"kind": "Pod"}


def test_unset_structs_are_fresh_zero_values() -> None:
    one, two = c.internal_to_v1(c.empty_internal()), c.internal_to_v1(c.empty_internal())
    one["deprecatedSource"]["host"] = "h"
    assert two["deprecatedSource"] == {}
    assert two["regarding"] == {}
