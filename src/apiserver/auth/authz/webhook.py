"""Mode ``Webhook``: ask a remote service with a SubjectAccessReview.

Follows ``AS/plugin/pkg/authorizer/webhook/webhook.go``:

- The request is a ``SubjectAccessReview`` in ``authorization.k8s.io/v1`` or ``v1beta1``
  (``--authorization-webhook-version``, default v1beta1; v1beta1 names the groups key
  ``group``) with ``resourceAttributes`` (namespace, verb, group, version, resource,
  subresource, name; empty ones left out) or ``nonResourceAttributes`` (path, verb), and the
  user's name, uid, groups and extra.
- The answer's ``status``: ``allowed`` and ``denied`` both set is a Deny with an error (a
  500), ``denied`` a Deny (the chain stops), ``allowed`` an Allow, neither a NoOpinion; the
  ``reason`` comes along in every case.
- Answers are cached (LRU of 8192, keyed on the JSON of the spec): allowed ones for the
  authorized TTL (``5m``), others for the unauthorized TTL (``30s``); failures never; nothing
  is cached when the request-controlled attributes total 10000 bytes or more.
- A failed call is retried like ``webhook.WithExponentialBackoff`` with the default backoff
  (5 tries, 0.5s growing by 1.5x) for transient failures (HTTP 500, 504, 429, a reset
  connection), then gives up: the decision on error (NoOpinion from the flags,
  ``failurePolicy`` from ``--authorization-config``) with the error, which the filter turns
  into a 500 unless a later authorizer allows.
- With ``--authorization-config`` the webhook has its own timeout and match conditions
  (evaluated first against the v1 spec: any false skips the webhook with NoOpinion, an
  evaluation error is the decision on error). From the flags the timeout is 30s.

Every timer uses the injected clock (``IReactorTime``), so tests drive time by hand.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import orjson
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionLost
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure
from twisted.web.client import ResponseFailed

from apiserver.auth.authz import AuthorizerError
from apiserver.auth.authz.rules import RuleSet
from apiserver.auth.interface import ALLOW, DENY, NO_OPINION, Attributes, Decision, UserInfo
from apiserver.gocompat.quote import go_quote
from apiserver.http import spans

GROUP = "authorization.k8s.io"
VERSIONS = ("v1", "v1beta1")
CACHE_SIZE = 8192
MAX_CONTROLLED_ATTRIBUTES = 10000
#: ``webhook.DefaultRetryBackoff()``: the first wait, its growth, and the number of tries.
RETRY_INITIAL = 0.5
RETRY_FACTOR = 1.5
RETRY_STEPS = 5
_RETRY_CODES = frozenset({429, 500, 504})


class SARTransport(Protocol):
    """Posts one JSON body to the webhook: ``(status code, body)`` or a failure."""

    def post(self, body: bytes, timeout: float) -> Deferred[tuple[int, bytes]]: ...


class TreqTransport:
    """:class:`SARTransport` over a treq client (a real HTTPS one, or ``StubTreq``)."""

    def __init__(
        self,
        client: Any,
        url: str,
        clock: IReactorTime,
        headers: Mapping[bytes, list[bytes]] | None = None,
    ) -> None:
        self.client = client
        self.url = url
        self.clock = clock
        self.headers = {
            b"Content-Type": [b"application/json"],
            b"Accept": [b"application/json, */*"],
            b"User-Agent": [b"kube-apiserver"],
            **(headers or {}),
        }

    def post(self, body: bytes, timeout: float) -> Deferred[tuple[int, bytes]]:
        headers = self.headers
        span = spans.start("POST", self.url) if spans.start is not None else None
        if span is not None:
            headers = dict(headers)
            spans.add_headers(headers, span)
        d: Deferred[Any] = self.client.post(self.url, data=body, headers=headers)
        expired: list[bool] = []

        def expire() -> None:
            expired.append(True)
            d.cancel()

        timer = self.clock.callLater(timeout, expire) if timeout > 0 else None

        def read(response: Any) -> Deferred[tuple[int, bytes]]:
            content: Deferred[bytes] = response.content()
            return content.addCallback(lambda data: (response.code, data))

        def done(result: Any) -> Any:
            if timer is not None and timer.active():
                timer.cancel()
            if span is not None:
                span.end(spans.status_of(result))
            if isinstance(result, Failure) and expired:
                return Failure(
                    AuthorizerError(f"Post {go_quote(self.url)}: context deadline exceeded")
                )
            return result

        d.addCallback(read)
        d.addBoth(done)
        return d


class _TransientError(Exception):
    """A failure worth another try (``DefaultShouldRetry``)."""


class _TTLCache:
    """An LRU of ``size`` entries, each with its own expiry time on ``clock``."""

    def __init__(self, size: int, clock: IReactorTime) -> None:
        self.size = size
        self.clock = clock
        self.entries: collections.OrderedDict[bytes, tuple[float, dict[str, Any]]] = (
            collections.OrderedDict()
        )

    def get(self, key: bytes) -> dict[str, Any] | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if self.clock.seconds() >= expires:
            del self.entries[key]
            return None
        self.entries.move_to_end(key)
        return value

    def add(self, key: bytes, value: dict[str, Any], ttl: float) -> None:
        self.entries[key] = (self.clock.seconds() + ttl, value)
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)


def resource_attributes(attributes: Attributes) -> dict[str, str]:
    """``resourceAttributesFrom``: the non-empty fields, in the Go struct's order."""
    out: dict[str, str] = {}
    for key, value in (
        ("namespace", attributes.namespace),
        ("verb", attributes.verb),
        ("group", attributes.api_group),
        ("version", attributes.api_version),
        ("resource", attributes.resource),
        ("subresource", attributes.subresource),
        ("name", attributes.name),
    ):
        if value:
            out[key] = value
    return out


def review_spec(attributes: Attributes, version: str = "v1") -> dict[str, Any]:
    """The ``SubjectAccessReviewSpec`` for ``attributes`` as JSON-ready data."""
    spec: dict[str, Any] = {}
    if attributes.resource_request:
        spec["resourceAttributes"] = resource_attributes(attributes)
    else:
        spec["nonResourceAttributes"] = {"path": attributes.path, "verb": attributes.verb}
    user = attributes.user
    if user.name:
        spec["user"] = user.name
    if user.groups:
        spec["groups" if version == "v1" else "group"] = list(user.groups)
    if user.extra:
        spec["extra"] = {key: list(values) for key, values in user.extra.items()}
    if user.uid:
        spec["uid"] = user.uid
    return spec


def should_cache(attributes: Attributes) -> bool:
    """``shouldCache``: the request-controlled attributes stay under 10000 bytes."""
    size = sum(
        len(value.encode())
        for value in (
            attributes.namespace,
            attributes.verb,
            attributes.api_group,
            attributes.api_version,
            attributes.resource,
            attributes.subresource,
            attributes.name,
            attributes.path,
        )
    )
    return size < MAX_CONTROLLED_ATTRIBUTES


def _status_of(code: int, body: bytes, version: str) -> dict[str, Any]:
    if code < 200 or code > 299:
        message = (
            f"the server responded with the status code {code} but did not return more information"
        )
        try:
            decoded = orjson.loads(body)
        except orjson.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict) and decoded.get("kind") == "Status":
            message = str(decoded.get("message") or message)
        elif body:
            text = body.decode("utf-8", "replace").strip()
            message = (
                f'an error on the server ("{text[:200]}") has prevented the request from succeeding'
            )
        if code in _RETRY_CODES:
            raise _TransientError(message)
        raise AuthorizerError(message)
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise AuthorizerError(f"invalid SubjectAccessReview response: {error}") from None
    if not isinstance(review, dict):
        raise AuthorizerError("invalid SubjectAccessReview response: not an object")
    # The reference decodes the answer with a scheme that knows both versions and converts,
    # so a v1 answer to a v1beta1 review (or the reverse) is fine; other groups are not.
    api_version = review.get("apiVersion")
    if api_version not in (None, *(f"{GROUP}/{v}" for v in VERSIONS)):
        raise AuthorizerError(
            f"expected apiVersion {GROUP}/{version} in the SubjectAccessReview response, "
            f"got {api_version!r}"
        )
    status = review.get("status") or {}
    if not isinstance(status, dict):
        raise AuthorizerError("invalid SubjectAccessReview response: status is not an object")
    return {
        "allowed": status.get("allowed") is True,
        "denied": status.get("denied") is True,
        "reason": str(status.get("reason") or ""),
    }


Matcher = Callable[[Mapping[str, Any]], bool]


class WebhookAuthorizer:
    """One webhook; see the module docstring."""

    def __init__(
        self,
        transport: SARTransport,
        clock: IReactorTime,
        *,
        version: str = "v1beta1",
        authorized_ttl: float = 300.0,
        unauthorized_ttl: float = 30.0,
        timeout: float = 30.0,
        decision_on_error: str = NO_OPINION,
        matcher: Matcher | None = None,
        name: str = "webhook",
    ) -> None:
        if version not in VERSIONS:
            raise ValueError(f"unsupported SubjectAccessReview version {version!r}")
        self.transport = transport
        self.clock = clock
        self.version = version
        self.authorized_ttl = authorized_ttl
        self.unauthorized_ttl = unauthorized_ttl
        self.timeout = timeout
        self.decision_on_error = decision_on_error
        self.matcher = matcher
        self.name = name
        self.cache = _TTLCache(CACHE_SIZE, clock)

    def rules_for(self, user: UserInfo, namespace: str) -> RuleSet:
        """``WebhookAuthorizer.RulesFor``: a webhook cannot list rules."""
        return RuleSet(
            incomplete=True, error="webhook authorizer does not support user rule resolution"
        )

    def authorize(self, attributes: Attributes) -> Decision | Deferred[Decision]:
        if self.matcher is not None:
            try:
                matches = self.matcher(review_spec(attributes, "v1"))
            except Exception as error:
                raise AuthorizerError(str(error), self.decision_on_error) from None
            if not matches:
                return Decision(NO_OPINION)
        spec = review_spec(attributes, self.version)
        key = orjson.dumps(spec)
        cached = self.cache.get(key)
        if cached is not None:
            return _decide(cached)
        body = orjson.dumps(
            {
                "kind": "SubjectAccessReview",
                "apiVersion": f"{GROUP}/{self.version}",
                "metadata": {"creationTimestamp": None},
                "spec": spec,
                "status": {"allowed": False},
            }
        )
        cache = should_cache(attributes)
        result: Deferred[Decision] = Deferred()
        self._attempt(body, 1, RETRY_INITIAL, result, key if cache else None)
        return result

    def _attempt(
        self,
        body: bytes,
        attempt: int,
        wait: float,
        result: Deferred[Decision],
        key: bytes | None,
    ) -> None:
        def answered(response: tuple[int, bytes]) -> None:
            code, data = response
            try:
                status = _status_of(code, data, self.version)
            except _TransientError as error:
                retry_or_fail(str(error))
                return
            except AuthorizerError as error:
                fail(error.message)
                return
            if key is not None:
                ttl = self.authorized_ttl if status["allowed"] else self.unauthorized_ttl
                self.cache.add(key, status, ttl)
            try:
                result.callback(_decide(status))
            except AuthorizerError as error:
                result.errback(Failure(error))

        def failed(failure: Failure) -> None:
            error = failure.value
            message = str(error) or error.__class__.__name__
            if isinstance(error, ResponseFailed):
                message = "; ".join(str(r.value) for r in error.reasons) or message
                if any(r.check(ConnectionLost) for r in error.reasons):
                    retry_or_fail(message)
                    return
            fail(message)

        def retry_or_fail(message: str) -> None:
            if attempt >= RETRY_STEPS:
                fail(message)
                return
            self.clock.callLater(
                wait, self._attempt, body, attempt + 1, wait * RETRY_FACTOR, result, key
            )

        def fail(message: str) -> None:
            result.errback(Failure(AuthorizerError(message, self.decision_on_error)))

        try:
            posted = self.transport.post(body, self.timeout)
        except Exception as error:
            fail(str(error))
            return
        posted.addCallbacks(answered, failed)


def _decide(status: Mapping[str, Any]) -> Decision:
    reason = status["reason"]
    if status["allowed"] and status["denied"]:
        raise AuthorizerError(
            "webhook subject access review returned both allow and deny response", DENY, reason
        )
    if status["denied"]:
        return Decision(DENY, reason)
    if status["allowed"]:
        return Decision(ALLOW, reason)
    return Decision(NO_OPINION, reason)
