"""Strict decoding problems and Go's JSON error texts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apiserver.api.events.schema import (
    EVENT_CORE_V1,
    EVENT_V1,
    OBJECT_META,
    OBJECT_REFERENCE,
    OWNER_REFERENCE,
)
from apiserver.apimachinery.schema import List, Map, Struct, go_normalize
from apiserver.apimachinery.strict import (
    MAX_STRICT_ERRORS,
    find_strict_errors,
    find_unknown_fields,
    yaml_duplicate_key_error,
)
from apiserver.gocompat.jsonscan import go_json_syntax_error
from apiserver.gocompat.marshal import go_marshal


def problems(body: Any, schema: Struct = EVENT_V1) -> list[str]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return find_strict_errors(raw, schema, content_type="json")


def test_clean_event_has_no_problems() -> None:
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e", "labels": {"a": "b"}, "ownerReferences": [{"uid": "u"}]},
        "eventTime": "2024-01-01T00:00:00.000000Z",
        "regarding": {"kind": "Pod"},
        "series": {"count": 2, "lastObservedTime": "2024-01-01T00:00:00.000000Z"},
        "deprecatedSource": {"component": "x"},
    }
    assert problems(body) == []


def test_unknown_fields_with_paths() -> None:
    body = {
        "metadata": {"labelz": {"a": "b"}, "ownerReferences": [{"uid": "u"}, {"uid": "v", "x": 1}]},
        "foo": {"nested": 1},
        "regarding": {"bar": 2},
    }
    assert problems(body) == [
        'unknown field "metadata.labelz"',
        'unknown field "metadata.ownerReferences[1].x"',
        'unknown field "foo"',
        'unknown field "regarding.bar"',
    ]


def test_duplicates_in_document_order() -> None:
    raw = b'{"note":"a","metadata":{"name":"x","name":"y","labels":{"k":"1","k":"2"}},"note":"b"}'
    assert problems(raw) == [
        'duplicate field "metadata.name"',
        'duplicate field "metadata.labels.k"',
        'duplicate field "note"',
    ]


def test_duplicate_value_is_looked_into_unknown_value_is_not() -> None:
    raw = b'{"regarding":{},"regarding":{"zzz":1},"foo":{"foo":1},"foo":2}'
    assert problems(raw) == [
        'duplicate field "regarding"',
        'unknown field "regarding.zzz"',
        'unknown field "foo"',
    ]


def test_case_sensitive() -> None:
    assert problems({"Note": "x"}) == ['unknown field "Note"']


def test_opaque_types_are_not_looked_into() -> None:
    body = {
        "eventTime": {"x": 1},
        "metadata": {"managedFields": [{"manager": "m", "fieldsV1": {"f:x": {}}}]},
    }
    assert problems(body) == []


def test_core_v1_field_names() -> None:
    assert problems({"note": "x", "message": "y"}, EVENT_CORE_V1) == ['unknown field "note"']


def test_at_most_100_problems() -> None:
    body = {f"f{i:03d}": i for i in range(150)}
    found = problems(body)
    assert len(found) == MAX_STRICT_ERRORS
    assert found[0] == 'unknown field "f000"'


def test_invalid_json_reports_nothing_here() -> None:
    assert problems(b'{"a":') == []


def test_yaml_duplicates_then_sorted_unknowns() -> None:
    raw = b"zzz: 1\nmetadata:\n  name: a\n  name: b\nnote: x\nfoo: 2\nnote: y\n"
    assert find_strict_errors(raw, EVENT_V1, content_type="yaml") == [
        "error converting YAML to JSON: yaml: unmarshal errors:\n"
        '  line 4: key "name" already set in map\n'
        '  line 7: key "note" already set in map',
        'unknown field "foo"',
        'unknown field "zzz"',
    ]


def test_yaml_duplicate_keys_of_other_types() -> None:
    raw = b"metadata:\n  labels:\n    1: a\n    1: b\n    true: x\n    yes: y\n"
    assert yaml_duplicate_key_error(raw) == (
        "error converting YAML to JSON: yaml: unmarshal errors:\n"
        "  line 4: key 1 already set in map\n"
        "  line 6: key true already set in map"
    )


def test_yaml_without_problems() -> None:
    raw = b"apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:\n  name: a\nnote: hi\n"
    assert find_strict_errors(raw, EVENT_V1, content_type="yaml") == []


def test_find_unknown_fields_sorts_keys() -> None:
    assert find_unknown_fields({"zz": 1, "aa": 2, "note": "x"}, EVENT_V1) == [
        'unknown field "aa"',
        'unknown field "zz"',
    ]


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"", "unexpected end of JSON input"),
        (b"   ", "unexpected end of JSON input"),
        (b'{"a":1', "unexpected end of JSON input"),
        (b"x", "invalid character 'x' looking for beginning of value"),
        (b'{"a":1,}', "invalid character '}' looking for beginning of object key string"),
        (b'{"a" 1}', "invalid character '1' after object key"),
        (b'{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
        (b"[1 2]", "invalid character '2' after array element"),
        (b"{} {}", "invalid character '{' after top-level value"),
        (b"tru", "invalid character ' ' in literal true (expecting 'e')"),
        (b"nulx", "invalid character 'x' in literal null (expecting 'l')"),
        (b"-x", "invalid character 'x' in numeric literal"),
        (b"1.x", "invalid character 'x' after decimal point in numeric literal"),
        (b"1ex", "invalid character 'x' in exponent of numeric literal"),
        (b'"\\q"', "invalid character 'q' in string escape code"),
        (b'"\\u00zz"', "invalid character 'z' in \\u hexadecimal character escape"),
        (b'"a\nb"', "invalid character '\\n' in string literal"),
        (b"'a'", "invalid character '\\'' looking for beginning of value"),
        (b"NaN", "invalid character 'N' looking for beginning of value"),
        (b'{"a":[1,{"b":null}],"c":-0.5e+10}', None),
    ],
)
def test_go_json_syntax_errors(raw: bytes, error: str | None) -> None:
    assert go_json_syntax_error(raw) == error


def test_go_marshal() -> None:
    value = {"b": [1, 2.5, 1e21, 1e-7, None, True], "a": "<&>\u2028\x01é"}
    assert go_marshal(value) == (
        '{"a":"\\u003c\\u0026\\u003e\\u2028\\u0001é","b":[1,2.5,1e+21,1e-7,null,true]}'
    )
    assert go_marshal({"b": 1, "a": 2}, sort_keys=False) == '{"b":1,"a":2}'


def test_go_normalize_matches_go_struct_round_trip() -> None:
    assert go_normalize({"note": "", "unknown": 1, "deprecatedCount": 0}, EVENT_V1) == {
        "metadata": {"creationTimestamp": None},
        "eventTime": None,
        "regarding": {},
        "deprecatedSource": {},
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
    }
    core = go_normalize({}, EVENT_CORE_V1)
    assert core["reportingComponent"] == "" and core["reportingInstance"] == ""
    assert core["involvedObject"] == {} and "series" not in core


# --- the hand-written schema against the published OpenAPI document -------------------------

OPENAPI = Path(__file__).resolve().parents[2] / "reference" / "events-v1-openapi.json"


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    schemas: dict[str, Any] = json.loads(OPENAPI.read_text())["components"]["schemas"]
    return schemas


@pytest.mark.parametrize(
    ("name", "struct", "removed_since"),
    [
        ("io.k8s.api.events.v1.Event", EVENT_V1, set()),
        ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", OBJECT_META, {"clusterName"}),
        ("io.k8s.api.core.v1.ObjectReference", OBJECT_REFERENCE, set()),
        ("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference", OWNER_REFERENCE, set()),
    ],
)
def test_schema_matches_openapi(
    openapi: dict[str, Any], name: str, struct: Struct, removed_since: set[str]
) -> None:
    definition = openapi[name]
    assert struct.field_names() == set(definition["properties"]) - removed_since
    assert struct.atomic == (definition.get("x-kubernetes-map-type") == "atomic")
    for field_name, prop in definition["properties"].items():
        field = struct.field(field_name)
        if field is None:
            continue
        if prop.get("type") == "array":
            assert isinstance(field.type, List)
            assert field.type.patch_strategy == prop.get("x-kubernetes-patch-strategy", "")
            assert field.type.patch_merge_key == prop.get("x-kubernetes-patch-merge-key", "")
        if "additionalProperties" in prop:
            assert isinstance(field.type, Map)
