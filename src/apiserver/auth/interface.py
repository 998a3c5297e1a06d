"""The shared vocabulary of authentication and authorization.

Mirrors k8s.io/apiserver ``pkg/authentication/user`` (user.Info), ``pkg/authentication/
authenticator`` (Request authenticators: a user, no opinion, or an error) and ``pkg/
authorization/authorizer`` (Attributes and the Allow / Deny / NoOpinion decisions).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol

import attrs
from twisted.internet.defer import Deferred

from apiserver.http.request import HTTPRequest

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
MASTERS = "system:masters"


@attrs.frozen
class UserInfo:
    """Who made a request (user.DefaultInfo)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``authenticationv1.UserInfo`` as JSON (audit events, SelfSubjectReview,
        TokenReview): every key ``omitempty``, ``extra`` by sorted key."""
        out: dict[str, Any] = {}
        if self.name:
            out["username"] = self.name
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {key: list(values) for key, values in sorted(self.extra.items())}
        return out


#: No audit annotations (shared: most results carry none).
NO_ANNOTATIONS: Mapping[str, str] = MappingProxyType({})


@attrs.frozen
class AuthResult:
    """A successful authentication: the user and the audiences the credential was valid for.

    ``annotations`` are the audit annotations the authenticator added for this request
    (Go: ``audit.AddAuditAnnotation`` on the request's context, e.g. the service-account
    authenticator's ``authentication.k8s.io/stale-token`` in
    k8s.io/kubernetes/pkg/serviceaccount/claims.go); audit records them on the event."""

    user: UserInfo
    audiences: tuple[str, ...] = ()
    annotations: Mapping[str, str] = NO_ANNOTATIONS


class AuthenticationError(Exception):
    """Credentials were presented and are invalid: the request gets 401 even with anonymous on."""


class Authenticator(Protocol):
    """Returns an AuthResult, None (no opinion: no credential of this kind), or raises
    AuthenticationError; may return a Deferred of the same."""

    def authenticate(
        self, request: HTTPRequest
    ) -> AuthResult | Deferred[AuthResult | None] | None: ...


@attrs.frozen
class Attributes:
    """authorizer.AttributesRecord: what is asked, by whom."""

    user: UserInfo
    verb: str
    resource_request: bool
    path: str = ""
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


ALLOW = "Allow"
DENY = "Deny"
NO_OPINION = "NoOpinion"


@attrs.frozen
class Decision:
    decision: str
    reason: str = ""


class Authorizer(Protocol):
    def authorize(self, attributes: Attributes) -> Decision | Deferred[Decision]: ...
