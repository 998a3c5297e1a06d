"""Webhook token authentication (``--authentication-token-webhook-*``).

References: ``AS/plugin/pkg/authenticator/token/webhook/webhook.go`` and
``AS/pkg/util/webhook/webhook.go``.

- The webhook is described by a kubeconfig (:mod:`apiserver.auth.kubeconfig`): its ``server``
  URL, CA, client certificate or token. We POST a ``TokenReview`` of
  ``--authentication-token-webhook-version`` (``v1beta1`` by default, or ``v1``) with the token
  and, when API audiences are configured, ``spec.audiences``; the whole exchange (retries
  included) has 30 seconds.
- A connection reset, a 500, a 504, a 429 or a ``Retry-After`` answer is retried with
  exponential backoff (0.5 s, x1.5, jitter 0.2, 5 attempts); other failures (connection
  refused, other statuses, undecodable answers) are errors at once. An error is a 401 and is
  never cached; the server keeps serving.
- ``status.authenticated: false`` with ``status.error`` is an error; without it "not mine"
  (the chain then ends in ``invalid bearer token``). With API audiences, the answer's
  ``status.audiences`` (or, when empty, the API audiences) must meet the request's audiences,
  else "not mine".
- Answers, authenticated or not, are cached for ``--authentication-token-webhook-cache-ttl``
  (:class:`~apiserver.auth.authn.union.TokenCache`, keyed on a hash of token and audiences).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure
from twisted.web.client import ResponseFailed, ResponseNeverReceived

from apiserver.auth.authn.common import TokenOutcome, intersect
from apiserver.auth.interface import AuthenticationError, AuthResult, UserInfo
from apiserver.auth.kubeconfig import (
    KubeconfigTarget,
    WebhookHTTPError,
    describe_failure,
    post_json,
)

GROUP = "authentication.k8s.io"
VERSIONS = ("v1", "v1beta1")
TIMEOUT = 30.0
BACKOFF_INITIAL = 0.5
BACKOFF_FACTOR = 1.5
BACKOFF_JITTER = 0.2
BACKOFF_STEPS = 5


def should_retry(failure: Failure) -> bool:
    """DefaultShouldRetry: connection reset/lost, 500, 504 (timeout), 429, Retry-After."""
    error = failure.value
    if isinstance(error, WebhookHTTPError):
        return error.code in (500, 504, 429) or error.retry_after
    if isinstance(error, ResponseFailed | ResponseNeverReceived):
        return any(r.check(ConnectionLost, ConnectionDone) is not None for r in error.reasons)
    return isinstance(error, ConnectionLost)


def _describe(failure: Failure, url: str) -> str:
    error = failure.value
    if isinstance(error, WebhookHTTPError):
        return str(error)
    if isinstance(error, CancelledError):
        return f'Post "{url}": context deadline exceeded'
    return f'Post "{url}": {describe_failure(failure)}'


class WebhookTokenAuthenticator:
    """Asks a remote service about bearer tokens."""

    def __init__(
        self,
        target: KubeconfigTarget,
        client: Any,
        clock: IReactorTime,
        version: str = "v1beta1",
        implicit_audiences: Sequence[str] = (),
        timeout: float = TIMEOUT,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if version not in VERSIONS:
            raise ValueError(f"unsupported TokenReview version {version!r}")
        self.target = target
        self.client = client
        self.clock = clock
        self.version = version
        self.implicit_audiences = tuple(implicit_audiences)
        self.timeout = timeout
        self.jitter = jitter

    def review_body(self, token: str, audiences: tuple[str, ...]) -> bytes:
        spec: dict[str, Any] = {"token": token}
        if audiences:
            spec["audiences"] = list(audiences)
        review = {
            "kind": "TokenReview",
            "apiVersion": f"{GROUP}/{self.version}",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": {"user": {}},
        }
        return json.dumps(review, separators=(",", ":")).encode()

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> TokenOutcome:
        body = self.review_body(token, audiences)
        deadline = self.clock.seconds() + self.timeout
        result: Deferred[AuthResult | None] = Deferred()
        self._attempt(body, audiences, deadline, 1, BACKOFF_INITIAL, result)
        return result

    def _attempt(
        self,
        body: bytes,
        audiences: tuple[str, ...],
        deadline: float,
        attempt: int,
        delay: float,
        result: Deferred[AuthResult | None],
    ) -> None:
        remaining = deadline - self.clock.seconds()
        d = post_json(
            self.client,
            self.clock,
            self.target.server,
            body,
            max(remaining, 0.001),
            self.target.request_headers(),
        )

        def answered(data: bytes) -> None:
            try:
                outcome = self._interpret(data, audiences)
            except AuthenticationError as error:
                result.errback(Failure(error))
                return
            result.callback(outcome)

        def failed(failure: Failure) -> None:
            pause = delay * (1 + BACKOFF_JITTER * self.jitter())
            if (
                attempt < BACKOFF_STEPS
                and should_retry(failure)
                and self.clock.seconds() + pause < deadline
            ):
                self.clock.callLater(
                    pause,
                    self._attempt,
                    body,
                    audiences,
                    deadline,
                    attempt + 1,
                    delay * BACKOFF_FACTOR,
                    result,
                )
                return
            result.errback(Failure(AuthenticationError(_describe(failure, self.target.server))))

        d.addCallbacks(answered, failed)

    def _interpret(self, data: bytes, audiences: tuple[str, ...]) -> AuthResult | None:
        try:
            review = json.loads(data)
        except ValueError as error:
            raise AuthenticationError(
                f"unable to decode the TokenReview response: {error}"
            ) from None
        if not isinstance(review, dict):
            raise AuthenticationError("unable to decode the TokenReview response")
        status = review.get("status") or {}
        if not isinstance(status, dict):
            raise AuthenticationError("unable to decode the TokenReview response")
        auds: tuple[str, ...] = ()
        if audiences:
            got = tuple(str(a) for a in status.get("audiences") or ()) or self.implicit_audiences
            auds = intersect(audiences, got)
            if not auds:
                return None
        if not status.get("authenticated"):
            reason = status.get("error")
            if reason:
                raise AuthenticationError(str(reason))
            return None
        user = status.get("user") or {}
        if not isinstance(user, dict):
            raise AuthenticationError("unable to decode the TokenReview response")
        extra_raw = user.get("extra") or {}
        extra = (
            {str(k): tuple(str(v) for v in (vs or ())) for k, vs in extra_raw.items()}
            if isinstance(extra_raw, dict)
            else {}
        )
        info = UserInfo(
            name=str(user.get("username") or ""),
            uid=str(user.get("uid") or ""),
            groups=tuple(str(g) for g in user.get("groups") or ()),
            extra=extra,
        )
        return AuthResult(info, auds)
