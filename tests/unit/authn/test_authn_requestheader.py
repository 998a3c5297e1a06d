"""Front-proxy headers: trusted only from a verified, allowed proxy certificate."""

from __future__ import annotations

import pytest
from authn_helpers import NOW, FakeRequest, chain_of, issue, result_of
from twisted.internet.task import Clock

from apiserver.auth.authn.requestheader import RequestHeaderAuthenticator
from apiserver.auth.authn.x509 import CertificateError, ChainVerifier

PROXY_CA = issue("front-proxy-ca", ca=True)
CLIENT_CA = issue("client-ca", ca=True)
PROXY = issue("front-proxy-client", issuer=PROXY_CA)


def make(allowed: tuple[str, ...] = ("front-proxy-client",)) -> RequestHeaderAuthenticator:
    clock = Clock()
    clock.advance(NOW)
    return RequestHeaderAuthenticator(
        ChainVerifier([PROXY_CA.cert], clock),
        allowed,
        ("X-Remote-User", "X-Other-User"),
        ("X-Remote-Uid",),
        ("X-Remote-Group", "X-Other-Group"),
        ("X-Remote-Extra-",),
        ("api",),
        chain_of=chain_of,
    )


HEADERS: dict[str, str | list[str]] = {
    "X-Remote-User": "alice",
    "X-Remote-Uid": "uid-1",
    "X-Remote-Group": ["one", "two,three"],
    "X-Other-Group": "four",
    "X-Remote-Extra-Scopes": ["read", "write"],
    "X-Remote-Extra-Example.com%2Fteam": "blue",
    "X-Remote-Extra-Bad%zzkey": "v",
    "Accept": "application/json",
}


def test_verified_proxy_headers_become_the_user_and_are_removed() -> None:
    request = FakeRequest(dict(HEADERS), chain=[PROXY.cert])
    result = result_of(make().authenticate(request))
    user = result.user
    assert user.name == "alice"
    assert user.uid == "uid-1"
    assert user.groups == ("one", "two,three", "four")
    assert user.extra == {
        "scopes": ("read", "write"),
        "example.com/team": ("blue",),
        "bad%zzkey": ("v",),
    }
    assert result.audiences == ("api",)
    remaining = {name.lower() for name, _ in request.requestHeaders.getAllRawHeaders()}
    assert remaining == {b"accept"}


def test_username_header_order_and_empty_values() -> None:
    request = FakeRequest({"X-Remote-User": "", "X-Other-User": "bob"}, chain=[PROXY.cert])
    assert result_of(make().authenticate(request)).user.name == "bob"


def test_no_username_is_no_opinion() -> None:
    assert make().authenticate(FakeRequest({"X-Remote-Group": "g"}, chain=[PROXY.cert])) is None


def test_forged_headers_without_a_certificate_are_ignored() -> None:
    request = FakeRequest({"X-Remote-User": "admin"})
    assert make().authenticate(request) is None
    assert request.requestHeaders.getRawHeaders(b"x-remote-user") == [b"admin"]


def test_certificate_not_from_the_requestheader_ca_is_refused() -> None:
    client = issue("front-proxy-client", issuer=CLIENT_CA)
    with pytest.raises(CertificateError, match=r"signed by unknown authority"):
        make().authenticate(FakeRequest({"X-Remote-User": "admin"}, chain=[client.cert]))


def test_cn_not_in_the_allowed_list_is_refused() -> None:
    other = issue("someone-else", issuer=PROXY_CA)
    with pytest.raises(CertificateError) as info:
        make().authenticate(FakeRequest({"X-Remote-User": "admin"}, chain=[other.cert]))
    assert str(info.value) == "x509: subject with cn=someone-else is not in the allowed list"
    # Empty allowed names: any certificate from the proxy CA.
    result = make(()).authenticate(FakeRequest({"X-Remote-User": "x"}, chain=[other.cert]))
    assert result_of(result).user.name == "x"
