"""Query-string conversions (apimachinery pkg/runtime/conversion.go, Go's strconv)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.apimachinery.errors import StatusError
from apiserver.apimachinery.queryparams import (
    GoParseIntError,
    query_bool,
    query_int,
    query_str,
    query_values,
)
from apiserver.gocompat.boolparse import go_parse_bool
from apiserver.gocompat.intparse import parse_int as go_parse_int


def q(**params: str | list[str]) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = {}
    for key, value in params.items():
        values = value if isinstance(value, list) else [value]
        out[key.encode()] = [v.encode() for v in values]
    return out


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", False),
        ("false", False),
        ("FALSE", False),
        ("fAlSe", False),
        ("fal\u017fe", False),  # Go's EqualFold folds the long s
        ("", True),
        ("1", True),
        ("true", True),
        ("no", True),
        ("f", True),
        ("00", True),
    ],
)
def test_query_bool(value: str, expected: bool) -> None:
    assert query_bool(q(watch=value), "watch") is expected


def test_query_bool_absent_and_first_value_wins() -> None:
    assert query_bool(q(), "watch") is None
    assert query_bool(q(watch=["false", "true"]), "watch") is False


def test_query_str_and_values() -> None:
    assert query_str(q(a=["x", "y"]), "a") == "x"
    assert query_str(q(), "a") is None
    assert query_values(q(dryRun=["All", "x"]), "dryRun") == ["All", "x"]
    assert query_values(q(), "dryRun") is None
    assert query_str({b"a": [b"\xff"]}, "a") == "\ufffd"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("42", 42),
        ("-7", -7),
        ("+7", 7),
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
        ("007", 7),
    ],
)
def test_go_parse_int_ok(value: str, expected: int) -> None:
    assert go_parse_int(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", 'strconv.ParseInt: parsing "": invalid syntax'),
        ("abc", 'strconv.ParseInt: parsing "abc": invalid syntax'),
        ("1.5", 'strconv.ParseInt: parsing "1.5": invalid syntax'),
        ("-", 'strconv.ParseInt: parsing "-": invalid syntax'),
        (" 1", 'strconv.ParseInt: parsing " 1": invalid syntax'),
        ("1_000", 'strconv.ParseInt: parsing "1_000": invalid syntax'),
        ("0x10", 'strconv.ParseInt: parsing "0x10": invalid syntax'),
        (
            "9223372036854775808",
            'strconv.ParseInt: parsing "9223372036854775808": value out of range',
        ),
        (
            "-9223372036854775809",
            'strconv.ParseInt: parsing "-9223372036854775809": value out of range',
        ),
        # Overflow is noticed digit by digit, before the bad character.
        (
            "99999999999999999999x",
            'strconv.ParseInt: parsing "99999999999999999999x": value out of range',
        ),
        ("1\n", 'strconv.ParseInt: parsing "1\\n": invalid syntax'),
    ],
)
def test_go_parse_int_errors(value: str, message: str) -> None:
    with pytest.raises(GoParseIntError) as info:
        go_parse_int(value)
    assert str(info.value) == message


def test_query_int_is_a_bad_request() -> None:
    assert query_int(q(limit="5"), "limit") == 5
    assert query_int(q(), "limit") is None
    with pytest.raises(StatusError) as info:
        query_int(q(limit="x"), "limit")
    assert (info.value.code, info.value.reason, info.value.message) == (
        400,
        "BadRequest",
        'strconv.ParseInt: parsing "x": invalid syntax',
    )


def test_go_parse_bool() -> None:
    for text in ("1", "t", "T", "TRUE", "true", "True"):
        assert go_parse_bool(text) is True
    for text in ("0", "f", "F", "FALSE", "false", "False"):
        assert go_parse_bool(text) is False
    for text in ("", "yes", "tRUE", "2"):
        assert go_parse_bool(text) is None


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_go_parse_int_round_trip(n: int) -> None:
    assert go_parse_int(str(n)) == n
