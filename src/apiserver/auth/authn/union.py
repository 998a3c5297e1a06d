"""Combining authenticators: unions, the bearer-token readers, the token cache, the group adder.

References (all under ``AS/pkg/authentication``):

- ``request/union/union.go`` and ``token/union/union.go``: the first authenticator that
  succeeds wins; errors are collected and do **not** stop the chain; if nobody succeeds the
  result is "no opinion" plus the aggregated errors (an error when there were any).
- ``request/bearertoken/bearertoken.go``: ``Authorization`` is trimmed and split on single
  spaces into at most 3 parts; the scheme must be ``bearer`` (any case); the token is part 2
  (``Bearer a b`` gives ``a``); an empty token (two spaces) is ignored and adds the warning
  ``299 - "the provided Authorization header contains extra space before the bearer token, and
  is ignored"``; a token no authenticator accepts is the error ``invalid bearer token`` (so a
  bad token is a 401, never anonymous). There is no ``?access_token=`` query parameter (it
  was removed from kube-apiserver long ago).
- ``request/websocket/protocol.go``: WebSocket requests may carry the token as the
  ``Sec-WebSocket-Protocol`` entry ``base64url.bearer.authorization.k8s.io.<base64url>``.
- ``token/cache/cached_token_authenticator.go``: token results cached per (audiences, token)
  hash for a success TTL and a failure TTL; concurrent look-ups of one token share the work.
- ``group/authenticated_group_adder.go``: ``system:authenticated`` is appended to every
  authenticated user, unless the user is ``system:anonymous`` or already in
  ``system:authenticated`` or ``system:unauthenticated``.
- ``request/anonymous/anonymous.go``: with ``anonymous.conditions`` only the listed paths may
  be anonymous (:class:`TopLevelAuthenticator` answers ``system:anonymous`` itself for them).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import unquote

import attrs
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.auth.authn.common import (
    TokenAuthenticator,
    TokenOutcome,
    aggregate_message,
    as_auth_error,
    header,
)
from apiserver.auth.interface import (
    ANONYMOUS,
    AUTHENTICATED,
    UNAUTHENTICATED,
    AuthenticationError,
    Authenticator,
    AuthResult,
    UserInfo,
)
from apiserver.http.request import HTTPRequest

log = Logger()

Outcome = AuthResult | None | Deferred[AuthResult | None]

INVALID_TOKEN = "invalid bearer token"
EXTRA_SPACE_WARNING = (
    b'299 - "the provided Authorization header contains extra space before the bearer token, '
    b'and is ignored"'
)
WEBSOCKET_PREFIX = "base64url.bearer.authorization.k8s.io."


def first_success(attempts: Sequence[Callable[[], Outcome]]) -> Outcome:
    """Run ``attempts`` in order until one gives a result; aggregate the errors otherwise.

    Synchronous attempts stay synchronous (no Deferred is made unless an attempt returns one).
    """
    return _run(attempts, 0, [])


def _run(attempts: Sequence[Callable[[], Outcome]], start: int, errors: list[Exception]) -> Outcome:
    for index in range(start, len(attempts)):
        try:
            result = attempts[index]()
        except Exception as error:
            if not isinstance(error, AuthenticationError):
                log.failure("authenticator failed", Failure())
            errors.append(as_auth_error(error))
            continue
        if result is None:
            continue
        # AuthResult first: Deferred is an ABC (typing.Awaitable), so isinstance() of
        # anything else runs ABCMeta.__instancecheck__ in Python.
        if type(result) is not AuthResult and isinstance(result, Deferred):
            return result.addCallbacks(
                _next_if_none,
                _next_after_error,
                callbackArgs=(attempts, index + 1, errors),
                errbackArgs=(attempts, index + 1, errors),
            )
        return result
    if errors:
        raise AuthenticationError(aggregate_message(errors))
    return None


def _next_if_none(
    result: AuthResult | None,
    attempts: Sequence[Callable[[], Outcome]],
    start: int,
    errors: list[Exception],
) -> Outcome:
    if result is not None:
        return result
    return _run(attempts, start, errors)


def _next_after_error(
    failure: Failure,
    attempts: Sequence[Callable[[], Outcome]],
    start: int,
    errors: list[Exception],
) -> Outcome:
    if not failure.check(AuthenticationError):
        log.failure("authenticator failed", failure)
    errors.append(as_auth_error(failure.value))
    return _run(attempts, start, errors)


class RequestUnion:
    """union.New for request authenticators."""

    def __init__(self, authenticators: Sequence[Authenticator]) -> None:
        self.authenticators = tuple(authenticators)

    def authenticate(self, request: HTTPRequest) -> Outcome:
        return first_success(
            [lambda a=a: a.authenticate(request) for a in self.authenticators]  # type: ignore[misc]
        )


class TokenUnion:
    """tokenunion.New for token authenticators."""

    def __init__(self, authenticators: Sequence[TokenAuthenticator]) -> None:
        self.authenticators = tuple(authenticators)

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> TokenOutcome:
        return first_success(
            [
                lambda a=a: a.authenticate_token(token, audiences)  # type: ignore[misc]
                for a in self.authenticators
            ]
        )


@attrs.frozen
class _Entry:
    expires: float
    result: AuthResult | None
    error: str | None


class TokenCache:
    """cached_token_authenticator: results kept per hash(audiences, token).

    Successes live ``success_ttl`` seconds, "not mine" results ``failure_ttl``; errors are
    cached (with the failure TTL) only when ``cache_errors``. A TTL of 0 caches nothing of that
    kind. At most ``max_entries`` are kept (expired ones go first, then the oldest).
    """

    def __init__(
        self,
        delegate: TokenAuthenticator,
        clock: IReactorTime,
        success_ttl: float,
        failure_ttl: float,
        cache_errors: bool,
        max_entries: int = 4096,
    ) -> None:
        self.delegate = delegate
        self.clock = clock
        self.success_ttl = success_ttl
        self.failure_ttl = failure_ttl
        self.cache_errors = cache_errors
        self.max_entries = max_entries
        self._salt = os.urandom(32)
        self._entries: dict[bytes, _Entry] = {}
        self._inflight: dict[bytes, list[Deferred[AuthResult | None]]] = {}

    def _key(self, token: str, audiences: tuple[str, ...]) -> bytes:
        digest = hashlib.sha256(self._salt)
        for audience in audiences:
            digest.update(len(audience).to_bytes(4, "big") + audience.encode())
        digest.update(b"\x00" + token.encode())
        return digest.digest()

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> TokenOutcome:
        key = self._key(token, audiences)
        now = self.clock.seconds()
        entry = self._entries.get(key)
        if entry is not None:
            if entry.expires > now:
                if entry.error is not None:
                    raise AuthenticationError(entry.error)
                return entry.result
            del self._entries[key]
        waiting = self._inflight.get(key)
        if waiting is not None:
            d: Deferred[AuthResult | None] = Deferred()
            waiting.append(d)
            return d
        try:
            result = self.delegate.authenticate_token(token, audiences)
        except AuthenticationError as error:
            self._store(key, None, str(error))
            raise
        if not isinstance(result, Deferred):
            self._store(key, result, None)
            return result
        self._inflight[key] = []
        return result.addBoth(self._finished, key)

    def _finished(self, result: Any, key: bytes) -> Any:
        waiting = self._inflight.pop(key, [])
        if isinstance(result, Failure):
            error = as_auth_error(result.value)
            if not result.check(AuthenticationError):
                log.failure("token authenticator failed", result)
            self._store(key, None, str(error))
            for d in waiting:
                d.errback(Failure(AuthenticationError(str(error))))
            return Failure(error)
        self._store(key, result, None)
        for d in waiting:
            d.callback(result)
        return result

    def _store(self, key: bytes, result: AuthResult | None, error: str | None) -> None:
        if error is not None:
            ttl = self.failure_ttl if self.cache_errors else 0.0
        elif result is not None:
            ttl = self.success_ttl
        else:
            ttl = self.failure_ttl
        if ttl <= 0:
            return
        now = self.clock.seconds()
        if len(self._entries) >= self.max_entries:
            for stale in [k for k, e in self._entries.items() if e.expires <= now]:
                del self._entries[stale]
            while len(self._entries) >= self.max_entries:
                del self._entries[next(iter(self._entries))]
        self._entries[key] = _Entry(now + ttl, result, error)


class BearerTokenAuthenticator:
    """Reads ``Authorization: Bearer <token>`` and asks the token authenticators."""

    def __init__(self, tokens: TokenAuthenticator, audiences: Sequence[str] = ()) -> None:
        self.tokens = tokens
        self.audiences = tuple(audiences)

    def authenticate(self, request: HTTPRequest) -> Outcome:
        raw = header(request, b"authorization")
        if not raw:
            return None
        value = raw.decode("latin-1").strip()
        if not value:
            return None
        parts = value.split(" ", 2)
        if len(parts) < 2 or parts[0].lower() != "bearer":
            return None
        token = parts[1]
        if not token:
            if len(parts) == 3:
                request.responseHeaders.addRawHeader(b"warning", EXTRA_SPACE_WARNING)
            return None
        return _default_error(self.tokens.authenticate_token(token, self.audiences))


def _default_error(result: TokenOutcome) -> Outcome:
    """No authenticator accepted the token and none errored: ``invalid bearer token``."""
    if isinstance(result, Deferred):
        return result.addCallback(_require)
    return _require(result)


def _require(result: AuthResult | None) -> AuthResult:
    if result is None:
        raise AuthenticationError(INVALID_TOKEN)
    return result


def is_websocket_request(request: HTTPRequest) -> bool:
    """wsstream.IsWebSocketRequest: ``Connection`` has ``upgrade`` and ``Upgrade`` is
    ``websocket`` (both case-insensitive)."""
    upgrade = header(request, b"upgrade") or b""
    if upgrade.strip().lower() != b"websocket":
        return False
    for value in request.requestHeaders.getRawHeaders(b"connection") or ():
        if any(t.strip().lower() == b"upgrade" for t in value.split(b",")):
            return True
    return False


class WebSocketProtocolAuthenticator:
    """The bearer token of a WebSocket request, from ``Sec-WebSocket-Protocol``."""

    def __init__(self, tokens: TokenAuthenticator, audiences: Sequence[str] = ()) -> None:
        self.tokens = tokens
        self.audiences = tuple(audiences)

    def authenticate(self, request: HTTPRequest) -> Outcome:
        if not is_websocket_request(request):
            return None
        token = ""
        seen = False
        kept: list[str] = []
        for raw in request.requestHeaders.getRawHeaders(b"sec-websocket-protocol") or ():
            for protocol in raw.decode("latin-1").split(","):
                protocol = protocol.strip()
                if not protocol.startswith(WEBSOCKET_PREFIX):
                    kept.append(protocol)
                    continue
                if seen:
                    raise AuthenticationError(
                        "multiple base64.bearer.authorization tokens specified"
                    )
                seen = True
                encoded = protocol[len(WEBSOCKET_PREFIX) :]
                try:
                    if "=" in encoded:
                        raise ValueError("padding")
                    decoded = base64.b64decode(
                        encoded + "=" * (-len(encoded) % 4), altchars=b"-_", validate=True
                    )
                except (binascii.Error, ValueError):
                    raise AuthenticationError(
                        "invalid base64.bearer.authorization token encoding"
                    ) from None
                try:
                    token = decoded.decode("utf-8")
                except UnicodeDecodeError:
                    raise AuthenticationError("invalid base64.bearer.authorization token") from None
        if token and not kept:
            raise AuthenticationError("missing additional subprotocol")
        if not token:
            return None
        result = _default_error(self.tokens.authenticate_token(token, self.audiences))

        def accepted(value: AuthResult | None) -> AuthResult | None:
            request.requestHeaders.setRawHeaders(
                b"sec-websocket-protocol", [",".join(kept).encode("latin-1")]
            )
            return value

        if isinstance(result, Deferred):
            return result.addCallback(accepted)
        assert result is not None
        return accepted(result)


def add_authenticated_group(user: UserInfo) -> UserInfo:
    """AuthenticatedGroupAdder: append ``system:authenticated`` where it belongs."""
    if user.name == ANONYMOUS:
        return user
    if AUTHENTICATED in user.groups or UNAUTHENTICATED in user.groups:
        return user
    return attrs.evolve(user, groups=(*user.groups, AUTHENTICATED))


def _with_group(result: AuthResult | None) -> AuthResult | None:
    if result is None:
        return None
    return AuthResult(add_authenticated_group(result.user), result.audiences, result.annotations)


ANONYMOUS_RESULT = AuthResult(UserInfo(name=ANONYMOUS, groups=(UNAUTHENTICATED,)))


class TopLevelAuthenticator:
    """What :func:`apiserver.auth.authn.build_authenticator` returns.

    The request union wrapped by the authenticated-group adder. With ``anonymous_paths`` (the
    ``anonymous.conditions`` of an authentication configuration), a request without credentials
    for one of those exact paths is answered ``system:anonymous`` here; the filter treats every
    other "no opinion" by its anonymous flag (which is then False).
    """

    def __init__(
        self,
        union: RequestUnion,
        anonymous_paths: frozenset[str] | None = None,
        tokens: TokenAuthenticator | None = None,
    ) -> None:
        self.union = union
        self.anonymous_paths = anonymous_paths
        #: The token authenticators (cached) the bearer readers ask: what TokenReview asks
        #: (``KK/pkg/registry/authentication/tokenreview/storage.go``); None without any.
        self.tokens = tokens

    def authenticate(self, request: HTTPRequest) -> Outcome:
        result = self.union.authenticate(request)
        if result is not None and type(result) is not AuthResult and isinstance(result, Deferred):
            return result.addCallback(self._finish, request)
        return self._finish(result, request)

    def _finish(self, result: AuthResult | None, request: HTTPRequest) -> AuthResult | None:
        if result is None:
            paths = self.anonymous_paths
            if paths:
                raw = request.path.decode("utf-8", "replace")
                path = unquote(raw) if "%" in raw else raw
                if path in paths:
                    return ANONYMOUS_RESULT
            return None
        return _with_group(result)
