"""The webhook authorizer: SubjectAccessReview v1/v1beta1, cache TTLs, retries, conditions.

The webhook is a twisted.web resource behind treq's StubTreq; time is a ``Clock``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from treq.testing import StubTreq
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from apiserver.auth.authz import AuthorizerError
from apiserver.auth.authz.cel import all_match, compile_condition
from apiserver.auth.authz.webhook import TreqTransport, WebhookAuthorizer, should_cache
from apiserver.auth.interface import ALLOW, DENY, NO_OPINION, Attributes, Decision, UserInfo

BOB = UserInfo("bob", uid="u1", groups=("devs", "system:authenticated"), extra={"k": ("v",)})
URL = "https://webhook.example/authorize"

Answer = Callable[[dict[str, Any]], tuple[int, Any]]


class Webhook(Resource):
    isLeaf = True

    def __init__(self, answer: Answer) -> None:
        super().__init__()
        self.answer = answer
        self.reviews: list[dict[str, Any]] = []
        self.headers: list[Any] = []
        self.hold = False
        self.held: list[Any] = []

    def render_POST(self, request: Any) -> bytes | int:
        review = json.loads(request.content.read())
        self.reviews.append(review)
        self.headers.append(request.requestHeaders)
        if self.hold:
            self.held.append(request)
            return NOT_DONE_YET
        code, body = self.answer(review)
        request.setResponseCode(code)
        return body if isinstance(body, bytes) else json.dumps(body).encode()


def status(version: str = "v1", **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"authorization.k8s.io/{version}",
        "kind": "SubjectAccessReview",
        "status": fields,
    }


def events(user: UserInfo = BOB, verb: str = "list", name: str = "") -> Attributes:
    return Attributes(
        user=user,
        verb=verb,
        resource_request=True,
        namespace="default",
        api_group="events.k8s.io",
        api_version="v1",
        resource="events",
        name=name,
    )


def healthz(user: UserInfo = BOB) -> Attributes:
    return Attributes(user=user, verb="get", resource_request=False, path="/healthz")


class WebhookTests(SynchronousTestCase):
    def make(self, answer: Answer, **kw: Any) -> tuple[WebhookAuthorizer, Webhook, Clock, Any]:
        clock = Clock()
        hook = Webhook(answer)
        stub = StubTreq(hook)
        transport = TreqTransport(stub, URL, clock, {b"Authorization": [b"Bearer t"]})
        return WebhookAuthorizer(transport, clock, **kw), hook, clock, stub

    def decide(self, authorizer: WebhookAuthorizer, attributes: Attributes) -> Decision:
        result = authorizer.authorize(attributes)
        if isinstance(result, Deferred):
            return self.successResultOf(result)
        return result

    def test_v1_request_and_allow(self) -> None:
        authorizer, hook, _, _ = self.make(
            lambda r: (200, status(allowed=True, reason="ok")), version="v1"
        )
        assert self.decide(authorizer, events()) == Decision(ALLOW, "ok")
        assert hook.reviews == [
            {
                "kind": "SubjectAccessReview",
                "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": None},
                "spec": {
                    "resourceAttributes": {
                        "namespace": "default",
                        "verb": "list",
                        "group": "events.k8s.io",
                        "version": "v1",
                        "resource": "events",
                    },
                    "user": "bob",
                    "groups": ["devs", "system:authenticated"],
                    "extra": {"k": ["v"]},
                    "uid": "u1",
                },
                "status": {"allowed": False},
            }
        ]
        headers = hook.headers[0]
        assert headers.getRawHeaders("authorization") == ["Bearer t"]
        assert headers.getRawHeaders("content-type") == ["application/json"]

    def test_v1beta1_names_groups_group_and_non_resource(self) -> None:
        authorizer, hook, _, _ = self.make(
            lambda r: (200, status("v1beta1", allowed=False, reason="nope"))
        )
        assert self.decide(authorizer, healthz()) == Decision(NO_OPINION, "nope")
        spec = hook.reviews[0]["spec"]
        assert hook.reviews[0]["apiVersion"] == "authorization.k8s.io/v1beta1"
        assert spec["nonResourceAttributes"] == {"path": "/healthz", "verb": "get"}
        assert spec["group"] == ["devs", "system:authenticated"]
        assert "groups" not in spec

    def test_denied_and_both(self) -> None:
        authorizer, _, _, _ = self.make(lambda r: (200, status(allowed=False, denied=True)))
        assert self.decide(authorizer, events()) == Decision(DENY, "")
        authorizer, _, _, _ = self.make(
            lambda r: (200, status(allowed=True, denied=True, reason="r"))
        )
        failure = self.failureResultOf(authorizer.authorize(events()), AuthorizerError)
        assert failure.value.decision == DENY
        assert failure.value.message == (
            "webhook subject access review returned both allow and deny response"
        )

    def test_cache_ttls(self) -> None:
        answers: dict[str, Any] = {"allowed": True}
        authorizer, hook, clock, _ = self.make(
            lambda r: (200, status(**answers)), authorized_ttl=300, unauthorized_ttl=30
        )
        assert self.decide(authorizer, events()).decision == ALLOW
        assert self.decide(authorizer, events()).decision == ALLOW  # cached: no call
        assert len(hook.reviews) == 1
        clock.advance(299)
        assert self.decide(authorizer, events()).decision == ALLOW
        assert len(hook.reviews) == 1
        clock.advance(1)
        answers["allowed"] = False
        assert self.decide(authorizer, events()).decision == NO_OPINION
        assert len(hook.reviews) == 2
        clock.advance(29)
        assert self.decide(authorizer, events()).decision == NO_OPINION
        assert len(hook.reviews) == 2
        clock.advance(1)
        answers["allowed"] = True
        assert self.decide(authorizer, events()).decision == ALLOW
        assert len(hook.reviews) == 3
        # A different user is a different key.
        assert self.decide(authorizer, events(UserInfo("eve"))).decision == ALLOW
        assert len(hook.reviews) == 4

    def test_huge_attributes_not_cached(self) -> None:
        authorizer, hook, _, _ = self.make(lambda r: (200, status(allowed=True)))
        big = events(name="x" * 10000)
        assert not should_cache(big)
        assert should_cache(events())
        self.decide(authorizer, big)
        self.decide(authorizer, big)
        assert len(hook.reviews) == 2

    def test_errors_are_not_cached_and_use_the_failure_policy(self) -> None:
        authorizer, hook, _, _ = self.make(lambda r: (403, b"nope"), decision_on_error=DENY)
        failure = self.failureResultOf(authorizer.authorize(events()), AuthorizerError)
        assert failure.value.decision == DENY
        assert "nope" in failure.value.message
        self.failureResultOf(authorizer.authorize(events()), AuthorizerError)
        assert len(hook.reviews) == 2

    def test_wrong_api_version_is_an_error(self) -> None:
        authorizer, _, _, _ = self.make(
            lambda r: (200, status("v1beta1", allowed=True)), version="v1"
        )
        assert self.decide(authorizer, events()).decision == ALLOW
        answer = {"apiVersion": "other/v1", "status": {"allowed": True}}
        authorizer, _, _, _ = self.make(lambda r: (200, answer), version="v1")
        failure = self.failureResultOf(authorizer.authorize(events()), AuthorizerError)
        assert "expected apiVersion authorization.k8s.io/v1 " in failure.value.message
        authorizer, _, _, _ = self.make(lambda r: (200, b"not json"))
        self.failureResultOf(authorizer.authorize(events()), AuthorizerError)

    def test_transient_errors_are_retried_with_backoff(self) -> None:
        calls: list[int] = []

        def answer(review: dict[str, Any]) -> tuple[int, Any]:
            calls.append(1)
            if len(calls) < 3:
                return 500, {"kind": "Status", "message": "try later", "code": 500}
            return 200, status(allowed=True)

        authorizer, _, clock, _ = self.make(answer)
        d = authorizer.authorize(events())
        assert isinstance(d, Deferred)
        self.assertNoResult(d)
        assert len(calls) == 1
        clock.advance(0.5)
        assert len(calls) == 2
        clock.advance(0.75)
        assert self.successResultOf(d) == Decision(ALLOW, "")

    def test_retries_give_up_after_five_tries(self) -> None:
        authorizer, hook, clock, _ = self.make(
            lambda r: (429, {"kind": "Status", "message": "slow down"})
        )
        d = authorizer.authorize(events())
        clock.pump([0.5, 0.75, 1.125, 1.6875, 10])
        failure = self.failureResultOf(d, AuthorizerError)
        assert failure.value.message == "slow down"
        assert failure.value.decision == NO_OPINION
        assert len(hook.reviews) == 5

    def test_timeout(self) -> None:
        authorizer, hook, clock, stub = self.make(lambda r: (200, status(allowed=True)), timeout=3)
        hook.hold = True
        d = authorizer.authorize(events())
        stub.flush()
        self.assertNoResult(d)
        clock.advance(3)
        failure = self.failureResultOf(d, AuthorizerError)
        assert failure.value.message == f'Post "{URL}": context deadline exceeded'

    def test_match_conditions(self) -> None:
        matcher = all_match(
            [
                compile_condition("has(request.resourceAttributes)"),
                compile_condition("request.resourceAttributes.namespace == 'default'"),
            ]
        )
        authorizer, hook, _, _ = self.make(
            lambda r: (200, status(allowed=True)), version="v1", matcher=matcher
        )
        assert self.decide(authorizer, events()).decision == ALLOW
        assert self.decide(authorizer, healthz()) == Decision(NO_OPINION)
        assert len(hook.reviews) == 1

    def test_match_condition_errors_follow_the_failure_policy(self) -> None:
        matcher = all_match([compile_condition("request.resourceAttributes.verb == 'get'")])
        authorizer, hook, _, _ = self.make(
            lambda r: (200, status(allowed=True)), matcher=matcher, decision_on_error=DENY
        )
        try:
            authorizer.authorize(healthz())
        except AuthorizerError as error:
            assert error.decision == DENY
            assert "no such key: resourceAttributes" in error.message
        else:
            raise AssertionError("expected an error")
        assert hook.reviews == []
