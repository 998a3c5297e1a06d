"""Webhook token authentication: TokenReview exchange, cache on a Clock, retries, outages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from authn_helpers import result_of
from treq.testing import StubTreq
from twisted.internet import defer
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.task import Clock
from twisted.web.resource import Resource

from apiserver.auth.authn.union import TokenCache
from apiserver.auth.authn.webhook import WebhookTokenAuthenticator
from apiserver.auth.interface import AuthenticationError
from apiserver.auth.kubeconfig import KubeconfigTarget

URL = "https://authn.example/authenticate"


class Reviewer(Resource):
    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[Any] = []
        self.statuses: list[int] = []
        self.answer: dict[str, Any] = {
            "authenticated": True,
            "user": {"username": "jane", "uid": "42", "groups": ["dev"], "extra": {"k": ["v"]}},
        }

    def render_POST(self, request: Any) -> bytes:
        self.bodies.append(json.loads(request.content.read()))
        self.headers.append(request.requestHeaders)
        if self.statuses:
            request.setResponseCode(self.statuses.pop(0))
            return b"try again"
        return json.dumps(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": self.answer}
        ).encode()


def make(version: str = "v1beta1", audiences: tuple[str, ...] = (), token: str | None = None):  # type: ignore[no-untyped-def]
    reviewer = Reviewer()
    stub = StubTreq(reviewer)
    clock = Clock()
    target = KubeconfigTarget(path="k", server=URL, token=token)
    auth = WebhookTokenAuthenticator(target, stub, clock, version, audiences, jitter=lambda: 0.0)
    return auth, reviewer, stub, clock


def run(stub: StubTreq, d: Any) -> Any:
    stub.flush()
    return result_of(d)


def test_request_and_user() -> None:
    auth, reviewer, stub, _ = make(token="webhook-secret")
    result = run(stub, auth.authenticate_token("tok", ()))
    assert reviewer.bodies == [
        {
            "kind": "TokenReview",
            "apiVersion": "authentication.k8s.io/v1beta1",
            "metadata": {"creationTimestamp": None},
            "spec": {"token": "tok"},
            "status": {"user": {}},
        }
    ]
    assert reviewer.headers[0].getRawHeaders(b"authorization") == [b"Bearer webhook-secret"]
    assert reviewer.headers[0].getRawHeaders(b"content-type") == [b"application/json"]
    user = result.user
    assert (user.name, user.uid, user.groups, user.extra) == ("jane", "42", ("dev",), {"k": ("v",)})


def test_v1_with_audiences() -> None:
    auth, reviewer, stub, _ = make("v1", audiences=("api",))
    reviewer.answer["audiences"] = ["api", "other"]
    result = run(stub, auth.authenticate_token("tok", ("api",)))
    assert reviewer.bodies[0]["apiVersion"] == "authentication.k8s.io/v1"
    assert reviewer.bodies[0]["spec"] == {"token": "tok", "audiences": ["api"]}
    assert result.audiences == ("api",)
    reviewer.answer["audiences"] = ["elsewhere"]
    assert run(stub, auth.authenticate_token("tok", ("api",))) is None
    reviewer.answer["audiences"] = []
    assert run(stub, auth.authenticate_token("tok", ("api",))).audiences == ("api",)


def test_unauthenticated_with_and_without_error() -> None:
    auth, reviewer, stub, _ = make()
    reviewer.answer = {"authenticated": False}
    assert run(stub, auth.authenticate_token("tok", ())) is None
    reviewer.answer = {"authenticated": False, "error": "token revoked"}
    with pytest.raises(AuthenticationError, match=r"^token revoked$"):
        run(stub, auth.authenticate_token("tok", ()))


def test_cache_on_the_clock() -> None:
    auth, reviewer, stub, clock = make()
    cache = TokenCache(auth, clock, 120.0, 120.0, cache_errors=False)
    for _ in range(3):
        assert run(stub, cache.authenticate_token("tok", ())).user.name == "jane"
    assert len(reviewer.bodies) == 1
    clock.advance(119)
    run(stub, cache.authenticate_token("tok", ()))
    assert len(reviewer.bodies) == 1
    clock.advance(2)
    run(stub, cache.authenticate_token("tok", ()))
    assert len(reviewer.bodies) == 2
    # "Not authenticated" answers are cached too; errors are not.
    reviewer.answer = {"authenticated": False}
    assert run(stub, cache.authenticate_token("other", ())) is None
    assert run(stub, cache.authenticate_token("other", ())) is None
    assert len(reviewer.bodies) == 3
    reviewer.answer = {"authenticated": False, "error": "nope"}
    for _ in range(2):
        with pytest.raises(AuthenticationError):
            run(stub, cache.authenticate_token("third", ()))
    assert len(reviewer.bodies) == 5


def test_retry_on_500_with_backoff() -> None:
    auth, reviewer, stub, clock = make()
    reviewer.statuses = [500, 429]
    d: Any = auth.authenticate_token("tok", ())
    stub.flush()
    assert len(reviewer.bodies) == 1 and not d.called
    clock.advance(0.5)
    stub.flush()
    assert len(reviewer.bodies) == 2 and not d.called
    clock.advance(0.75)
    stub.flush()
    assert result_of(d).user.name == "jane"


def test_no_retry_on_403_and_give_up_after_five() -> None:
    auth, reviewer, stub, clock = make()
    reviewer.statuses = [403]
    with pytest.raises(AuthenticationError, match=r"status code 403"):
        run(stub, auth.authenticate_token("tok", ()))
    reviewer.statuses = [500] * 10
    reviewer.bodies.clear()
    d = auth.authenticate_token("tok", ())
    for _ in range(10):
        stub.flush()
        clock.advance(5)
    stub.flush()
    assert len(reviewer.bodies) == 5
    with pytest.raises(AuthenticationError, match=r"status code 500"):
        result_of(d)


def test_webhook_down_is_an_error() -> None:
    class Down:
        calls = 0

        def request(self, *args: Any, **kw: Any) -> Any:
            Down.calls += 1
            return defer.fail(ConnectionRefusedError("connection refused"))

    clock = Clock()
    auth = WebhookTokenAuthenticator(KubeconfigTarget(path="k", server=URL), Down(), clock)
    with pytest.raises(AuthenticationError) as info:
        result_of(auth.authenticate_token("tok", ()))
    assert str(info.value).startswith(f'Post "{URL}": ')
    assert Down.calls == 1


def test_timeout_cancels() -> None:
    class Hang:
        def request(self, *args: Any, **kw: Any) -> Any:
            return defer.Deferred()

    clock = Clock()
    auth = WebhookTokenAuthenticator(KubeconfigTarget(path="k", server=URL), Hang(), clock)
    d: Any = auth.authenticate_token("tok", ())
    clock.advance(29)
    assert not d.called
    clock.advance(2)
    with pytest.raises(AuthenticationError, match=r"context deadline exceeded"):
        result_of(d)


def test_bad_answer_is_an_error(tmp_path: Path) -> None:
    class Garbage(Resource):
        isLeaf = True

        def render_POST(self, request: Any) -> bytes:
            return b"<html>"

    stub = StubTreq(Garbage())
    auth = WebhookTokenAuthenticator(KubeconfigTarget(path="k", server=URL), stub, Clock())
    with pytest.raises(AuthenticationError, match=r"unable to decode"):
        run(stub, auth.authenticate_token("tok", ()))
