"""Continue tokens (apiserver pkg/storage/continue.go) and the Go-compatible JSON reader."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.apimachinery.continue_token import (
    ContinueTokenError,
    GoJSONSyntaxError,
    decode_continue,
    encode_continue,
    go_json_parse,
    go_path_clean,
)
from apiserver.gocompat.jsonvalues import GoNumber, GoObject
from apiserver.gocompat.marshal import go_json_string

PREFIX = "/registry/events/ns/"
SPEC_EXAMPLE = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzLCJzdGFydCI6ImFcdTAwMDAifQ"


def token(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def error_of(tok: str) -> str:
    with pytest.raises(ContinueTokenError) as info:
        decode_continue(tok, PREFIX)
    return str(info.value)


def test_encode_matches_kube_byte_for_byte() -> None:
    assert encode_continue("a", 123) == SPEC_EXAMPLE
    raw = base64.urlsafe_b64decode(encode_continue("ns/x<y>&z", -1) + "==")
    assert raw == b'{"v":"meta.k8s.io/v1","rv":-1,"start":"ns/x\\u003cy\\u003e\\u0026z\\u0000"}'


def test_decode_spec_example() -> None:
    assert decode_continue(SPEC_EXAMPLE, PREFIX) == (PREFIX + "a\0", 123)


def test_decode_accepts_case_insensitive_fields_and_negative_rv() -> None:
    raw = b'{"V":"meta.k8s.io/v1","Rv":-1,"START":"ns/b\\u0000","extra":[1,{"x":null}]}'
    assert decode_continue(token(raw), "/registry/events/") == ("/registry/events/ns/b\0", -1)


def test_decode_skips_cr_lf_in_base64() -> None:
    assert decode_continue(SPEC_EXAMPLE[:10] + "\r\n" + SPEC_EXAMPLE[10:], PREFIX)[1] == 123


BASE = "invalid continue token: continue key is not valid"


@pytest.mark.parametrize(
    ("raw", "suffix"),
    [
        (
            b'{"v":"meta.k8s.io/v1","rv":0,"start":"a"}',
            ": incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ),
        (
            b'{"v":"meta.k8s.io/v1","start":"a"}',
            ": incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ),
        (
            b'{"v":"meta.k8s.io/v1","rv":5,"start":""}',
            ": encoded start key empty (version meta.k8s.io/v1)",
        ),
        (
            b'{"v":"meta.k8s.io/v2","rv":5,"start":"a"}',
            ": server does not recognize this encoded version meta.k8s.io/v2",
        ),
        (b"{}", ": server does not recognize this encoded version "),
        (b"null", ": server does not recognize this encoded version "),
        (b'{"v":"meta.k8s.io/v1","rv":5,"start":"../a"}', ": ../a"),
        (b'{"v":"meta.k8s.io/v1","rv":5,"start":"a/../../b"}', ": a/../../b"),
        (b'{"v":"meta.k8s.io/v1","rv":5,"start":"a//b"}', ": a//b"),
        (b'{"v":"meta.k8s.io/v1","rv":5,"start":"a/"}', ": a/"),
        (b'{"v":"meta.k8s.io/v1","rv":5,"start":"./a"}', ": ./a"),
        (
            b'{"v":"meta.k8s.io/v1","rv":1.5,"start":"a"}',
            ": json: cannot unmarshal number 1.5 into Go struct field continueToken.rv "
            "of type int64",
        ),
        (
            b'{"v":"meta.k8s.io/v1","rv":99999999999999999999,"start":"a"}',
            ": json: cannot unmarshal number 99999999999999999999 into Go struct field "
            "continueToken.rv of type int64",
        ),
        (
            b'{"v":"meta.k8s.io/v1","rv":"5","start":"a"}',
            ": json: cannot unmarshal string into Go struct field continueToken.rv of type int64",
        ),
        (
            b'{"v":true,"rv":[1],"start":"a"}',
            ": json: cannot unmarshal bool into Go struct field continueToken.v of type string",
        ),
        (
            b'{"start":{}}',
            ": json: cannot unmarshal object into Go struct field continueToken.start of type "
            "string",
        ),
        (
            b"[]",
            ": json: cannot unmarshal array into Go value of type storage.continueToken",
        ),
        (b'"x"', ": json: cannot unmarshal string into Go value of type storage.continueToken"),
        (b"", ": unexpected end of JSON input"),
        (b'{"v":', ": unexpected end of JSON input"),
        (b"{x", ": invalid character 'x' looking for beginning of object key string"),
        (b'{"v" 1}', ": invalid character '1' after object key"),
        (b'{"v":1 2}', ": invalid character '2' after object key:value pair"),
        (b"[1 2]", ": invalid character '2' after array element"),
        (b"{}x", ": invalid character 'x' after top-level value"),
        (b"x", ": invalid character 'x' looking for beginning of value"),
        (b"'", ": invalid character '\\'' looking for beginning of value"),
        # encoding/json scanner.go eof() steps one space at the end of the input: a
        # truncated literal is reported at that space (json.Unmarshal's checkValid).
        (b"tru", ": invalid character ' ' in literal true (expecting 'e')"),
        (b"trux", ": invalid character 'x' in literal true (expecting 'e')"),
        (b"nul1", ": invalid character '1' in literal null (expecting 'l')"),
        (b"-x", ": invalid character 'x' in numeric literal"),
        (b"1.x", ": invalid character 'x' after decimal point in numeric literal"),
        (b"1ex", ": invalid character 'x' in exponent of numeric literal"),
        (b"01", ": invalid character '1' after top-level value"),
        (b'"\\q"', ": invalid character 'q' in string escape code"),
        (b'"\\u12x4"', ": invalid character 'x' in \\u hexadecimal character escape"),
        (b'"a\nb"', ": invalid character '\\n' in string literal"),
        (b"\xc3", ": invalid character '\u00c3' looking for beginning of value"),
        (b"\x00", ": invalid character '\\x00' looking for beginning of value"),
    ],
)
def test_decode_errors(raw: bytes, suffix: str) -> None:
    assert error_of(token(raw)) == BASE + suffix


@pytest.mark.parametrize(
    ("tok", "suffix"),
    [
        ("a", ": illegal base64 data at input byte 0"),
        ("ab=c", ": illegal base64 data at input byte 2"),
        ("abcde", ": illegal base64 data at input byte 4"),
        ("ab+/", ": illegal base64 data at input byte 2"),
        ("%%", ": illegal base64 data at input byte 0"),
    ],
)
def test_base64_errors(tok: str, suffix: str) -> None:
    assert error_of(tok) == BASE + suffix


def test_error_is_a_bad_request() -> None:
    with pytest.raises(ContinueTokenError) as info:
        decode_continue("a", PREFIX)
    status = info.value.to_status()
    assert (status.code, status.reason) == (400, "BadRequest")
    assert status.message == BASE + ": illegal base64 data at input byte 0"


@pytest.mark.parametrize(
    ("path", "clean"),
    [
        ("", "."),
        ("/", "/"),
        ("/a/b", "/a/b"),
        ("/a//b/", "/a/b"),
        ("/a/./b", "/a/b"),
        ("/a/../b", "/b"),
        ("/../a", "/a"),
        ("a/../../b", "../b"),
        ("./", "."),
        ("/a/b/..", "/a"),
        ("/a\0", "/a\0"),
    ],
)
def test_go_path_clean(path: str, clean: str) -> None:
    assert go_path_clean(path) == clean


def test_go_json_parse_shapes() -> None:
    value = go_json_parse(b' {"a": [1, -2.5e3, true, false, null, "x\\u00e9\\ud83d\\ude00"]} ')
    assert value == GoObject(
        (("a", [GoNumber("1"), GoNumber("-2.5e3"), True, False, None, "x\u00e9\U0001f600"]),)
    )
    # Unpaired surrogate escapes and invalid UTF-8 bytes read as U+FFFD, one per byte.
    assert go_json_parse(b'"\\ud800x"') == "\ufffdx"
    assert go_json_parse(b'"\xe2\x82"') == "\ufffd\ufffd"
    with pytest.raises(GoJSONSyntaxError, match="unexpected end of JSON input"):
        go_json_parse(b"[")


def test_go_json_string() -> None:
    assert go_json_string('a"\\\n\r\t\b\f\x01<>&\u2028é') == (
        '"a\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u003c\\u003e\\u0026\\u2028é"'
    )


_KEY = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="/."), min_size=1
)
_KEYS = st.one_of(_KEY, st.tuples(_KEY, _KEY).map(lambda t: f"{t[0]}/{t[1]}"))


@given(_KEYS, st.integers(min_value=-(2**63), max_value=2**63 - 1).filter(lambda n: n != 0))
def test_round_trip(key: str, rv: int) -> None:
    tok = encode_continue(key, rv)
    assert "=" not in tok
    assert decode_continue(tok, PREFIX) == (PREFIX + key + "\0", rv)


@pytest.mark.parametrize("depth", [999, 1025, 5000, 9999])
def test_deeply_nested_token_reads_as_go_reads_it(depth: int) -> None:
    """Issue 17: a token nested up to Go's 10,000 levels is decoded, here to the type error
    of its ``start`` (encoding/json reads the whole value before naming its kind)."""
    raw = b'{"v":"meta.k8s.io/v1","rv":1,"start":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"
    assert error_of(token(raw)) == (
        "invalid continue token: continue key is not valid: json: cannot unmarshal object "
        "into Go struct field continueToken.start of type string"
    )
    # A deep value under a key Go does not know is skipped: the token is good.
    raw = b'{"v":"meta.k8s.io/v1","rv":7,"x":' + b"[" * depth + b"]" * depth + b',"start":"a"}'
    assert decode_continue(token(raw), PREFIX) == (PREFIX + "a", 7)


@pytest.mark.parametrize("depth", [10000, 20000])
def test_token_nested_past_10000_levels_is_gos_scanner_error(depth: int) -> None:
    """Past ``maxNestingDepth`` (10,000 containers in all, the token's own object one of
    them): Go's scanner text."""
    raw = b'{"v":"meta.k8s.io/v1","rv":1,"start":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"
    assert error_of(token(raw)) == (
        "invalid continue token: continue key is not valid: invalid character '{' exceeded "
        "max depth"
    )
