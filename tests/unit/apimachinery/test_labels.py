"""Label selector grammar, matching and error texts (apimachinery pkg/labels/selector.go)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.apimachinery.labels import (
    SelectorParseError,
    is_label_value,
    is_qualified_name,
    parse_label_selector,
)

KEY_REGEX_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
VALUE_REGEX_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def error_of(text: str) -> str:
    with pytest.raises(SelectorParseError) as info:
        parse_label_selector(text)
    return str(info.value)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("", ""),
        ("a=b", "a=b"),
        ("a==b", "a==b"),
        ("a!=b", "a!=b"),
        ("a", "a"),
        ("!a", "!a"),
        ("a in (x,y)", "a in (x,y)"),
        ("a in (y,x,x)", "a in (x,y)"),
        ("a notin (x)", "a notin (x)"),
        ("a>1", "a>1"),
        ("a<5", "a<5"),
        ("a=", "a="),
        ("a in ()", "a in ()"),
        ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
        ("  b = 1 ,\ta\t,  c  in  ( p , q ) ", "a,b=1,c in (p,q)"),
        ("z=1,a=2,m", "a=2,m,z=1"),
        ("example.com/k=v", "example.com/k=v"),
        ("k in (in,notin)", "k in (in,notin)"),
        ("in=notin", "in=notin"),
    ],
)
def test_parse_and_canonical_string(text: str, canonical: str) -> None:
    assert str(parse_label_selector(text)) == canonical


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("a,", "found '', expected: identifier after ','"),
        (",", "found ',', expected: !, identifier, or 'end of string'"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        (
            "a b",
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
        ),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a notin", "unable to parse requirement: found '' expected: '('"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("a in (b =)", "unable to parse requirement: found '=', expected: ',' or ')'"),
        ("a in (,=)", "unable to parse requirement: found '=', expected: ',', or identifier"),
        ("a==(", "unable to parse requirement: found '(', expected: identifier"),
        ("a,,b", "found ',', expected: identifier after ','"),
        ("a in (,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
        (
            "k>a",
            "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' "
            "operators, the value must be an integer",
        ),
        (
            "k>",
            "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' "
            "operators, the value must be an integer",
        ),
        (
            "k=a$b",
            f'unable to parse requirement: values[0][k]: Invalid value: "a$b": {VALUE_REGEX_MSG}',
        ),
        (
            "k=" + "v" * 64,
            'unable to parse requirement: values[0][k]: Invalid value: "'
            + "v" * 64
            + '": must be no more than 63 characters',
        ),
        (
            "k<x$",
            "unable to parse requirement: [values[0]: Invalid value: \"x$\": for 'Gt', 'Lt' "
            'operators, the value must be an integer, values[0][k]: Invalid value: "x$": '
            + VALUE_REGEX_MSG
            + "]",
        ),
        (
            "a/b/c",
            'unable to parse requirement: <nil>: Invalid value: "a/b/c": a valid label key '
            + KEY_REGEX_MSG
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        ),
        (
            "-a",
            'unable to parse requirement: <nil>: Invalid value: "-a": name part ' + KEY_REGEX_MSG,
        ),
        (
            "/a",
            'unable to parse requirement: <nil>: Invalid value: "/a": prefix part must be '
            "non-empty",
        ),
        (
            "a/",
            'unable to parse requirement: <nil>: Invalid value: "a/": name part must be '
            "non-empty; name part " + KEY_REGEX_MSG,
        ),
        (
            "!" + "k" * 64,
            'unable to parse requirement: <nil>: Invalid value: "'
            + "k" * 64
            + '": name part must be no more than 63 characters',
        ),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    assert error_of(text) == message


def test_nul_byte_reads_like_end_of_input() -> None:
    # Go's lexer reads byte 0 as "end": at a token start it ends the input, inside a
    # token it ends the token (and is swallowed).
    assert str(parse_label_selector("a\0")) == "a"
    assert parse_label_selector("\0a=b").empty
    assert str(parse_label_selector("a,\0b")) == "a,b"
    assert str(parse_label_selector("a=\0b")) == "a=b"


def test_gt_lt_values_must_also_be_label_values() -> None:
    # "-5" is an integer but not a valid label value (must start alphanumeric).
    assert error_of("a<-5") == (
        'unable to parse requirement: values[0][a]: Invalid value: "-5": ' + VALUE_REGEX_MSG
    )


def test_error_becomes_bad_request() -> None:
    with pytest.raises(SelectorParseError) as info:
        parse_label_selector(",")
    status = info.value.to_status()
    assert (status.code, status.reason, status.message) == (
        400,
        "BadRequest",
        "found ',', expected: !, identifier, or 'end of string'",
    )


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("", {}, True),
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a=b", {}, False),
        ("a==b", {"a": "b"}, True),
        ("a!=b", {}, True),
        ("a!=b", {"a": "b"}, False),
        ("a!=b", {"a": "c"}, True),
        ("a in (x,y)", {"a": "y"}, True),
        ("a in (x,y)", {"a": "z"}, False),
        ("a in (x,y)", {}, False),
        ("a notin (x,y)", {}, True),
        ("a notin (x,y)", {"a": "x"}, False),
        ("a", {"a": ""}, True),
        ("a", {}, False),
        ("!a", {}, True),
        ("!a", {"a": "1"}, False),
        ("a>5", {"a": "6"}, True),
        ("a>5", {"a": "5"}, False),
        ("a>5", {"a": "x"}, False),
        ("a>5", {}, False),
        ("a<5", {"a": "-7"}, True),
        ("a<5", {"a": "+4"}, True),
        ("a=", {"a": ""}, True),
        ("a in ()", {"a": ""}, True),
        ("a=b,c", {"a": "b", "c": "1"}, True),
        ("a=b,c", {"a": "b"}, False),
    ],
)
def test_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


def test_empty_and_exact_match() -> None:
    assert parse_label_selector("").empty
    sel = parse_label_selector("a=b,c in (d),e in (f,g),h!=i")
    assert not sel.empty
    assert sel.requires_exact_match("a") == "b"
    assert sel.requires_exact_match("c") == "d"
    assert sel.requires_exact_match("e") is None
    assert sel.requires_exact_match("h") is None
    assert sel.requires_exact_match("zz") is None


def test_key_and_value_rules() -> None:
    assert is_qualified_name("example.com/My_name.1") == []
    assert is_qualified_name("a" * 63) == []
    assert is_qualified_name("a" * 64) == ["name part must be no more than 63 characters"]
    assert is_qualified_name("x" * 254 + "/a")[0] == (
        "prefix part must be no more than 253 characters"
    )
    assert is_label_value("") == []
    assert is_label_value("A-b_c.9") == []
    assert is_label_value("-a") == [VALUE_REGEX_MSG]
    assert is_label_value("é") == [VALUE_REGEX_MSG]


_KEY = st.from_regex(
    r"\A([a-z0-9]{1,5}\.)?[a-z0-9]{1,4}/[A-Za-z0-9]([-A-Za-z0-9_.]{0,6}[A-Za-z0-9])?\Z"
)
_SIMPLE_KEY = st.from_regex(r"\A[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?\Z")
_VALUE = st.from_regex(r"\A(([A-Za-z0-9][-A-Za-z0-9_.]{0,8})?[A-Za-z0-9])?\Z")
_INT = st.integers(min_value=0, max_value=10**6).map(str)


@st.composite
def _requirement(draw: st.DrawFn) -> str:
    key = draw(st.one_of(_KEY, _SIMPLE_KEY))
    kind = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!", ">", "<"]))
    if kind == "exists":
        return key
    if kind == "!":
        return "!" + key
    if kind in (">", "<"):
        return key + kind + draw(_INT)
    if kind in ("in", "notin"):
        # Empty members are legal only in some spellings ("()", "(,a)"; not "(,,)"), so the
        # generator uses non-empty members plus the plain "()" form.
        values = draw(st.lists(_VALUE.filter(bool), max_size=4))
        return f"{key} {kind} ({','.join(values)})"
    return key + kind + draw(_VALUE)


@given(st.lists(_requirement(), max_size=5))
def test_string_round_trip(requirements: list[str]) -> None:
    selector = parse_label_selector(",".join(requirements))
    again = parse_label_selector(str(selector))
    assert again == selector
    assert str(again) == str(selector)


@given(
    st.lists(_requirement(), max_size=4),
    st.dictionaries(st.one_of(_KEY, _SIMPLE_KEY), _VALUE, max_size=4),
)
def test_canonical_form_matches_the_same(requirements: list[str], labels: dict[str, str]) -> None:
    selector = parse_label_selector(",".join(requirements))
    assert parse_label_selector(str(selector)).matches(labels) == selector.matches(labels)
