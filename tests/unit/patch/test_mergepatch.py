"""JSON merge patch as kube-apiserver applies it (evanphx/json-patch v4 MergePatch)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.apimachinery.errors import StatusError
from apiserver.apimachinery.patch.mergepatch import (
    decode_merge_patch,
    json_merge_patch,
    merge_patch,
)

# RFC 7386 appendix A, minus the scalar/null patches (kube refuses those, see below).
RFC_VECTORS = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("doc", "patch", "expected"), RFC_VECTORS)
def test_rfc7386_vectors(doc: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(doc, patch) == expected


@pytest.mark.parametrize("patch", [None, "bar", 5, True])
def test_scalar_or_null_patch_is_400_invalid_json_patch(patch: Any) -> None:
    with pytest.raises(StatusError) as caught:
        merge_patch({"a": "foo"}, patch)
    assert (caught.value.code, caught.value.reason, caught.value.message) == (
        400,
        "BadRequest",
        "Invalid JSON Patch",
    )


def test_input_not_modified() -> None:
    doc = {"a": {"b": 1}}
    merge_patch(doc, {"a": {"b": None, "c": 2}})
    assert doc == {"a": {"b": 1}}


def test_added_values_lose_nulls_including_array_items() -> None:
    assert merge_patch({}, {"b": [None, {"c": None, "d": 1}]}) == {"b": [{"d": 1}]}
    assert merge_patch({"a": 1}, {"a": [1, None]}) == {"a": [1]}


def test_array_replacing_an_object_keeps_nulls() -> None:
    assert merge_patch({"a": {"x": 1}}, {"a": [1, None]}) == {"a": [1, None]}


def test_null_member_in_document_is_treated_as_missing() -> None:
    assert merge_patch({"a": None}, {"a": {"b": None, "c": 1}}) == {"a": {"c": 1}}


def test_array_patch_replaces_document_without_nulls() -> None:
    assert merge_patch({"a": 1}, [1, None, {"b": None}]) == [1, {}]


def test_typical_event_patch() -> None:
    event = {
        "metadata": {"name": "e", "labels": {"a": "1", "b": "2"}},
        "series": {"count": 2, "lastObservedTime": "2024-01-01T00:00:00.000000Z"},
        "note": "x",
    }
    patch = {"metadata": {"labels": {"a": None, "c": "3"}}, "series": {"count": 3}}
    assert merge_patch(event, patch) == {
        "metadata": {"name": "e", "labels": {"b": "2", "c": "3"}},
        "series": {"count": 3, "lastObservedTime": "2024-01-01T00:00:00.000000Z"},
        "note": "x",
    }


def test_decode_errors_with_warn() -> None:
    with pytest.raises(StatusError) as caught:
        decode_merge_patch(b'{"a":')
    assert caught.value.message == "error decoding patch: unexpected end of JSON input"
    with pytest.raises(StatusError) as caught:
        decode_merge_patch(b"[1]")
    assert caught.value.message == (
        "error decoding patch: json: cannot unmarshal array into Go value of type "
        "map[string]interface {}"
    )
    with pytest.raises(StatusError) as caught:
        json_merge_patch({}, b"null")
    assert caught.value.message == "Invalid JSON Patch"


def test_decode_errors_with_ignore() -> None:
    with pytest.raises(StatusError) as caught:
        decode_merge_patch(b'{"a":', validation="Ignore")
    assert caught.value.message == "Invalid JSON Patch"
    assert json_merge_patch({"a": 1}, b"[1]", validation="Ignore") == ([1], [])


def test_duplicate_keys_are_strict_problems() -> None:
    patch, problems = decode_merge_patch(b'{"a":1,"a":2,"m":{"x":1,"x":2}}')
    assert patch == {"a": 2, "m": {"x": 2}}
    assert problems == ['duplicate field "a"', 'duplicate field "m.x"']
    assert decode_merge_patch(b'{"a":1,"a":2}', validation="Ignore")[1] == []
