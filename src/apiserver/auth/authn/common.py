"""Shared pieces of the authenticators: the token interface, errors, audiences.

Mirrors ``AS/pkg/authentication/authenticator`` (``Token``, ``Audiences``,
``WrapAudienceAgnosticToken``) and ``AM/pkg/util/errors`` (aggregated error text).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from twisted.internet.defer import Deferred

from apiserver.apimachinery.errors import aggregate_text
from apiserver.auth.interface import AuthenticationError, AuthResult
from apiserver.gocompat.quote import go_quote
from apiserver.http.request import HTTPRequest

#: ``authentication.kubernetes.io/credential-id``: which credential authenticated a user.
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"

TokenOutcome = AuthResult | None | Deferred[AuthResult | None]


class ConfigError(ValueError):
    """A flag value or a file named by one cannot be used; start-up stops with this message."""


class TokenAuthenticator(Protocol):
    """authenticator.Token: a user for a bearer token, None (not mine) or AuthenticationError.

    ``audiences`` are the API audiences of the request (``--api-audiences``, defaulting to the
    service-account issuers); empty when none are configured.
    """

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> TokenOutcome: ...


def intersect(first: Iterable[str], second: Iterable[str]) -> tuple[str, ...]:
    """The members of ``first`` also in ``second``, in ``first``'s order (Audiences.Intersect)."""
    wanted = set(second)
    seen: set[str] = set()
    out: list[str] = []
    for item in first:
        if item in wanted and item not in seen:
            seen.add(item)
            out.append(item)
    return tuple(out)


def aggregate_message(errors: Sequence[BaseException]) -> str:
    """utilerrors.NewAggregate's text: one message as is, several as ``[a, b]``."""
    return aggregate_text(errors)


def go_string_list(values: Sequence[str]) -> str:
    """Go's ``%q`` of a ``[]string``: ``["a" "b"]``."""
    return "[" + " ".join(go_quote(v) for v in values) + "]"


class AudienceAgnostic:
    """WrapAudienceAgnosticToken: for credentials not bound to an audience (static tokens,
    bootstrap tokens, OIDC, certificates), the request's audiences must meet the server's
    own (``implicit``) and the result carries the intersection."""

    def __init__(self, delegate: TokenAuthenticator, implicit: Sequence[str]) -> None:
        self.delegate = delegate
        self.implicit = tuple(implicit)

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> TokenOutcome:
        if not audiences:
            return self.delegate.authenticate_token(token, audiences)
        auds = intersect(self.implicit, audiences)
        if not auds:
            return None
        result = self.delegate.authenticate_token(token, audiences)
        if isinstance(result, Deferred):
            return result.addCallback(_with_audiences, auds)
        return _with_audiences(result, auds)


def _with_audiences(result: AuthResult | None, auds: tuple[str, ...]) -> AuthResult | None:
    if result is None:
        return None
    return AuthResult(result.user, auds, result.annotations)


def as_auth_error(error: BaseException | None) -> AuthenticationError:
    """Any failure of an authenticator counts as invalid credentials (Go returns it as err)."""
    if isinstance(error, AuthenticationError):
        return error
    return AuthenticationError(str(error) or type(error).__name__)


def read_file(path: str, flag: str) -> bytes:
    """The bytes of a file named by ``--flag``; ConfigError naming both when unreadable."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as error:
        raise ConfigError(f"--{flag}: cannot read {path!r}: {error.strerror or error}") from None


def header(request: HTTPRequest, name: bytes) -> bytes | None:
    """The first value of a request header (Go's ``Header.Get``), or None."""
    values = request.requestHeaders.getRawHeaders(name)
    return values[0] if values else None
