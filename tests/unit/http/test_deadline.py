"""``?timeout=`` (k8s.io/apiserver/pkg/endpoints/filters/request_deadline.go) through the App."""

from __future__ import annotations

import json
from typing import Any

from tests.unit.http.test_app import make
from treq.testing import StubTreq
from twisted.trial.unittest import SynchronousTestCase

from apiserver.apimachinery.errors import StatusError
from apiserver.http.app import ServingPolicy
from apiserver.http.deadline import request_timeout
from apiserver.http.response import text
from apiserver.protobuf import codec


def test_request_timeout_values() -> None:
    assert request_timeout([b"10s"], 60.0) == 10.0
    assert request_timeout([b"1.5s", b"99s"], 60.0) == 1.5  # Query().Get: the first
    assert request_timeout([b""], 60.0) == 60.0  # empty: not given
    assert request_timeout([b"0"], 60.0) == 60.0  # no timeout on the user's part
    assert request_timeout([b"-5s"], 60.0) == 60.0
    assert request_timeout([b"2m"], 60.0) == 60.0  # never beyond --request-timeout
    assert request_timeout([b"60s"], 60.0) == 60.0
    refused = request_timeout([b"10"], 60.0)
    assert isinstance(refused, StatusError)
    assert (refused.code, refused.reason) == (400, "BadRequest")


class DeadlineTests(SynchronousTestCase):
    def get(self, treq: StubTreq, path: str) -> tuple[int, Any, bytes]:
        response = self.successResultOf(treq.get("https://x" + path))
        return response.code, response.headers, self.successResultOf(response.content())

    def test_malformed_timeout_is_a_400_status_before_the_handler(self) -> None:
        treq, _, pending = make(ServingPolicy(request_timeout=60))
        for path in ("/slow?timeout=abc", "/apis/slow?timeout=10", "/hello?timeout=1x"):
            code, headers, body = self.get(treq, path)
            assert code == 400
            assert headers.getRawHeaders("content-type") == ["application/json"]
            status = json.loads(body)
            assert status["reason"] == "BadRequest"
            assert status["message"].startswith(
                "invalid timeout specified in the request URL - time: "
            )
        assert pending == []  # no handler ran
        code, _, body = self.get(treq, "/hello?timeout=abc")
        assert json.loads(body) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "invalid timeout specified in the request URL - time: invalid duration "
            '"abc"',
            "reason": "BadRequest",
            "code": 400,
        }
        code, _, body = self.get(treq, "/hello?timeout=10")
        assert json.loads(body)["message"] == (
            'invalid timeout specified in the request URL - time: missing unit in duration "10"'
        )

    def test_a_shorter_timeout_is_the_deadline(self) -> None:
        treq, clock, pending = make(ServingPolicy(request_timeout=60))
        d = treq.get("https://x/slow?timeout=2s")
        clock.advance(1.9)
        self.assertNoResult(d)
        clock.advance(0.1)
        treq.flush()
        response = self.successResultOf(d)
        assert response.code == 504
        body = json.loads(self.successResultOf(response.content()))
        assert body["reason"] == "Timeout"
        assert pending[0].called  # the handler's work was cancelled
        self.flushLoggedErrors()

    def test_a_longer_or_zero_timeout_leaves_request_timeout(self) -> None:
        for query in ("timeout=5m", "timeout=0", "timeout="):
            treq, clock, pending = make(ServingPolicy(request_timeout=60))
            d = treq.get("https://x/slow?" + query)
            clock.advance(59)
            self.assertNoResult(d)
            pending[0].callback(text(200, "done"))
            treq.flush()
            assert self.successResultOf(d).code == 200

    def test_long_running_requests_ignore_it(self) -> None:
        treq, clock, pending = make(ServingPolicy(request_timeout=60))
        d = treq.get("https://x/apis/slow?watch=true&timeout=abc")
        clock.advance(100)
        self.assertNoResult(d)
        pending[0].callback(text(200, "done"))
        treq.flush()
        assert self.successResultOf(d).code == 200

    def test_refusals_before_the_handler_are_protobuf_when_accept_picks_it(self) -> None:
        """failedErrorHandler and go-restful's 404 write through ErrorNegotiated."""
        treq, _, pending = make(ServingPolicy(request_timeout=60))
        accept = {"Accept": "application/vnd.kubernetes.protobuf"}
        for path, code, reason in (
            ("/hello?timeout=abc", 400, "BadRequest"),
            ("/apis/nosuch/v1/things", 404, "NotFound"),
        ):
            response = self.successResultOf(treq.get("https://x" + path, headers=accept))
            assert response.code == code
            content_type = response.headers.getRawHeaders("content-type")
            assert content_type == ["application/vnd.kubernetes.protobuf"]
            api_version, kind, raw = codec.unwrap(self.successResultOf(response.content()))
            status = codec.decode(codec.Status, raw)
            assert (api_version, kind, status["reason"], status["code"]) == (
                "v1",
                "Status",
                reason,
                code,
            )
            # JSON when Accept does not pick protobuf.
            response = self.successResultOf(treq.get("https://x" + path))
            assert json.loads(self.successResultOf(response.content()))["reason"] == reason
        assert pending == []
