"""The built decoders of :mod:`apiserver.api.events.convert` decode (and fail) exactly as a plain
walk of the type model does; the walk below is the reference (Go's decoding rules, spelt out:
first type error wins and decoding goes on, a bad time stops it at once)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from event_bodies import ODD, odd_bodies
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.api.events import convert as c
from apiserver.gocompat.jsonvalues import go_json_kind


class Reference(c._Decoder):
    def decode(self, value: Any, typ: Any, struct: str, path: str) -> Any:
        if isinstance(typ, c._Ptr):
            if value is None:
                return None
            inner = self.decode(value, typ.elem, struct, path)
            return c._zero_of(typ.elem) if inner is None else inner
        if value is None:
            return None
        if isinstance(typ, c._Str):
            if isinstance(value, str):
                return value or None
            self.type_error(go_json_kind(value), typ.go_type, struct, path)
            return None
        if isinstance(typ, c._Int):
            if isinstance(value, bool) or not isinstance(value, int | float):
                self.type_error(go_json_kind(value), typ.go_type, struct, path)
                return None
            limit = 1 << (typ.bits - 1)
            if isinstance(value, float) or not -limit <= value < limit:
                self.type_error(f"number {c._number_literal(value)}", typ.go_type, struct, path)
                return None
            return value or None
        if isinstance(typ, c._Bool):
            if isinstance(value, bool):
                return value
            self.type_error(go_json_kind(value), typ.go_type, struct, path)
            return None
        if isinstance(typ, c._Time):
            if not isinstance(value, str):
                raise c.DecodeError(
                    f"json: cannot unmarshal {go_json_kind(value)} into Go struct field "
                    f"{struct}.{path} of type string"
                )
            canonical = c._canonical_time(value, typ.micro)
            if canonical is not None:
                return canonical or None
            t = c.parse_go_time(value, typ.micro)
            if t == c._ZERO:
                return None
            return c.format_micro_time(t) if typ.micro else c.format_time(t)
        if isinstance(typ, c._Raw):
            return value
        if isinstance(typ, c._Map):
            if not isinstance(value, dict):
                self.type_error(go_json_kind(value), typ.go_type, struct, path)
                return None
            # Values of another kind are reported (the first one) and left out; null is "".
            for v in value.values():
                if v is not None and not isinstance(v, str):
                    self.type_error(go_json_kind(v), "string", struct, path)
            kept = {k: v or "" for k, v in value.items() if v is None or isinstance(v, str)}
            return kept or None
        if isinstance(typ, c._List):
            if not isinstance(value, list):
                self.type_error(go_json_kind(value), typ.go_type, struct, path)
                return None
            items = []
            for item in value:
                decoded = self.decode(item, typ.elem, struct, path)
                items.append(c._zero_of(typ.elem) if decoded is None else decoded)
            return items or None
        assert isinstance(typ, c._Struct)
        if not isinstance(value, dict):
            self.type_error(go_json_kind(value), typ.go_type, struct, path)
            return None
        found: dict[str, Any] = {}
        for key, item in value.items():
            f = typ.field(key)
            if f is None:
                continue
            decoded = self.decode(item, f.type, typ.name, f"{path}.{key}" if path else key)
            if decoded is None:
                found.pop(key, None)
            else:
                found[key] = decoded
        ordered = {f.name: found[f.name] for f in typ.fields if f.name in found}
        return ordered or None


def reference(obj: Any, schema: Any) -> dict[str, Any]:
    decoder = Reference()
    result = decoder.decode(obj, schema, "", "") or {}
    if decoder.saved is not None:
        raise decoder.saved
    result_dict: dict[str, Any] = result
    return result_dict


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", orjson.dumps(fn(*args))
    except c.DecodeError as error:
        return "error", error.message


@settings(max_examples=600, deadline=None)
@given(odd_bodies())
def test_decoders_agree_with_the_reference(body: dict[str, Any]) -> None:
    before = copy.deepcopy(body)
    for schema in (c.V1_EVENT, c.CORE_EVENT, c.OBJECT_META):
        expected = outcome(reference, body, schema)
        assert outcome(c._decode, body, schema) == expected
    assert body == before


def test_a_bad_time_wins_over_an_earlier_type_error() -> None:
    body = {"note": 5, "eventTime": 7}
    assert outcome(c.v1_to_internal, body) == (
        "error",
        "json: cannot unmarshal number into Go struct field Event.eventTime of type string",
    )


def test_the_first_type_error_wins_with_its_path() -> None:
    body = {"metadata": {"labels": {"a": 1}, "name": 2}, "note": 3}
    assert outcome(c.v1_to_internal, body) == (
        "error",
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type "
        "string",
    )


@settings(deadline=None)
@given(ODD, st.sampled_from(["controller", "blockOwnerDeletion", "uid", "name"]))
def test_list_items_decode_as_the_reference(value: Any, key: str) -> None:
    body = {"metadata": {"ownerReferences": [{"uid": "u", key: value}, {}]}}
    assert outcome(c._decode, body, c.V1_EVENT) == outcome(reference, body, c.V1_EVENT)


def test_a_number_is_not_a_bool() -> None:
    body = {"metadata": {"ownerReferences": [{"uid": "u", "controller": 1}]}}
    assert outcome(c.v1_to_internal, body) == (
        "error",
        "json: cannot unmarshal number into Go struct field OwnerReference.metadata."
        "ownerReferences.controller of type bool",
    )
