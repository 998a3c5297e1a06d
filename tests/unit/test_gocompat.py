"""apiserver.gocompat: the cases where the copies it replaced disagreed, decided by Go.

Each case names the Go source whose behaviour it pins (golang.org/src/...). Before the
copies were merged, the first column of each comment is what the losing copy did.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.apimachinery.continue_token import GoJSONSyntaxError, go_json_parse
from apiserver.discovery import documents as discovery_docs
from apiserver.discovery.documents import runtime_config_errors
from apiserver.gocompat.boolparse import go_parse_bool, parse_bool, parse_bool_error
from apiserver.gocompat.duration import format_go_duration_ns, parse_go_duration_ns
from apiserver.gocompat.errors import GoValueError
from apiserver.gocompat.intparse import go_parse_int64, parse_int
from apiserver.gocompat.jsonscan import go_json_syntax_error
from apiserver.gocompat.jsonvalues import GoNumber, GoObject, Pairs, go_json_kind
from apiserver.gocompat.marshal import go_marshal, go_marshal_indent, go_marshal_plain
from apiserver.gocompat.quote import go_quote, go_quote_char, time_quote
from apiserver.gocompat.timefmt import (
    format_rfc3339,
    format_rfc3339_micro,
    format_time_string,
    format_unix_time_string,
)
from apiserver.options.config import OptionsError
from apiserver.options.flagtypes import FlagValueError, parse_int_flag
from apiserver.options.parse import parse_args

# --- quoting --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("plain", '"plain"'),
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("a\nb\x01\x7f", '"a\\nb\\x01\\x7f"'),  # the flag copy wrote these raw
        ("é日本", '"é日本"'),  # printable: kept (strconv/quote.go appendQuotedWith)
        ("\u00a0", '"\\u00a0"'),  # not printable in Go either
    ],
)
def test_strconv_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("1x", '"1x"'),
        ('a"b\\', '"a\\"b\\\\"'),
        ("é", '"\\xc3\\xa9"'),  # time/format.go quote: every non-ASCII byte as \xNN
        ("a\tb", '"a\\x09b"'),
    ],
)
def test_time_quote_is_not_strconv_quote(text: str, quoted: str) -> None:
    assert time_quote(text) == quoted
    assert time_quote(text.encode()) == quoted


def test_json_quote_char() -> None:
    assert go_quote_char(ord("'")) == "'\\''"
    assert go_quote_char(ord('"')) == "'\"'"
    assert go_quote_char(1) == "'\\x01'"


def test_flag_errors_quote_the_value_as_pflag_does() -> None:
    # pflag: fmt.Errorf("invalid argument %q for %q flag: %v", ...); %q is strconv.Quote,
    # and so is the *strconv.NumError it wraps. The flag copy printed the newline raw.
    with pytest.raises(FlagValueError) as caught:
        parse_int_flag("1\n2")
    assert str(caught.value) == 'strconv.ParseInt: parsing "1\\n2": invalid syntax'
    with pytest.raises(OptionsError) as error:
        parse_args(["--secure-port=1\n2"])
    assert str(error.value) == (
        'invalid argument "1\\n2" for "--secure-port" flag: '
        'strconv.ParseInt: parsing "1\\n2": invalid syntax'
    )


# --- strconv.ParseInt ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "base", "bits", "expected"),
    [
        ("0x1A", 0, 64, 26),
        ("-0b1_01", 0, 64, -5),
        ("017", 0, 64, 15),
        ("+7", 10, 64, 7),
        ("-9223372036854775808", 10, 64, -(1 << 63)),
        # atoi.go: digits are checked against the cutoff one by one, so an overflow is
        # reported before the bad character that follows it (the flag copy said syntax).
        ("99999999999999999999x", 0, 64, "value out of range"),
        ("9999999999x", 10, 32, "value out of range"),
        ("9223372036854775808", 10, 64, "value out of range"),
        ("08", 0, 64, "invalid syntax"),
        ("1__0", 0, 64, "invalid syntax"),
        ("0x", 0, 64, "invalid syntax"),
        ("1_0", 10, 64, "invalid syntax"),
        ("+", 10, 64, "invalid syntax"),
        ("", 10, 64, "invalid syntax"),
    ],
)
def test_parse_int(text: str, base: int, bits: int, expected: int | str) -> None:
    if isinstance(expected, int):
        assert parse_int(text, base, bits) == expected
        return
    with pytest.raises(GoValueError) as caught:
        parse_int(text, base, bits)
    assert str(caught.value) == f"strconv.ParseInt: parsing {go_quote(text)}: {expected}"
    if base == 10 and bits == 64:
        assert go_parse_int64(text) is None


def test_atoi_names_itself() -> None:
    with pytest.raises(GoValueError, match=r'^strconv.Atoi: parsing "x": invalid syntax$'):
        parse_int("x", func="Atoi")


# --- strconv.ParseBool -----------------------------------------------------------------


def test_parse_bool_accepts_exactly_go_s_spellings() -> None:
    for text in ("1", "t", "T", "TRUE", "true", "True"):
        assert go_parse_bool(text) is True and parse_bool(text) is True
    for text in ("0", "f", "F", "FALSE", "false", "False"):
        assert go_parse_bool(text) is False and parse_bool(text) is False
    for text in ("", "yes", "tRUE", " true", "2"):
        assert go_parse_bool(text) is None
        with pytest.raises(GoValueError):
            parse_bool(text)


def test_parse_bool_error_quotes_with_strconv_quote() -> None:
    # strconv/atoi.go NumError.Error: "parsing " + Quote(e.Num); the copies wrote "%s" raw.
    assert parse_bool_error('x"y') == 'strconv.ParseBool: parsing "x\\"y": invalid syntax'
    with pytest.raises(FlagValueError, match="invalid syntax"):
        parse_bool("maybe")  # FlagValueError is GoValueError: flags report it as theirs
    assert runtime_config_errors({"events.k8s.io/v1": 'x"y'}) == [
        'invalid value of events.k8s.io/v1: x"y, err: strconv.ParseBool: parsing "x\\"y": '
        "invalid syntax"
    ]


# --- time.ParseDuration / Duration.String ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1é", 'time: unknown unit "\\xc3\\xa9" in duration "1\\xc3\\xa9"'),  # flag copy: "é"
        ("x", 'time: invalid duration "x"'),
        ("1", 'time: missing unit in duration "1"'),
        ("", 'time: invalid duration ""'),
    ],
)
def test_duration_errors_use_the_time_package_quote(text: str, message: str) -> None:
    with pytest.raises(GoValueError) as caught:
        parse_go_duration_ns(text)
    assert str(caught.value) == message


def test_duration_round_trip() -> None:
    assert parse_go_duration_ns("1h2m3.5s") == 3723_500_000_000
    assert format_go_duration_ns(3723_500_000_000) == "1h2m3.5s"
    assert format_go_duration_ns(1500) == "1.5\u00b5s"
    assert format_go_duration_ns(0) == "0s"


# --- JSON kinds ---------------------------------------------------------------------------


def test_json_kind_names_values_of_both_readers() -> None:
    # The continue-token reader's values (GoObject, GoNumber) and the strict reader's
    # (dict/Pairs, int/float) get the same words (encoding/json decode.go literalStore).
    parsed = go_json_parse(b'{"a":[1,"s",true,null,{}]}')
    assert isinstance(parsed, GoObject)
    assert go_json_kind(parsed) == "object"
    items = parsed.pairs[0][1]
    assert [go_json_kind(v) for v in items] == ["number", "string", "bool", "null", "object"]
    assert isinstance(items[0], GoNumber)
    plain = [{}, Pairs([]), [], "s", 1, 1.5, True, None]
    kinds = ["object", "object", "array", "string", "number", "number", "bool", "null"]
    assert [go_json_kind(v) for v in plain] == kinds


# --- JSON syntax errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # scanner.go eof(): one space is stepped at the end, so a truncated literal is
        # reported at that space (the continue-token reader said "unexpected end").
        (b"t", "invalid character ' ' in literal true (expecting 'r')"),
        (b"-", "invalid character ' ' in numeric literal"),
        (b"[5.", "invalid character ' ' after decimal point in numeric literal"),
        (b"{", "unexpected end of JSON input"),
        (b'{"a":1}x', "invalid character 'x' after top-level value"),
    ],
)
def test_every_json_reader_words_syntax_errors_as_go_s_scanner(data: bytes, message: str) -> None:
    assert go_json_syntax_error(data) == message
    with pytest.raises(GoJSONSyntaxError) as caught:
        go_json_parse(data)
    assert str(caught.value) == message


# --- encoding/json output ------------------------------------------------------------------


def test_marshal_is_go_s_not_pythons() -> None:
    # Discovery's copy was json.dumps: "1e-07", "1.0", and a lone surrogate that could not
    # even be encoded. encoding/json: floatEncoder, and invalid UTF-8 as \ufffd.
    assert go_marshal({"a": 1e-7, "b": 1.0, "c": 1e21}) == '{"a":1e-7,"b":1,"c":1e+21}'
    assert go_marshal(["<&>\u2028", "\ud800"]) == '["\\u003c\\u0026\\u003e\\u2028","\\ufffd"]'
    assert go_marshal({"b": 1, "a": 2}) == '{"a":2,"b":1}'
    assert go_marshal({"b": 1, "a": 2}, sort_keys=False) == '{"b":1,"a":2}'


def test_marshal_indent_is_json_marshal_indent() -> None:
    value = {"kind": "Status", "details": {}, "causes": [], "list": [1, {"x": "<"}]}
    assert go_marshal_indent(value) == (
        "{\n"
        '  "kind": "Status",\n'
        '  "details": {},\n'
        '  "causes": [],\n'
        '  "list": [\n'
        "    1,\n"
        "    {\n"
        '      "x": "\\u003c"\n'
        "    }\n"
        "  ]\n"
        "}"
    )
    assert discovery_docs.encode_json(value, pretty=True) == go_marshal_indent(value).encode()
    assert discovery_docs.encode_json(value) == go_marshal(value, sort_keys=False).encode() + b"\n"


_PLAIN_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(st.characters(exclude_categories=["Cs"])),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=_PLAIN_JSON, sort_keys=st.booleans())
def test_plain_marshal_is_go_marshal_for_values_without_floats(
    value: object, sort_keys: bool
) -> None:
    assert (
        go_marshal_plain(value, sort_keys=sort_keys)
        == go_marshal(value, sort_keys=sort_keys).encode()
    )


# --- time formats ---------------------------------------------------------------------------


def test_time_formats() -> None:
    when = datetime(2026, 11, 22, 13, 0, 5, 120000, tzinfo=UTC)
    assert format_rfc3339(when) == "2026-11-22T13:00:05Z"
    assert format_rfc3339_micro(when) == "2026-11-22T13:00:05.120000Z"
    assert format_time_string(when) == "2026-11-22 13:00:05.12 +0000 UTC"
    assert format_time_string(None) == "0001-01-01 00:00:00 +0000 UTC"
    assert format_unix_time_string(1.5) == "1970-01-01 00:00:01.5 +0000 UTC"
    assert format_unix_time_string(-1e12) == "0001-01-01 00:00:00 +0000 UTC"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"a":"plain"}', b'{"a":"plain"}'),
        (b'{"q":"a=1&b=<2>"}', b'{"q":"a=1\\u0026b=\\u003c2\\u003e"}'),
        ('{"s":"\u2028\u2029"}'.encode(), b'{"s":"\\u2028\\u2029"}'),
        # Another character whose UTF-8 starts with the same two bytes stays as it is.
        ('{"s":"\u2026"}'.encode(), '{"s":"\u2026"}'.encode()),
    ],
)
def test_html_safe_matches_go(raw: bytes, expected: bytes) -> None:
    from apiserver.gocompat.marshal import html_safe

    assert html_safe(raw) == expected
