"""JSON patch as kube-apiserver applies it (evanphx/json-patch v4 through patch.go)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apiserver.apimachinery.errors import StatusError
from apiserver.apimachinery.patch.jsonpatch import (
    REJECTED,
    JSONPatchError,
    apply_json_patch,
    decode_json_patch,
    json_patch,
)


def run(doc: Any, ops: list[dict[str, Any]]) -> Any:
    return apply_json_patch(doc, ops)


# RFC 6902 appendix A vectors (the ones evanphx v4 handles like the RFC).
RFC_VECTORS = [
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"foo": "bar", "baz": "qux"}),
    (
        {"foo": ["bar", "baz"]},
        [{"op": "add", "path": "/foo/1", "value": "qux"}],
        {"foo": ["bar", "qux", "baz"]},
    ),
    ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
    (
        {"baz": "qux", "foo": "bar"},
        [{"op": "replace", "path": "/baz", "value": "boo"}],
        {"baz": "boo", "foo": "bar"},
    ),
    (
        {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
        [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
        {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
    ),
    (
        {"foo": ["all", "grass", "cows", "eat"]},
        [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
        {"foo": ["all", "cows", "eat", "grass"]},
    ),
    (
        {"baz": "qux", "foo": ["a", 2, "c"]},
        [
            {"op": "test", "path": "/baz", "value": "qux"},
            {"op": "test", "path": "/foo/1", "value": 2},
        ],
        {"baz": "qux", "foo": ["a", 2, "c"]},
    ),
    (
        {"foo": "bar"},
        [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
        {"foo": "bar", "child": {"grandchild": {}}},
    ),
    (
        {"foo": ["bar"]},
        [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
        {"foo": ["bar", ["abc", "def"]]},
    ),
    ({"foo": None}, [{"op": "remove", "path": "/foo"}], {}),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10}),
    ({"a/b": 1}, [{"op": "replace", "path": "/a~1b", "value": 2}], {"a/b": 2}),
    (
        {"foo": "bar"},
        [{"op": "copy", "from": "/foo", "path": "/baz"}],
        {"foo": "bar", "baz": "bar"},
    ),
]


@pytest.mark.parametrize(("doc", "ops", "expected"), RFC_VECTORS)
def test_rfc6902_vectors(doc: Any, ops: list[dict[str, Any]], expected: Any) -> None:
    assert run(doc, ops) == expected


def test_input_is_not_modified() -> None:
    doc = {"a": {"b": [1]}}
    run(doc, [{"op": "add", "path": "/a/b/-", "value": 2}])
    assert doc == {"a": {"b": [1]}}


@pytest.mark.parametrize(
    ("doc", "ops"),
    [
        ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}]),
        ({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}]),
        ({"foo": "bar"}, [{"op": "remove", "path": "/nope"}]),
        ({"foo": [1]}, [{"op": "remove", "path": "/foo/5"}]),
        ({"foo": [1]}, [{"op": "add", "path": "/foo/3", "value": 2}]),
        ({"foo": [1]}, [{"op": "replace", "path": "/foo/1", "value": 2}]),
        ({"foo": [1]}, [{"op": "add", "path": "/foo/x", "value": 2}]),
        ({"foo": 1}, [{"op": "frobnicate", "path": "/foo"}]),
        ({"foo": 1}, [{"path": "/foo"}]),
        ({"foo": 1}, [{"op": "add", "path": "", "value": 2}]),
        ({"foo": 1}, [{"op": "replace", "path": "", "value": 2}]),
        ({"foo": 1}, [{"op": "move", "from": "/nope", "path": "/x"}]),
        ({"foo": 1}, [{"op": "test", "path": "/foo", "value": 1.0}]),
        ({"foo": 1}, [{"op": "test", "path": "/foo", "value": True}]),
        ({"foo": {"a": 1}}, [{"op": "test", "path": "/foo", "value": {"a": 1, "b": 2}}]),
        ({"foo": 1}, [{"op": "add", "path": "foo"}]),
    ],
)
def test_failures_are_422_with_the_generic_message(doc: Any, ops: list[dict[str, Any]]) -> None:
    with pytest.raises(StatusError) as caught:
        run(doc, ops)
    error = caught.value
    assert (error.code, error.reason, error.message, error.details) == (
        422,
        "Invalid",
        REJECTED,
        {},
    )
    assert isinstance(error.__cause__, JSONPatchError)


def test_failure_body_matches_kube() -> None:
    with pytest.raises(StatusError) as caught:
        run({"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
    body = json.loads(caught.value.response().body)
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server rejected our request due to an error in our request",
        "reason": "Invalid",
        "details": {},
        "code": 422,
    }


# evanphx v4 quirks that kube-apiserver exposes.


def test_replace_of_missing_member_adds_it() -> None:
    assert run({"a": 1}, [{"op": "replace", "path": "/b", "value": 2}]) == {"a": 1, "b": 2}


def test_path_without_leading_slash_ignores_first_segment() -> None:
    assert run({"a": 1}, [{"op": "add", "path": "x/b", "value": 2}]) == {"a": 1, "b": 2}


def test_negative_indexes() -> None:
    assert run({"l": [1, 2, 3]}, [{"op": "remove", "path": "/l/-1"}]) == {"l": [1, 2]}
    assert run({"l": [1, 2]}, [{"op": "add", "path": "/l/-1", "value": 9}]) == {"l": [1, 2, 9]}
    assert run({"l": [1, 2]}, [{"op": "add", "path": "/l/-3", "value": 9}]) == {"l": [9, 1, 2]}
    assert run({"l": [1, 2]}, [{"op": "replace", "path": "/l/-2", "value": 9}]) == {"l": [9, 2]}


def test_atoi_style_indexes() -> None:
    assert run({"l": [1, 2]}, [{"op": "replace", "path": "/l/+1", "value": 9}]) == {"l": [1, 9]}
    assert run({"l": [1, 2]}, [{"op": "replace", "path": "/l/01", "value": 9}]) == {"l": [1, 9]}


def test_add_at_end_index_and_dash() -> None:
    assert run({"l": [1]}, [{"op": "add", "path": "/l/1", "value": 2}]) == {"l": [1, 2]}
    assert run({"l": []}, [{"op": "add", "path": "/l/-", "value": 2}]) == {"l": [2]}


def test_null_members_count_as_missing_for_traversal_and_test() -> None:
    with pytest.raises(StatusError):
        run({"a": None}, [{"op": "add", "path": "/a/b", "value": 1}])
    assert run({"a": None}, [{"op": "test", "path": "/a", "value": None}]) == {"a": None}
    assert run({}, [{"op": "test", "path": "/missing", "value": None}]) == {}


def test_missing_value_is_null() -> None:
    assert run({}, [{"op": "add", "path": "/a"}]) == {"a": None}


def test_copy_from_missing_copies_null() -> None:
    assert run({}, [{"op": "copy", "from": "/x", "path": "/y"}]) == {"y": None}


def test_replace_whole_document() -> None:
    assert run({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}]) == {"b": 2}


def test_test_whole_document() -> None:
    assert run({"a": 1}, [{"op": "test", "path": "", "value": {"a": 1}}]) == {"a": 1}


def test_copy_is_deep() -> None:
    result = run(
        {"a": {"x": [1]}},
        [
            {"op": "copy", "from": "/a", "path": "/b"},
            {"op": "add", "path": "/b/x/-", "value": 2},
        ],
    )
    assert result == {"a": {"x": [1]}, "b": {"x": [1, 2]}}


def test_operations_apply_in_order_and_all_or_nothing() -> None:
    doc = {"a": 1}
    with pytest.raises(StatusError):
        run(doc, [{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/zzz"}])
    assert doc == {"a": 1}


# decoding


def test_decode_syntax_error_warn_and_ignore() -> None:
    with pytest.raises(StatusError) as caught:
        decode_json_patch(b"[{", validation="Warn")
    assert caught.value.code == 400
    assert caught.value.reason == "BadRequest"
    assert caught.value.message == "error decoding patch: unexpected end of JSON input"
    with pytest.raises(StatusError) as caught:
        decode_json_patch(b"[x]", validation="Ignore")
    assert caught.value.message == "invalid character 'x' looking for beginning of value"


def test_decode_type_errors() -> None:
    with pytest.raises(StatusError) as caught:
        decode_json_patch(b'{"op":"add"}')
    assert caught.value.message == (
        "error decoding patch: json: cannot unmarshal object into Go value of type "
        "[]handlers.jsonPatchOp"
    )
    with pytest.raises(StatusError) as caught:
        decode_json_patch(b'[{"op":5,"path":"/a"}]', validation="Strict")
    assert caught.value.message == (
        "error decoding patch: json: cannot unmarshal number into Go struct field "
        "jsonPatchOp.op of type string"
    )
    with pytest.raises(StatusError) as caught:
        decode_json_patch(b'{"op":"add"}', validation="Ignore")
    assert caught.value.message == (
        "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    )


def test_decode_strict_problems() -> None:
    ops, problems = decode_json_patch(
        b'[{"op":"add","path":"/a","value":{"x":1,"x":2},"foo":1,"op":"add"}]'
    )
    assert ops == [{"op": "add", "path": "/a", "value": {"x": 2}, "foo": 1}]
    assert problems == [
        'json patch duplicate field "[0].value.x"',
        'json patch unknown field "[0].foo"',
        'json patch duplicate field "[0].op"',
    ]
    assert decode_json_patch(b'[{"op":"add","foo":1}]', validation="Ignore")[1] == []


def test_too_many_operations_is_413() -> None:
    raw = json.dumps([{"op": "test", "path": "/a", "value": 1}] * 10001).encode()
    with pytest.raises(StatusError) as caught:
        decode_json_patch(raw)
    assert caught.value.code == 413
    assert caught.value.reason == "RequestEntityTooLarge"
    assert caught.value.message == (
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, "
        "got 10001"
    )
    ops, _ = decode_json_patch(json.dumps([{"op": "test", "path": "/a"}] * 10000).encode())
    assert len(ops) == 10000


def test_null_patch_is_no_operations() -> None:
    assert json_patch({"a": 1}, b"null") == ({"a": 1}, [])
