"""The filters and router of apiserver.http.app, through treq's StubTreq (no network)."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.unit.unit_helpers import AppResource
from treq.testing import StubTreq
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from apiserver.http.app import App, RequestInfo, Router, ServingPolicy
from apiserver.http.response import Response, text
from apiserver.service.lifecycle import Lifecycle


def make(policy: ServingPolicy | None = None, lifecycle: Lifecycle | None = None):  # type: ignore[no-untyped-def]
    clock = Clock()
    router = Router()
    pending: list[Deferred[Response]] = []

    def slow(request: Any, info: RequestInfo) -> Deferred[Response]:
        d: Deferred[Response] = Deferred()
        pending.append(d)
        return d

    def boom(request: Any, info: RequestInfo) -> Response:
        raise RuntimeError("boom")

    router.add("/hello", lambda request, info: text(200, "hi"))
    router.add_prefix("/pre/", lambda request, info: text(200, "prefix:" + info.path))
    router.add_prefix("/pre/longer/", lambda request, info: text(200, "longer"))
    router.add("/slow", slow)
    router.add("/apis/slow", slow)
    router.add("/boom", boom)

    def deep(request: Any, info: RequestInfo) -> Response:
        def walk(level: int) -> int:
            return walk(level + 1)

        return text(200, str(walk(0)))

    router.add("/deep", deep)
    app = App(router, clock, policy or ServingPolicy(), lifecycle)
    return StubTreq(AppResource(app)), clock, pending


class AppTests(SynchronousTestCase):
    def get(self, treq: StubTreq, path: str, **kw: Any) -> tuple[int, Any, bytes]:
        method = kw.pop("method", "GET")
        response = self.successResultOf(treq.request(method, "https://x" + path, **kw))
        body = self.successResultOf(response.content())
        return response.code, response.headers, body

    def test_exact_and_longest_prefix(self) -> None:
        treq, _, _ = make()
        assert self.get(treq, "/hello")[::2] == (200, b"hi")
        assert self.get(treq, "/pre/a")[2] == b"prefix:/pre/a"
        assert self.get(treq, "/pre/longer/x")[2] == b"longer"

    def test_not_found_json_for_api_paths_text_otherwise(self) -> None:
        treq, _, _ = make()
        code, headers, body = self.get(treq, "/apis/foo/v1")
        assert code == 404
        assert headers.getRawHeaders("content-type") == ["application/json"]
        assert json.loads(body)["message"] == "the server could not find the requested resource"
        code, headers, body = self.get(treq, "/api")
        assert code == 404 and json.loads(body)["reason"] == "NotFound"
        code, headers, body = self.get(treq, "/other")
        assert (code, body) == (404, b"404 page not found\n")
        assert headers.getRawHeaders("x-content-type-options") == ["nosniff"]

    def test_common_headers(self) -> None:
        treq, _, _ = make()
        _, headers, _ = self.get(treq, "/hello", headers={"Audit-ID": "abc"})
        assert headers.getRawHeaders("audit-id") == ["abc"]
        assert headers.getRawHeaders("cache-control") == ["no-cache, private"]
        _, headers, _ = self.get(treq, "/hello")
        assert re.fullmatch(r"[0-9a-f-]{36}", headers.getRawHeaders("audit-id")[0])

    def test_hsts_and_cors(self) -> None:
        policy = ServingPolicy(
            hsts="max-age=5; preload", cors_origins=[re.compile(r"^https://ok\.example$")]
        )
        treq, _, _ = make(policy)
        _, headers, _ = self.get(treq, "/hello", headers={"Origin": "https://ok.example"})
        assert headers.getRawHeaders("strict-transport-security") == ["max-age=5; preload"]
        assert headers.getRawHeaders("access-control-allow-origin") == ["https://ok.example"]
        assert headers.getRawHeaders("access-control-allow-credentials") == ["true"]
        code, _, _ = self.get(
            treq, "/hello", method="OPTIONS", headers={"Origin": "https://ok.example"}
        )
        assert code == 204
        _, headers, _ = self.get(treq, "/hello", headers={"Origin": "https://bad.example"})
        assert not headers.hasHeader("access-control-allow-origin")

    def test_timeout_gives_504_bare_status(self) -> None:
        treq, clock, pending = make(ServingPolicy(request_timeout=60))
        d = treq.get("https://x/slow")
        clock.advance(59)
        self.assertNoResult(d)
        clock.advance(1)
        treq.flush()
        response = self.successResultOf(d)
        assert response.code == 504
        body = json.loads(self.successResultOf(response.content()))
        assert body == {
            "metadata": {},
            "status": "Failure",
            "message": "Timeout: request did not complete within the allotted timeout",
            "reason": "Timeout",
            "details": {},
            "code": 504,
        }
        assert pending[0].called  # the handler's Deferred was cancelled
        self.flushLoggedErrors()

    def test_watch_has_no_deadline(self) -> None:
        treq, clock, pending = make(ServingPolicy(request_timeout=1))
        d = treq.get("https://x/apis/slow?watch=true")
        clock.advance(100)
        self.assertNoResult(d)
        pending[0].callback(text(200, "done"))
        treq.flush()
        assert self.successResultOf(d).code == 200

    def test_handler_error_is_500_status(self) -> None:
        treq, _, _ = make()
        code, _, body = self.get(treq, "/boom")
        assert code == 500
        assert json.loads(body)["reason"] == "InternalError"
        self.flushLoggedErrors(RuntimeError)

    def test_input_too_deep_for_the_code_is_400_never_500(self) -> None:
        """Issue 17: a RecursionError is the input's depth, answered as Go's decoder answers
        past its limit."""
        treq, _, _ = make()
        code, _, body = self.get(treq, "/deep")
        assert code == 400
        assert json.loads(body) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "exceeded max depth",
            "reason": "BadRequest",
            "code": 400,
        }

    def test_shutdown_gate_and_inflight_accounting(self) -> None:
        clock = Clock()
        life = Lifecycle(clock, send_retry_after=True)
        treq, _, pending = make(lifecycle=life)
        d = treq.get("https://x/slow")
        assert life.inflight == 1
        life.on_signal()
        code, headers, _ = self.get(treq, "/hello")
        assert code == 429
        assert headers.getRawHeaders("retry-after") == ["5"]
        assert self.get(treq, "/livez-not-registered")[0] == 404  # exempt prefix
        pending[0].callback(text(200, "late"))
        treq.flush()
        assert self.successResultOf(d).code == 200
        assert life.inflight == 0
        assert life.drained


def test_parse_query_like_go() -> None:
    from apiserver.http.app import parse_query

    assert parse_query(b"/livez") == {}
    assert parse_query(b"/livez?verbose") == {b"verbose": [b""]}
    assert parse_query(b"/x?exclude=a&exclude=b%2Fc&v=1+2") == {
        b"exclude": [b"a", b"b/c"],
        b"v": [b"1 2"],
    }
    assert parse_query(b"/x?a=1;b=2&c=3") == {b"c": [b"3"]}


def test_header_value_is_the_first_of_repeated_values_like_go() -> None:
    """Go's ``Header.Get`` (what kube-apiserver reads) gives the first value; twisted's
    ``getHeader`` the last. Both request types the server builds are checked."""
    from tests.unit.fake_request import FakeRequest

    from apiserver.http.app import header_value
    from apiserver.http.h1request import H1Request

    fake = FakeRequest()
    fake.requestHeaders.setRawHeaders(b"accept", [b"application/yaml", b"application/json"])
    assert header_value(fake, b"accept") == "application/yaml"
    assert header_value(fake, b"content-type") == ""

    lean = H1Request.__new__(H1Request)
    lean.requestHeaders = fake.requestHeaders
    assert header_value(lean, b"Accept") == "application/yaml"
