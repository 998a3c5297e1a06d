"""The request-info, authentication, impersonation and authorization stages of the chain.

Each is a :class:`apiserver.http.app.Filter`; :func:`apiserver.http.chain.build_handler_chain`
puts them in kube-apiserver's order (``DefaultBuildHandlerChain`` in
k8s.io/apiserver/pkg/server/config.go), with the audit slot between authentication and
impersonation and the priority-and-fairness slot between impersonation and authorization.
Behaviour follows the filters in k8s.io/apiserver/pkg/endpoints/filters:

1. **Request info** (``request.go``/``requestinfo.go``): a path that looks like a resource
   request but cannot be read (``/api/v1/watch``) is a 500, text/plain
   ``Internal Server Error: "<uri>": unable to determine kind and namespace from url, <url>``.
2. **Authentication** (``authentication.go``, ``anonymous.go``): the authenticator's error
   (bad credentials) is a 401 even when anonymous requests are allowed; no opinion becomes
   ``system:anonymous`` in ``system:unauthenticated`` when they are, a 401 otherwise; non-empty
   ``--api-audiences`` must meet the credential's audiences. The 401 is a negotiated Status
   (``{"kind":"Status",...,"message":"Unauthorized","reason":"Unauthorized","code":401}``), with
   no ``WWW-Authenticate``. Afterwards ``Authorization`` and the front-proxy headers
   (``X-Remote-User``, ``X-Remote-Uid``, ``X-Remote-Group``, ``X-Remote-Extra-*`` and the
   configured ``--requestheader-*`` names) are removed.
3. **Impersonation** (see :mod:`apiserver.auth.impersonation`).
4. **Authorization** (``authorization.go``): Allow lets the request through; a refusal that
   came with an authorizer error is a 500 (text/plain ``Internal Server Error: "<uri>":
   <error>``); any other refusal a 403 Status (see :func:`forbidden_message`), with
   ``X-Content-Type-Options: nosniff``.

What the stages leave on the request's :class:`apiserver.http.app.RequestInfo` for later
stages and handlers (Go's request context): ``resolved`` (the
:class:`~apiserver.auth.requestinfo.RequestInfo`), ``user`` (the authenticated user, replaced
by the impersonated one), ``authenticated_user`` (what audit logs as ``user``),
``impersonated_user`` and ``authorization`` (``("allow" | "forbid", reason)``: the audit
annotations ``authorization.k8s.io/decision`` and ``authorization.k8s.io/reason``; ``("",
"internal error")`` after an authorizer error, when only the reason annotation is set).

Performance: every stage answers synchronously unless an authenticator or authorizer returns
a Deferred (webhooks), so the usual request (AlwaysAllow, RBAC or ABAC with anonymous or x509)
creates no Deferred; with an AlwaysAllow chain the authorizer is skipped altogether. The
authentication stage's one pass over the headers also notes ``Impersonate-*`` headers, so the
impersonation stage costs one attribute test when there are none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.auth.authz import AuthorizerError
from apiserver.auth.impersonation import (
    ImpersonationError,
    ImpersonationRequest,
    build_requests,
    impersonated_user,
    strip_headers,
)
from apiserver.auth.interface import (
    ALLOW,
    ANONYMOUS,
    UNAUTHENTICATED,
    Attributes,
    AuthenticationError,
    Authenticator,
    Authorizer,
    AuthResult,
    Decision,
    UserInfo,
)
from apiserver.auth.requestinfo import RequestInfo, RequestInfoError, parse_request_info
from apiserver.discovery.handlers import status_response
from apiserver.gocompat.quote import go_quote
from apiserver.http.app import Filter, Verdict
from apiserver.http.app import RequestInfo as HTTPRequestInfo
from apiserver.http.request import HTTPRequest
from apiserver.http.response import NOSNIFF, Response

if TYPE_CHECKING:
    from apiserver.auth.authz.config import ConfigReloader

log = Logger()

ANONYMOUS_USER = UserInfo(name=ANONYMOUS, groups=(UNAUTHENTICATED,))
STANDARD_PROXY_HEADERS = (b"x-remote-user", b"x-remote-uid", b"x-remote-group")
STANDARD_EXTRA_PREFIX = b"x-remote-extra-"
_HTML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})

#: ``True``/``False``, or a function of the URL path (``anonymous.conditions``).
AnonymousPolicy = bool | Callable[[str], bool]
Outcome = Response | None


def attributes_for(info: RequestInfo, user: UserInfo) -> Attributes:
    """``GetAuthorizerAttributes``: the request info and the user."""
    if not info.resource_request:
        return Attributes(user=user, verb=info.verb, resource_request=False, path=info.path)
    return Attributes(
        user=user,
        verb=info.verb,
        resource_request=True,
        path=info.path,
        namespace=info.namespace,
        api_group=info.api_group,
        api_version=info.api_version,
        resource=info.resource,
        subresource=info.subresource,
        name=info.name,
    )


def forbidden_message(attributes: Attributes, reason: str = "") -> str:
    """The 403 Status message (``responsewriters.Forbidden`` + ``errors.NewForbidden``).

    ``forbidden: User "u" cannot get path "/p"`` for non-resource requests;
    ``<res>[.<group>][ "<name>"] is forbidden: User "u" cannot <verb> resource
    "<res>[/<sub>]" in API group "<g>" (in the namespace "<ns>"|at the cluster scope)``
    otherwise; ``: <reason>`` appended when the authorizers gave one. ``&``, ``<`` and ``>`` in
    the part before the reason are HTML-escaped.
    """
    user = go_quote(attributes.user.name)
    if not attributes.resource_request:
        msg = f"User {user} cannot {attributes.verb} path {go_quote(attributes.path)}"
    else:
        resource = attributes.resource
        if attributes.subresource:
            resource += "/" + attributes.subresource
        msg = (
            f"User {user} cannot {attributes.verb} resource {go_quote(resource)} "
            f"in API group {go_quote(attributes.api_group)} "
        )
        if attributes.namespace:
            msg += f"in the namespace {go_quote(attributes.namespace)}"
        else:
            msg += "at the cluster scope"
    msg = msg.translate(_HTML_ESCAPES)
    if reason:
        msg = f"{msg}: {reason}"
    group, resource_name = attributes.api_group, attributes.resource
    if not group and not resource_name:
        return f"forbidden: {msg}"
    qualified = f"{resource_name}.{group}" if group else resource_name
    if attributes.name:
        return f"{qualified} {go_quote(attributes.name)} is forbidden: {msg}"
    return f"{qualified} is forbidden: {msg}"


def forbidden_details(attributes: Attributes) -> dict[str, str]:
    """``StatusDetails`` of the 403: name, group, kind (= resource), each only when set."""
    details: dict[str, str] = {}
    if attributes.name:
        details["name"] = attributes.name
    if attributes.api_group:
        details["group"] = attributes.api_group
    if attributes.resource:
        details["kind"] = attributes.resource
    return details


def forbidden_response(
    request: HTTPRequest, info: HTTPRequestInfo, attributes: Attributes, reason: str = ""
) -> Response:
    """The negotiated 403 Status with ``X-Content-Type-Options: nosniff``."""
    response = status_response(
        request,
        info,
        403,
        "Forbidden",
        forbidden_message(attributes, reason),
        forbidden_details(attributes),
    )
    return Response(response.code, (*response.headers, NOSNIFF), response.body)


def unauthorized_response(request: HTTPRequest, info: HTTPRequestInfo) -> Response:
    """The negotiated 401 Status (``apierrors.NewUnauthorized("Unauthorized")``)."""
    return status_response(request, info, 401, "Unauthorized", "Unauthorized", None)


def internal_error_response(request: HTTPRequest, error: str) -> Response:
    """``responsewriters.InternalError``: ``Internal Server Error: "<uri>": <err>``."""
    uri = request.uri.decode("utf-8", "replace")
    body = f"Internal Server Error: {go_quote(uri)}: {error}".encode()
    return Response(500, (("Content-Type", "text/plain"), NOSNIFF), body)


def resolve_request_info(request: HTTPRequest, info: HTTPRequestInfo) -> Verdict:
    """``WithRequestInfo``'s resolver (k8s.io/apiserver/pkg/endpoints/filters/requestinfo.go):
    fills ``info.resolved``, which every later stage reads; a path that cannot be read is a
    500.

    It runs right before authentication, after the wait group: the 503 of the shutdown gate
    and the request metrics come first, as they always have here.
    """
    query = info.query
    key = None
    if not query:
        # Without a query the answer depends on the method and path alone, and it is frozen:
        # clients repeat the same few request lines, so each is parsed once (bounded).
        key = (info.method, info.path)
        known = _RESOLVED.get(key)
        if known is not None:
            info.resolved = known
            return None
    try:
        resolved = parse_request_info(info.method, info.path, query)
    except RequestInfoError:
        # Parsed again for the message, which names the request's URI.
        try:
            parse_request_info(
                info.method, info.path, query, request.uri.decode("utf-8", "replace")
            )
        except RequestInfoError as error:
            return internal_error_response(request, str(error))
        raise
    if key is not None:
        if len(_RESOLVED) >= RESOLVED_MAX:
            _RESOLVED.clear()
        _RESOLVED[key] = resolved
    info.resolved = resolved
    return None


#: ``resolve_request_info``'s answers for requests without a query, by (method, path).
_RESOLVED: dict[tuple[str, str], RequestInfo] = {}
RESOLVED_MAX = 4096


class Authentication:
    """``WithAuthentication`` (k8s.io/apiserver/pkg/endpoints/filters/authentication.go).

    ``authenticator`` None means no credential is ever recognised: every request is
    anonymous, or a 401 when anonymous requests are off. Sets ``info.user`` and
    ``info.authenticated_user``, removes the credentials and front-proxy headers, and notes
    ``Impersonate-*`` headers in ``info.impersonating``.
    """

    def __init__(
        self,
        authenticator: Authenticator | None,
        anonymous: AnonymousPolicy,
        *,
        api_audiences: Sequence[str] = (),
        request_header_names: Iterable[str] = (),
        request_header_prefixes: Iterable[str] = (),
    ) -> None:
        self.authenticator = authenticator
        self.anonymous = anonymous
        self.api_audiences = frozenset(api_audiences)
        self._strip_names = tuple(
            dict.fromkeys(
                [b"authorization", *STANDARD_PROXY_HEADERS]
                + [name.lower().encode("latin-1") for name in request_header_names]
            )
        )
        self._strip_prefixes = tuple(
            dict.fromkeys(
                [STANDARD_EXTRA_PREFIX]
                + [p.lower().encode("latin-1") for p in request_header_prefixes]
            )
        )
        #: Called before a 401 is answered (the audit of failed authentication,
        #: ``WithFailedAuthenticationAudit`` in k8s.io/apiserver pkg/endpoints/filters/
        #: authn_audit.go); None when audit is off.
        self.on_failure: Callable[[HTTPRequest, HTTPRequestInfo], None] | None = None

    def _unauthorized(self, request: HTTPRequest, info: HTTPRequestInfo) -> Response:
        on_failure = self.on_failure
        if on_failure is not None:
            on_failure(request, info)
        return unauthorized_response(request, info)

    def __call__(self, request: HTTPRequest, info: HTTPRequestInfo) -> Verdict:
        authenticator = self.authenticator
        if authenticator is None:
            return self._authenticated(None, request, info)
        try:
            result = authenticator.authenticate(request)
        except AuthenticationError as error:
            log.debug("Unable to authenticate the request: {error}", error=error)
            return self._unauthorized(request, info)
        except Exception:
            log.failure("authenticator failed")
            return self._unauthorized(request, info)
        # The synchronous answer is tested first: Deferred is an ABC (typing.Awaitable), so
        # isinstance() of anything else runs ABCMeta.__instancecheck__ in Python.
        if result is not None and type(result) is not AuthResult and isinstance(result, Deferred):
            return result.addCallbacks(
                self._authenticated,
                self._authentication_failed,
                callbackArgs=(request, info),
                errbackArgs=(request, info),
            )
        return self._authenticated(result, request, info)

    def _authentication_failed(
        self, failure: Failure, request: HTTPRequest, info: HTTPRequestInfo
    ) -> Response:
        if failure.check(AuthenticationError):
            log.debug("Unable to authenticate the request: {error}", error=failure.value)
        else:
            log.failure("authenticator failed", failure)
        return self._unauthorized(request, info)

    def _authenticated(
        self, result: AuthResult | None, request: HTTPRequest, info: HTTPRequestInfo
    ) -> Response | None:
        if result is None:
            # anonymous.go: the anonymous authenticator, last in the union.
            anonymous = self.anonymous
            if not (anonymous(info.path) if callable(anonymous) else anonymous):
                return self._unauthorized(request, info)
            user = ANONYMOUS_USER
        else:
            audiences = self.api_audiences
            if audiences and result.audiences and audiences.isdisjoint(result.audiences):
                log.error(
                    "Unable to match the audience: {wanted} , accepted: {got}",
                    wanted=sorted(audiences),
                    got=list(result.audiences),
                )
                return self._unauthorized(request, info)
            user = result.user
            if result.annotations:
                info.audit_annotations = result.annotations
        info.user = info.authenticated_user = user
        # Drop the credentials and front-proxy headers, and note Impersonate-* ones, in one
        # pass over the headers (authentication.go, headerrequest.ClearAuthenticationHeaders).
        headers = request.requestHeaders
        for name in self._strip_names:
            headers.removeHeader(name)  # nothing when absent
        impersonating = False
        prefixed: list[bytes] = []
        prefixes = self._strip_prefixes
        for raw_name, _ in headers.getAllRawHeaders():
            lower = raw_name.lower()
            if lower.startswith(b"impersonate-"):
                impersonating = True
            elif lower.startswith(prefixes):
                prefixed.append(raw_name)
        for raw_name in prefixed:
            headers.removeHeader(raw_name)
        info.impersonating = impersonating
        return None


def _no_user(request: HTTPRequest) -> Response:
    # impersonation.go / authorization.go without a user in the context.
    return internal_error_response(request, "no user found for request")


class Impersonation:
    """``WithImpersonation`` (k8s.io/apiserver/pkg/endpoints/filters/impersonation.go); see
    :mod:`apiserver.auth.impersonation`.

    ``authorizer`` None allows every impersonation (an AlwaysAllow chain). On success
    ``info.user`` and ``info.impersonated_user`` are the new user.
    """

    def __init__(self, authorizer: Authorizer | None) -> None:
        self.authorizer = authorizer

    def __call__(self, request: HTTPRequest, info: HTTPRequestInfo) -> Verdict:
        if not info.impersonating:
            return None
        user = info.user
        if user is None:
            return _no_user(request)
        headers = request.requestHeaders
        try:
            items = build_requests(headers)
        except ImpersonationError as error:
            return status_response(request, info, 400, "BadRequest", str(error), None)
        if not items:
            return None
        groups_given = bool(headers.getRawHeaders(b"impersonate-group"))
        return self._impersonate_from(request, info, user, items, 0, groups_given)

    def _impersonate_from(
        self,
        request: HTTPRequest,
        info: HTTPRequestInfo,
        user: UserInfo,
        items: list[ImpersonationRequest],
        start: int,
        groups_given: bool,
    ) -> Verdict:
        authorizer = self.authorizer
        if authorizer is not None:
            for index in range(start, len(items)):
                attributes = items[index].attributes(user)
                try:
                    decision = authorizer.authorize(attributes)
                except AuthorizerError as error:
                    # Any error refuses, even next to an Allow (``err != nil || !allowed``).
                    return forbidden_response(request, info, attributes, error.reason)
                if isinstance(decision, Deferred):
                    resume = (request, info, user, items, index, groups_given, attributes)
                    return decision.addCallbacks(
                        self._decided,
                        self._failed,
                        callbackArgs=resume,
                        errbackArgs=resume,
                    )
                if decision.decision != ALLOW:
                    return forbidden_response(request, info, attributes, decision.reason)
        new_user = impersonated_user(items, groups_given)
        log.debug("{old} is impersonating {new}", old=user.name, new=new_user.name)
        strip_headers(request.requestHeaders)
        info.user = info.impersonated_user = new_user
        return None

    def _decided(
        self,
        decision: Decision,
        request: HTTPRequest,
        info: HTTPRequestInfo,
        user: UserInfo,
        items: list[ImpersonationRequest],
        index: int,
        groups_given: bool,
        attributes: Attributes,
    ) -> Verdict:
        if decision.decision != ALLOW:
            return forbidden_response(request, info, attributes, decision.reason)
        return self._impersonate_from(request, info, user, items, index + 1, groups_given)

    def _failed(
        self,
        failure: Failure,
        request: HTTPRequest,
        info: HTTPRequestInfo,
        user: UserInfo,
        items: list[ImpersonationRequest],
        index: int,
        groups_given: bool,
        attributes: Attributes,
    ) -> Response:
        error = failure.value
        if not isinstance(error, AuthorizerError):
            log.failure("authorizer failed", failure)
        reason = error.reason if isinstance(error, AuthorizerError) else ""
        return forbidden_response(request, info, attributes, reason)


class Authorization:
    """``WithAuthorization`` (k8s.io/apiserver/pkg/endpoints/filters/authorization.go).

    ``authorizer`` None allows everything (an AlwaysAllow chain) without building the
    attributes. Sets ``info.authorization``.
    """

    def __init__(self, authorizer: Authorizer | None) -> None:
        self.authorizer = authorizer

    def __call__(self, request: HTTPRequest, info: HTTPRequestInfo) -> Verdict:
        authorizer = self.authorizer
        if authorizer is None:
            info.authorization = ("allow", "")
            return None
        resolved, user = info.resolved, info.user
        if resolved is None or user is None:
            return _no_user(request)
        attributes = attributes_for(resolved, user)
        try:
            decision = authorizer.authorize(attributes)
        except AuthorizerError as error:
            return self._authorizer_error(error, request, info, attributes)
        # The synchronous answer is tested first: Deferred is an ABC (typing.Awaitable), so
        # isinstance() of anything else runs ABCMeta.__instancecheck__ in Python.
        if type(decision) is not Decision and isinstance(decision, Deferred):
            return decision.addCallbacks(
                self._decided,
                self._decision_failed,
                callbackArgs=(request, info, attributes),
                errbackArgs=(request, info, attributes),
            )
        return self._decided(decision, request, info, attributes)

    def _decided(
        self,
        decision: Decision,
        request: HTTPRequest,
        info: HTTPRequestInfo,
        attributes: Attributes,
    ) -> Outcome:
        if decision.decision == ALLOW:
            info.authorization = ("allow", decision.reason)
            return None
        info.authorization = ("forbid", decision.reason)
        log.debug("Forbidden {uri} reason {reason}", uri=request.uri, reason=decision.reason)
        return forbidden_response(request, info, attributes, decision.reason)

    def _decision_failed(
        self,
        failure: Failure,
        request: HTTPRequest,
        info: HTTPRequestInfo,
        attributes: Attributes,
    ) -> Outcome:
        error = failure.value
        if not isinstance(error, AuthorizerError):
            log.failure("authorizer failed", failure)
            error = AuthorizerError(str(error))
        return self._authorizer_error(error, request, info, attributes)

    def _authorizer_error(
        self,
        error: AuthorizerError,
        request: HTTPRequest,
        info: HTTPRequestInfo,
        attributes: Attributes,
    ) -> Outcome:
        if error.decision == ALLOW:
            info.authorization = ("allow", error.reason)
            return None
        info.authorization = ("", "internal error")
        log.warn("authorization error for {uri}: {error}", uri=request.uri, error=error.message)
        return internal_error_response(request, error.message)


@attrs.define
class AuthStages:
    """The four stages :mod:`apiserver.auth` contributes to the chain, sharing one authorizer.

    Satisfies :class:`apiserver.http.chain.AuthSlots`. ``authorizer`` None means every request
    is allowed (an AlwaysAllow chain); ``authenticator`` None that no credential is ever
    recognised.
    """

    request_info: Filter
    authentication: Authentication
    impersonation: Impersonation
    authorization: Authorization
    #: The ``--authorization-config`` reloader that replaces the authorizer, if any.
    reloader: ConfigReloader | None = None
    #: Parts with ``start()``/``stop()`` that run while the server does (config reload
    #: loops, OIDC key loaders): started and stopped by the server's ``auth-reload`` service,
    #: never by building.
    background: list[Any] = attrs.Factory(list)

    @classmethod
    def build(
        cls,
        authenticator: Authenticator | None,
        anonymous: AnonymousPolicy,
        authorizer: Authorizer | None,
        *,
        api_audiences: Sequence[str] = (),
        request_header_names: Iterable[str] = (),
        request_header_prefixes: Iterable[str] = (),
    ) -> AuthStages:
        return cls(
            resolve_request_info,
            Authentication(
                authenticator,
                anonymous,
                api_audiences=api_audiences,
                request_header_names=request_header_names,
                request_header_prefixes=request_header_prefixes,
            ),
            Impersonation(authorizer),
            Authorization(authorizer),
        )

    def set_authorizer(self, authorizer: Authorizer | None) -> None:
        """Replace the authorizer of impersonation and authorization (a config reload)."""
        self.impersonation.authorizer = authorizer
        self.authorization.authorizer = authorizer
