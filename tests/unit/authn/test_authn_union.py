"""Unions, bearer parsing, the WebSocket protocol token, the token cache and the group adder."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from authn_helpers import FakeRequest, result_of
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from apiserver.auth.authn.union import (
    EXTRA_SPACE_WARNING,
    BearerTokenAuthenticator,
    RequestUnion,
    TokenCache,
    TokenUnion,
    TopLevelAuthenticator,
    WebSocketProtocolAuthenticator,
    add_authenticated_group,
)
from apiserver.auth.interface import AuthenticationError, AuthResult, UserInfo


class Tokens:
    """A token authenticator with a fixed table, recording what it was asked."""

    def __init__(self, table: dict[str, str], error: str | None = None, later: bool = False):
        self.table = table
        self.error = error
        self.later = later
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.pending: list[Deferred[Any]] = []

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> Any:
        self.calls.append((token, audiences))
        if self.error is not None:
            if self.later:
                return defer.fail(AuthenticationError(self.error))
            raise AuthenticationError(self.error)
        name = self.table.get(token)
        result = AuthResult(UserInfo(name)) if name else None
        if self.later:
            d: Deferred[Any] = Deferred()
            self.pending.append(d)
            d.result_value = result  # type: ignore[attr-defined]
            return d
        return result

    def fire(self) -> None:
        for d in self.pending:
            d.callback(d.result_value)  # type: ignore[attr-defined]
        self.pending.clear()


def bearer(value: str) -> FakeRequest:
    return FakeRequest({"Authorization": value})


@pytest.mark.parametrize(
    "header",
    ["Bearer good", "bearer good", "BEARER good", "  Bearer good  ", "Bearer good extra"],
)
def test_bearer_accepts(header: str) -> None:
    tokens = Tokens({"good": "alice"})
    result = BearerTokenAuthenticator(tokens, ("api",)).authenticate(bearer(header))
    assert result_of(result).user.name == "alice"
    assert tokens.calls == [("good", ("api",))]


@pytest.mark.parametrize("header", ["Basic Zm9vOmJhcg==", "Bearer", "Bearertoken", "", "   "])
def test_bearer_ignores_other_schemes(header: str) -> None:
    tokens = Tokens({"good": "alice"})
    assert BearerTokenAuthenticator(tokens).authenticate(bearer(header)) is None
    assert tokens.calls == []


def test_bearer_extra_space_is_ignored_with_a_warning() -> None:
    tokens = Tokens({"good": "alice"})
    request = bearer("Bearer  good")
    assert BearerTokenAuthenticator(tokens).authenticate(request) is None
    assert request.responseHeaders.getRawHeaders(b"warning") == [EXTRA_SPACE_WARNING]
    assert EXTRA_SPACE_WARNING == (
        b'299 - "the provided Authorization header contains extra space before the bearer '
        b'token, and is ignored"'
    )


def test_unknown_token_is_an_error_not_anonymous() -> None:
    with pytest.raises(AuthenticationError, match=r"^invalid bearer token$"):
        BearerTokenAuthenticator(Tokens({})).authenticate(bearer("Bearer unknown"))


def test_no_access_token_query_parameter() -> None:
    request = FakeRequest(path=b"/api?access_token=good")
    request.uri = b"/api?access_token=good"
    assert BearerTokenAuthenticator(Tokens({"good": "alice"})).authenticate(request) is None


def test_token_union_first_success_errors_do_not_stop() -> None:
    failing = Tokens({}, error="broken")
    empty = Tokens({})
    good = Tokens({"t": "bob"})
    union = TokenUnion([failing, empty, good])
    assert result_of(union.authenticate_token("t", ())).user.name == "bob"
    with pytest.raises(AuthenticationError, match=r"^broken$"):
        union.authenticate_token("other", ())
    assert TokenUnion([empty]).authenticate_token("x", ()) is None


def test_token_union_aggregates_errors_in_order() -> None:
    union = TokenUnion([Tokens({}, error="one"), Tokens({}, error="two")])
    with pytest.raises(AuthenticationError, match=r"^\[one, two\]$"):
        union.authenticate_token("x", ())


def test_union_mixes_deferred_and_synchronous() -> None:
    later = Tokens({"t": "late"}, later=True)
    union = TokenUnion([Tokens({}, error="sync error"), later, Tokens({"u": "sync"})])
    d = union.authenticate_token("u", ())
    assert isinstance(d, Deferred)
    later.fire()
    assert result_of(d).user.name == "sync"
    d = union.authenticate_token("t", ())
    later.fire()
    assert result_of(d).user.name == "late"
    failing = TokenUnion([Tokens({}, error="async error", later=True)])
    with pytest.raises(AuthenticationError, match=r"async error"):
        result_of(failing.authenticate_token("x", ()))


def test_unexpected_exception_counts_as_error() -> None:
    class Broken:
        def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> Any:
            raise RuntimeError("kaput")

    with pytest.raises(AuthenticationError, match=r"kaput"):
        TokenUnion([Broken()]).authenticate_token("x", ())


def test_request_union_and_group_adder() -> None:
    class Fixed:
        def __init__(self, result: Any) -> None:
            self.result = result

        def authenticate(self, request: Any) -> Any:
            if isinstance(self.result, Exception):
                raise self.result
            return self.result

    alice = AuthResult(UserInfo("alice", groups=("dev",)), ("api",))
    top = TopLevelAuthenticator(
        RequestUnion([Fixed(AuthenticationError("bad cert")), Fixed(None), Fixed(alice)])
    )
    result = result_of(top.authenticate(FakeRequest()))
    assert result.user.groups == ("dev", "system:authenticated")
    assert result.audiences == ("api",)
    with pytest.raises(AuthenticationError, match=r"bad cert"):
        TopLevelAuthenticator(
            RequestUnion([Fixed(AuthenticationError("bad cert")), Fixed(None)])
        ).authenticate(FakeRequest())
    assert TopLevelAuthenticator(RequestUnion([])).authenticate(FakeRequest()) is None


def test_group_adder_rules() -> None:
    assert add_authenticated_group(UserInfo("a")).groups == ("system:authenticated",)
    assert add_authenticated_group(UserInfo("a", groups=("x",))).groups == (
        "x",
        "system:authenticated",
    )
    for groups in (("system:authenticated",), ("system:unauthenticated",)):
        assert add_authenticated_group(UserInfo("a", groups=groups)).groups == groups
    anonymous = UserInfo("system:anonymous", groups=("g",))
    assert add_authenticated_group(anonymous) is anonymous


def test_anonymous_conditions_answer_only_listed_paths() -> None:
    top = TopLevelAuthenticator(RequestUnion([]), frozenset({"/livez", "/readyz"}))
    result = result_of(top.authenticate(FakeRequest(path=b"/livez")))
    assert result.user == UserInfo("system:anonymous", groups=("system:unauthenticated",))
    assert top.authenticate(FakeRequest(path=b"/livez/ping")) is None
    assert top.authenticate(FakeRequest(path=b"/api")) is None


def test_token_cache_success_ttl_and_no_failure_cache() -> None:
    clock = Clock()
    tokens = Tokens({"t": "alice"})
    cache = TokenCache(tokens, clock, 10.0, 0.0, cache_errors=True)
    assert result_of(cache.authenticate_token("t", ("a",))).user.name == "alice"
    assert result_of(cache.authenticate_token("t", ("a",))).user.name == "alice"
    assert len(tokens.calls) == 1
    # Other audiences: another entry.
    cache.authenticate_token("t", ("b",))
    assert len(tokens.calls) == 2
    clock.advance(10.1)
    cache.authenticate_token("t", ("a",))
    assert len(tokens.calls) == 3
    # Unknown tokens are asked again every time (failure TTL 0).
    cache.authenticate_token("u", ())
    cache.authenticate_token("u", ())
    assert [c[0] for c in tokens.calls[3:]] == ["u", "u"]


def test_token_cache_failure_ttl_and_errors() -> None:
    clock = Clock()
    tokens = Tokens({})
    cache = TokenCache(tokens, clock, 60.0, 30.0, cache_errors=False)
    assert cache.authenticate_token("u", ()) is None
    assert cache.authenticate_token("u", ()) is None
    assert len(tokens.calls) == 1
    clock.advance(31)
    cache.authenticate_token("u", ())
    assert len(tokens.calls) == 2
    tokens.error = "webhook down"
    for _ in range(2):
        with pytest.raises(AuthenticationError):
            cache.authenticate_token("e", ())
    assert len(tokens.calls) == 4  # errors are not cached


def test_token_cache_shares_inflight_lookups() -> None:
    clock = Clock()
    tokens = Tokens({"t": "alice"}, later=True)
    cache = TokenCache(tokens, clock, 10.0, 0.0, cache_errors=True)
    first = cache.authenticate_token("t", ())
    second = cache.authenticate_token("t", ())
    assert len(tokens.calls) == 1
    tokens.fire()
    assert result_of(first).user.name == "alice"
    assert result_of(second).user.name == "alice"
    assert result_of(cache.authenticate_token("t", ())).user.name == "alice"
    assert len(tokens.calls) == 1


def ws_request(protocols: str) -> FakeRequest:
    return FakeRequest(
        {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Protocol": protocols}
    )


def b64(token: str) -> str:
    return base64.urlsafe_b64encode(token.encode()).rstrip(b"=").decode()


def test_websocket_protocol_token() -> None:
    auth = WebSocketProtocolAuthenticator(Tokens({"good": "alice"}))
    request = ws_request(f"base64url.bearer.authorization.k8s.io.{b64('good')}, v4.channel.k8s.io")
    assert result_of(auth.authenticate(request)).user.name == "alice"
    assert request.requestHeaders.getRawHeaders(b"sec-websocket-protocol") == [b"v4.channel.k8s.io"]
    with pytest.raises(AuthenticationError, match=r"missing additional subprotocol"):
        auth.authenticate(ws_request(f"base64url.bearer.authorization.k8s.io.{b64('good')}"))
    with pytest.raises(AuthenticationError, match=r"invalid base64.bearer.authorization token"):
        auth.authenticate(ws_request("base64url.bearer.authorization.k8s.io.!!!, v4"))
    with pytest.raises(AuthenticationError, match=r"^invalid bearer token$"):
        auth.authenticate(ws_request(f"base64url.bearer.authorization.k8s.io.{b64('x')}, v4"))
    # Not a WebSocket request: ignored.
    plain = FakeRequest(
        {"Sec-WebSocket-Protocol": f"base64url.bearer.authorization.k8s.io.{b64('good')}"}
    )
    assert auth.authenticate(plain) is None
