"""Field selector parsing, escaping, matching and transforms (apimachinery pkg/fields)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.apimachinery.fields import (
    EQUALS,
    NOT_EQUALS,
    Requirement,
    SelectorParseError,
    escape_value,
    one_term_equal_selector,
    parse_field_selector,
    unescape_value,
)


def error_of(text: str) -> str:
    with pytest.raises(SelectorParseError) as info:
        parse_field_selector(text)
    return str(info.value)


def test_operators_and_order() -> None:
    sel = parse_field_selector("type!=Normal,reason==Killing,metadata.name=a")
    # Terms are sorted as strings, as Go's sort.StringSlice does.
    assert sel.requirements == (
        Requirement("metadata.name", EQUALS, "a"),
        Requirement("reason", EQUALS, "Killing"),
        Requirement("type", NOT_EQUALS, "Normal"),
    )
    assert str(sel) == "metadata.name=a,reason=Killing,type!=Normal"


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("a=b", "a", "b"),
        ("a==b", "a", "b"),
        ("a=", "a", ""),
        ("=b", "", "b"),
        ("a=b\\,c", "a", "b,c"),
        ("a=b\\=c", "a", "b=c"),
        ("a=b\\\\c", "a", "b\\c"),
        ("a b=c d", "a b", "c d"),
    ],
)
def test_single_terms(text: str, field: str, value: str) -> None:
    assert parse_field_selector(text).requirements == (Requirement(field, EQUALS, value),)


def test_empty_terms_are_skipped() -> None:
    assert parse_field_selector("").empty
    assert parse_field_selector(",,").empty
    assert str(parse_field_selector("a=b,")) == "a=b"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a", "invalid selector: 'a'; can't understand 'a'"),
        ("x=1,a", "invalid selector: 'x=1,a'; can't understand 'a'"),
        ("a!b", "invalid selector: 'a!b'; can't understand 'a!b'"),
        ("a=b=c", "invalid field selector: unescaped character in value: 61"),
        ("a==b,c", "invalid selector: 'a==b,c'; can't understand 'c'"),
        ("a=b\\x", "invalid field selector: invalid escape sequence: \\x"),
        ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
        ("a!==b", "invalid field selector: unescaped character in value: 61"),
    ],
)
def test_errors(text: str, message: str) -> None:
    assert error_of(text) == message


def test_matches_absent_field_is_empty() -> None:
    sel = parse_field_selector("a=,b!=x")
    assert sel.matches({})
    assert sel.matches({"a": "", "b": "y"})
    assert not sel.matches({"a": "1"})
    assert not sel.matches({"b": "x"})
    assert parse_field_selector("").matches({"anything": "x"})


def test_requires_exact_match() -> None:
    sel = parse_field_selector("metadata.name!=x,metadata.namespace=ns,metadata.name=n")
    assert sel.requires_exact_match("metadata.name") == "n"
    assert sel.requires_exact_match("metadata.namespace") == "ns"
    assert sel.requires_exact_match("other") is None
    assert parse_field_selector("a!=b").requires_exact_match("a") is None
    assert one_term_equal_selector("metadata.name", "x").requires_exact_match("metadata.name") == (
        "x"
    )


def test_transform_renames_and_drops() -> None:
    sel = parse_field_selector("regarding.kind=Pod,note=x,reportingController!=c")

    def fn(field: str, value: str) -> tuple[str, str]:
        if field == "note":
            return "", ""
        if field == "regarding.kind":
            return "involvedObject.kind", value
        if field == "reportingController":
            return "reportingComponent", value
        raise SelectorParseError(f"field label not supported: {field}")

    out = sel.transform(fn)
    assert out.requirements == (
        Requirement("involvedObject.kind", EQUALS, "Pod"),
        Requirement("reportingComponent", NOT_EQUALS, "c"),
    )
    assert out.fields() == {"reportingComponent", "involvedObject.kind"}
    assert sel.fields() == {"regarding.kind", "note", "reportingController"}


def test_transform_errors_propagate() -> None:
    def fn(field: str, value: str) -> tuple[str, str]:
        raise SelectorParseError(f"field label not supported: {field}")

    with pytest.raises(SelectorParseError, match="field label not supported: bogus"):
        parse_field_selector("bogus=1").transform(fn)


def test_escape_unescape() -> None:
    assert escape_value("a\\b,c=d") == "a\\\\b\\,c\\=d"
    assert unescape_value("plain") == "plain"


@given(st.text())
def test_escape_round_trip(value: str) -> None:
    assert unescape_value(escape_value(value)) == value


_FIELD = st.from_regex(r"\A[a-zA-Z.]{1,12}\Z")


@given(st.lists(st.tuples(_FIELD, st.sampled_from(["=", "!="]), st.text(max_size=8)), max_size=4))
def test_string_round_trip(terms: list[tuple[str, str, str]]) -> None:
    text = ",".join(f"{f}{op}{escape_value(v)}" for f, op, v in terms)
    sel = parse_field_selector(text)
    assert parse_field_selector(str(sel)) == sel
