"""``--tls-sni-cert-key``: syntax, extracted names, precedence and the lookup rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from tls_helpers import issue, server_cert, write_pair

from apiserver.tls.sni import (
    SniCertKey,
    build_name_map,
    certificate_names,
    load_sni_cert_key,
    lookup,
    normalize_local_ip,
    parse_sni_cert_key,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("foo.crt,foo.key", SniCertKey("foo.crt", "foo.key")),
        ("  foo.crt , foo.key    ", SniCertKey("foo.crt", "foo.key")),
        ("foo.crt,foo.key:abc", SniCertKey("foo.crt", "foo.key", ("abc",))),
        ("foo.crt,foo.key: abc  ", SniCertKey("foo.crt", "foo.key", ("abc",))),
        (
            "foo.crt,foo.key:*.foo.com, foo.com",
            SniCertKey("foo.crt", "foo.key", ("*.foo.com", "foo.com")),
        ),
        ("foo.crt,foo.key:*.*.*", SniCertKey("foo.crt", "foo.key", ("*.*.*",))),
        # Only the first colon separates the names.
        ("a.crt,b.key:x:y", SniCertKey("a.crt", "b.key", ("x:y",))),
    ],
)
def test_parse(value: str, expected: SniCertKey) -> None:
    assert parse_sni_cert_key(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("foo.crt,foo.key:", "empty names list is not allowed"),
        ("foo.crt,foo.key:   ", "empty names list is not allowed"),
        ("", "expected comma separated certificate and key file paths"),
        ("   ", "expected comma separated certificate and key file paths"),
        ("a,b,c", "expected comma separated certificate and key file paths"),
        ("foo.crt:foo.com", "expected comma separated certificate and key file paths"),
    ],
)
def test_parse_errors(value: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_sni_cert_key(value)
    assert str(info.value) == message


def test_str_round_trips() -> None:
    for text in ("a.crt,a.key", "a.crt,a.key:*.foo.com,foo.com"):
        assert str(parse_sni_cert_key(text)) == text


@pytest.mark.parametrize(
    ("cn", "expected_cn_used"),
    [
        ("foo.example.com", True),
        ("*.example.com", True),
        ("*", True),
        ("localhost", True),
        ("1.2.3.4", False),  # an IP CN is never used
        ("010.0.0.1", False),  # Go's ParseIPSloppy accepts leading zeros
        ("::1", False),
        ("Foo.Example.com", False),  # not a DNS-1123 subdomain (upper case)
        ("my service", False),
        ("a.*.example.com", False),
    ],
)
def test_certificate_names_cn_rules(cn: str, expected_cn_used: bool) -> None:
    cert = issue(cn, dns=["san.example.com", "Other.Example"], ips=["10.0.0.1"]).cert
    names = certificate_names(cert)
    assert names == ([cn] if expected_cn_used else []) + ["san.example.com", "Other.Example"]


def test_certificate_names_without_cn_or_sans() -> None:
    assert certificate_names(issue(None, dns=["only.san"]).cert) == ["only.san"]
    assert certificate_names(issue("plain").cert) == ["plain"]


def test_explicit_names_beat_extracted_names_whatever_the_order() -> None:
    # Entry 0 extracts "foo.com"; entry 1 names it explicitly -> entry 1 wins.
    entries = [(["foo.com", "a.com"], False), (["foo.com"], True)]
    assert build_name_map(entries) == {"foo.com": 1, "a.com": 0}
    # Reversed flag order: still the explicit one.
    entries = [(["foo.com"], True), (["foo.com", "a.com"], False)]
    assert build_name_map(entries) == {"foo.com": 0, "a.com": 1}


def test_earlier_flag_wins_for_the_same_name() -> None:
    assert build_name_map([(["x.com"], False), (["x.com"], False)]) == {"x.com": 0}
    assert build_name_map([(["x.com"], True), (["x.com", "y.com"], True)]) == {
        "x.com": 0,
        "y.com": 1,
    }


NAMES = {
    "foo.com": "foo",
    "*.foo.com": "wild-foo",
    "*.b.foo.com": "wild-b",
    "10.0.0.1": "by-ip",
    "*": "star",
}


@pytest.mark.parametrize(
    ("server_name", "expected"),
    [
        ("foo.com", "foo"),
        ("FOO.Com", "foo"),  # lower-cased
        ("foo.com.", "foo"),  # trailing dot trimmed
        (b"foo.com", "foo"),  # bytes as OpenSSL hands them over
        ("a.foo.com", "wild-foo"),
        ("A.FOO.COM.", "wild-foo"),
        ("a.b.foo.com", "wild-b"),  # *.b.foo.com, found by replacing the first label
        ("x.a.b.foo.com", None),  # not longest-match: *.a.b.foo.com does not exist
        ("a.c.foo.com", None),  # a wildcard covers one label only
        ("bar", "star"),  # "*" is what a single label becomes
        ("bar.com", None),
        ("10.0.0.1", "by-ip"),  # whatever the client sent, exact match first
    ],
)
def test_lookup_with_sni(server_name: str | bytes, expected: str | None) -> None:
    assert lookup(NAMES, server_name, local_ip="10.0.0.1") == expected


def test_lookup_without_sni_uses_the_local_ip_exactly() -> None:
    assert lookup(NAMES, None, "10.0.0.1") == "by-ip"
    assert lookup(NAMES, b"", "10.0.0.1") == "by-ip"
    assert lookup(NAMES, None, "::ffff:10.0.0.1") == "by-ip"  # dual-stack listener
    assert lookup(NAMES, None, "10.0.0.2") is None
    assert lookup(NAMES, None, None) is None
    assert lookup({"*": "star"}, None, "10.0.0.2") is None  # no wildcard for IPs


def test_normalize_local_ip() -> None:
    assert normalize_local_ip("::ffff:127.0.0.1") == "127.0.0.1"
    assert normalize_local_ip("::1") == "::1"
    assert normalize_local_ip("fe80::1%eth0") == "fe80::1"
    assert normalize_local_ip("not-an-ip") == "not-an-ip"


def test_load_sni_pairs(tmp_path: Path) -> None:
    item = server_cert("foo.example", dns=["www.foo.example"])
    cert, key = write_pair(tmp_path, "foo", item)
    loaded = load_sni_cert_key(SniCertKey(cert, key))
    assert loaded.names == ("foo.example", "www.foo.example")
    assert loaded.explicit is False
    assert loaded.cert_key.leaf == item.cert

    explicit = load_sni_cert_key(SniCertKey(cert, key, ("*.bar.example",)))
    assert explicit.names == ("*.bar.example",)
    assert explicit.explicit is True


def test_load_rejects_mismatched_and_missing_files(tmp_path: Path) -> None:
    cert, _ = write_pair(tmp_path, "a", server_cert("a.example"))
    _, other_key = write_pair(tmp_path, "b", server_cert("b.example"))
    with pytest.raises(ValueError, match="private key does not match public key"):
        load_sni_cert_key(SniCertKey(cert, other_key))
    with pytest.raises(OSError):
        load_sni_cert_key(SniCertKey(cert, str(tmp_path / "missing.key")))
    with pytest.raises(ValueError, match="missing filename"):
        load_sni_cert_key(SniCertKey(cert, ""))
    (tmp_path / "junk.crt").write_text("junk")
    with pytest.raises(ValueError, match=r"junk\.crt"):
        load_sni_cert_key(SniCertKey(str(tmp_path / "junk.crt"), other_key))
