"""JSON nested past the fast parsers' limits (issue 17; docs/hostile-input.md): the
iterative reader (apiserver.gocompat.deepjson) and the helpers' explicit-stack fallbacks
give what the fast paths give, up to Go's 10,000 levels, and Go's scanner text beyond."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.apimachinery.schema import STRING, Field, Map, Struct
from apiserver.apimachinery.strict import ANY, loads_pairs, strict_errors_in
from apiserver.gocompat import deepjson
from apiserver.gocompat.jsonscan import go_json_syntax_error
from apiserver.gocompat.jsonvalues import Pairs, deep_copy, rebuild, to_plain
from apiserver.gocompat.marshal import _marshal_deep, go_marshal

DEPTHS = [999, 1025, 5000, 10000]


def nested(depth: int, leaf: str = '"x"') -> bytes:
    """``depth`` objects in all, one inside the other."""
    return ('{"a":' * depth + leaf + "}" * depth).encode()


def arrays(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def depth_of(value: Any) -> int:
    levels = 0
    while isinstance(value, dict | list | Pairs):
        levels += 1
        if isinstance(value, Pairs):
            value = value.items[0][1] if value.items else None
        elif isinstance(value, dict):
            value = value.get("a")
        else:
            value = value[0] if value else None
    return levels


@pytest.mark.parametrize("depth", DEPTHS)
def test_reads_up_to_gos_limit(depth: int) -> None:
    assert depth_of(deepjson.loads(nested(depth))) == depth
    assert depth_of(deepjson.loads(arrays(depth))) == depth
    assert depth_of(deepjson.loads(nested(depth), pairs=True)) == depth


def test_a_large_input_is_refused_before_it_is_read() -> None:
    """A big body inside deep nesting would hold the reactor: over MAX_INPUT_BYTES it is
    refused with the max-depth text (a deliberate difference from Go, which reads it)."""
    filler = b"1," * (deepjson.MAX_INPUT_BYTES // 2)
    with pytest.raises(deepjson.DeepJSONError) as caught:
        deepjson.loads(b"[" * 1100 + filler + b"1" + b"]" * 1100)
    assert str(caught.value) == "invalid character '[' exceeded max depth"
    # The same document under the bound is read.
    small = b"[" * 1100 + b"1," * 1000 + b"1" + b"]" * 1100
    assert depth_of(deepjson.loads(small)) == 1100


@pytest.mark.parametrize("depth", [10001, 30000])
def test_past_gos_limit_is_its_scanner_error(depth: int) -> None:
    with pytest.raises(deepjson.DeepJSONError) as caught:
        deepjson.loads(nested(depth))
    assert str(caught.value) == "invalid character '{' exceeded max depth"
    with pytest.raises(deepjson.DeepJSONError) as caught:
        deepjson.loads(arrays(depth), pairs=True)
    assert str(caught.value) == "invalid character '[' exceeded max depth"
    # The Go scanner used for every other error text counts the same way.
    assert go_json_syntax_error(nested(depth)) == "invalid character '{' exceeded max depth"
    assert go_json_syntax_error(nested(10000)) is None


@pytest.mark.parametrize(
    "document",
    [
        b"{}",
        b"[]",
        b' {"a": [1, 2.5, -3e2, "x\\u00e9\\n", true, false, null, {}, []], "b": {"c": 1}} ',
        b'{"a": 1, "a": 2}',
        b'"s"',
        b"12345678901234567890123",
        b"[1,]",
        b'{"a":1,}',
        b'{"a" 1}',
        b"[1 2]",
        b'{"a":1}}',
        b"",
        b"tru",
        b"[01]",
        b'"\xff"',
        b"[1e]",
        b"{1:2}",
        b'{"a":}',
    ],
)
def test_same_values_and_refusals_as_the_fast_parsers(document: bytes) -> None:
    # (Python's json reads NaN, which Go and this reader refuse: not compared.)
    for pairs, fast in ((False, orjson.loads), (True, _pairs_loads)):
        try:
            expected = fast(document)
        except ValueError:
            with pytest.raises(deepjson.DeepJSONError) as caught:
                deepjson.loads(document, pairs=pairs)
            assert str(caught.value) == (
                go_json_syntax_error(document) or "unexpected end of JSON input"
            )
            continue
        assert deepjson.loads(document, pairs=pairs) == expected


def _pairs_loads(document: bytes) -> Any:
    return json.loads(document, object_pairs_hook=Pairs)


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_JSON)
def test_any_document_reads_as_orjson_reads_it(value: Any) -> None:
    document = orjson.dumps(value)
    assert deepjson.loads(document) == orjson.loads(document)


@given(_JSON)
def test_iterative_helpers_match_the_recursive_ones(value: Any) -> None:
    assert rebuild(value) == value
    assert _marshal_deep(value, True) == go_marshal(value)
    assert _marshal_deep(value, False) == go_marshal(value, sort_keys=False)


@pytest.mark.parametrize("depth", DEPTHS)
def test_helpers_handle_deep_values(depth: int) -> None:
    inner = depth - 2  # and the leaf object and its array: ``depth`` levels in all
    value = deepjson.loads(nested(inner, '{"n":null,"k":[null,1]}'))
    assert depth_of(deep_copy(value)) == inner + 1
    pruned = rebuild(value, drop_nulls=True)
    leaf = pruned
    while "a" in leaf:
        leaf = leaf["a"]
    assert leaf == {"k": [1]}
    assert go_marshal(value) == nested(inner, '{"k":[null,1],"n":null}').decode()
    pairs = deepjson.loads(nested(inner, '{"b":1,"b":2}'), pairs=True)
    assert go_marshal(to_plain(pairs)) == nested(inner, '{"b":2}').decode()


def test_deep_pairs_fall_back_from_json_recursion() -> None:
    value = loads_pairs(nested(5000))
    assert isinstance(value, Pairs) and depth_of(value) == 5000
    with pytest.raises(ValueError, match="exceeded max depth"):
        loads_pairs(nested(10001))


@pytest.mark.parametrize("depth", DEPTHS)
def test_strict_walk_goes_past_the_recursion_limit(depth: int) -> None:
    # interface{} values are looked into for duplicate keys at any depth (patch bodies).
    body = b'{"spec":' + nested(depth - 2, '{"k":1,"k":2}') + b',"spec":1}'
    problems = strict_errors_in(loads_pairs(body), ANY)
    assert problems == [
        'duplicate field "spec' + ".a" * (depth - 2) + '.k"',
        'duplicate field "spec"',
    ]
    # A typed walk stops at an unknown field, whatever lies below it.
    typ = Struct("Thing", (Field("name", STRING), Field("labels", Map(STRING))))
    body = b'{"name":"n","extra":' + nested(depth - 1) + b',"labels":{"a":"b","a":"c"}}'
    assert strict_errors_in(loads_pairs(body), typ) == [
        'unknown field "extra"',
        'duplicate field "labels.a"',
    ]
