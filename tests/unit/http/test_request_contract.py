"""Every request class satisfies apiserver.http.request.HTTPRequest.

Statically: :func:`typed` assigns each to the Protocol (mypy checks it when it checks the tests;
``src/apiserver/http/request.py`` does the same for the server's classes). At run time: every
member of the Protocol is present on a real instance of each class.
"""

from __future__ import annotations

import types
from io import BytesIO

import pytest
from tests.unit.api_events.test_watchstream_coalesce import FakeRequest as WatchFakeRequest
from tests.unit.authn.authn_helpers import FakeRequest as AuthnFakeRequest
from tests.unit.fake_request import FakeRequest
from twisted.web.http_headers import Headers
from twisted.web.server import Request as TwistedRequest
from twisted.web.test.requesthelper import DummyChannel

from apiserver.http.h1request import H1Request
from apiserver.http.h2request import H2Request
from apiserver.http.request import HTTPRequest
from apiserver.http.site import ApiH1Request, ApiH2Request, ApiRequest

MEMBERS = sorted(
    name
    for name, member in vars(HTTPRequest).items()
    if not name.startswith("__") and isinstance(member, (property, types.FunctionType))
)


def h1() -> H1Request:
    channel = types.SimpleNamespace(transport=None, _peer=None, _host=None)
    return ApiH1Request(
        channel,  # type: ignore[arg-type]
        b"GET",
        b"/x?y=1",
        b"HTTP/1.1",
        Headers(),
        BytesIO(),
        True,
    )


def h2() -> H2Request:
    connection = types.SimpleNamespace(getPeer=lambda: None, getHost=lambda: None)
    return ApiH2Request(connection, 1, [(b":method", b"GET"), (b":path", b"/x")])  # type: ignore[arg-type]


def twisted() -> TwistedRequest:
    return ApiRequest(DummyChannel())


def typed(
    a: H1Request,
    b: H2Request,
    c: TwistedRequest,
    d: FakeRequest,
    e: AuthnFakeRequest,
    f: WatchFakeRequest,
) -> list[HTTPRequest]:
    """mypy: each class is an HTTPRequest."""
    return [a, b, c, d, e, f]


def test_the_protocol_names_what_the_application_uses() -> None:
    assert "requestHeaders" in MEMBERS and "notifyFinish" in MEMBERS
    assert "_disconnected" in MEMBERS  # stated, so nobody needs getattr(request, ...)


@pytest.mark.parametrize(
    "make",
    [
        h1,
        h2,
        twisted,
        lambda: TwistedRequest(DummyChannel()),
        FakeRequest,
        AuthnFakeRequest,
        WatchFakeRequest,
    ],
    ids=[
        "H1Request",
        "H2Request",
        "ApiRequest",
        "twisted.web.server.Request",
        "FakeRequest",
        "authn_helpers.FakeRequest",
        "test_watchstream_coalesce.FakeRequest",
    ],
)
def test_every_request_class_has_every_member(make: object) -> None:
    request = make()  # type: ignore[operator]
    missing = [name for name in MEMBERS if not hasattr(request, name)]
    assert missing == []
    assert (
        len(typed(h1(), h2(), twisted(), FakeRequest(), AuthnFakeRequest(), WatchFakeRequest()))
        == 6
    )
