"""``authentication.k8s.io/v1``: SelfSubjectReview (who am I) and TokenReview.

References (``k8s.io/kubernetes``): ``pkg/registry/authentication/selfsubjectreview/rest.go``
(a new object: ``creationTimestamp`` now and the request's user, after impersonation) and
``pkg/registry/authentication/tokenreview/storage.go``: an empty token is a 400; the token is
authenticated by the server's token authenticators as a bearer token would be, for
``spec.audiences`` or, when empty, the server's API audiences; the request object comes back
with ``status`` (``authenticated``, ``user``, ``audiences`` and the authenticators' ``error``).
A user whose audiences miss the requested ones is the reference's 500 ``error validating
audiences``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from twisted.internet.defer import Deferred

from apiserver.apimachinery import errors
from apiserver.auth.authn.common import TokenAuthenticator
from apiserver.auth.authn.union import INVALID_TOKEN, add_authenticated_group
from apiserver.auth.interface import AuthenticationError, AuthResult, UserInfo

GROUP = "authentication.k8s.io"
Obj = dict[str, Any]


def self_subject_review(user: UserInfo | None, now: str) -> Obj:
    if user is None:
        raise errors.bad_request("no user present on request")
    return {"metadata": {"creationTimestamp": now}, "status": {"userInfo": user.to_json()}}


async def token_review(
    obj: Obj, tokens: TokenAuthenticator | None, api_audiences: Sequence[str]
) -> Obj:
    """The request object with its ``status`` filled in (see the module docstring)."""
    spec = obj.get("spec") or {}
    token = spec.get("token") or ""
    if not token:
        raise errors.bad_request("token is required for TokenReview in authentication")
    if tokens is None:
        # No token authenticator: nothing to ask (the status keeps its always-written user).
        return {**obj, "status": {"user": {}}}
    audiences = tuple(spec.get("audiences") or ()) or tuple(api_audiences)
    status: Obj = {}
    result: AuthResult | None = None
    try:
        outcome = tokens.authenticate_token(token, audiences)
        result = await outcome if isinstance(outcome, Deferred) else outcome
        if result is None:
            raise AuthenticationError(INVALID_TOKEN)
    except AuthenticationError as error:
        status["error"] = str(error)
        result = None
    if result is not None:
        status["authenticated"] = True
        if audiences and result.audiences and not set(audiences) & set(result.audiences):
            raise errors.internal_error("error validating audiences")
        status["user"] = add_authenticated_group(result.user).to_json()
        if result.audiences:
            status["audiences"] = list(result.audiences)
    ordered: Obj = {}
    for key in ("authenticated", "user", "error", "audiences"):
        if key in status:
            ordered[key] = status[key]
        elif key == "user":
            ordered["user"] = {}
    return {**obj, "status": ordered}


__all__ = ["GROUP", "self_subject_review", "token_review"]
