"""The console behind the handler chain: ``/ui`` answered before the stages, on the
server's own request objects (apiserver.console.relay), and nothing else sent there."""

from __future__ import annotations

from typing import Any

from tests.unit.fake_request import FakeRequest
from tests.unit.unit_helpers import AppResource
from treq.testing import StubTreq
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.resource import Resource

from apiserver.console import console_handler
from apiserver.console.relay import relay
from apiserver.http.app import App, RequestInfo, Router, ServingPolicy
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response, text


def refuse(request: HTTPRequest, info: RequestInfo) -> Response:
    """A stage that answers every request 401 (authentication without credentials)."""
    return text(401, "Unauthorized")


def make(console: Any = None) -> StubTreq:
    router = Router()
    router.add_prefix("/", lambda request, info: text(200, "router"))
    app = App(
        router,
        Clock(),
        ServingPolicy(hsts="max-age=60"),
        stages=[refuse],
        console=console if console is not None else console_handler(),
    )
    return StubTreq(AppResource(app))


class MountTests(SynchronousTestCase):
    def fetch(self, treq: StubTreq, path: str, method: str = "GET") -> tuple[int, Any, bytes]:
        response = self.successResultOf(
            treq.request(method, "https://x" + path, allow_redirects=False)
        )
        return response.code, response.headers, self.successResultOf(response.content())

    def test_console_paths_need_no_credentials(self) -> None:
        treq = make()
        code, headers, body = self.fetch(treq, "/ui/")
        assert code == 200 and body.startswith(b"<!DOCTYPE html>")
        # The chain's response-wide headers still apply.
        assert headers.getRawHeaders("strict-transport-security") == ["max-age=60"]
        assert headers.getRawHeaders("audit-id")
        assert self.fetch(treq, "/ui/static/console.js")[0] == 200
        assert self.fetch(treq, "/ui")[0] == 301

    def test_other_paths_go_through_the_stages(self) -> None:
        seen: list[bytes] = []

        def spy(request: HTTPRequest) -> None:
            seen.append(request.path)
            App.write(request, text(200, "console"))

        treq = make(spy)
        for path in ("/uix", "/u", "/api/v1/ui/", "/apis/ui/", "/healthz", "/"):
            assert self.fetch(treq, path)[0] == 401, path
        assert seen == []
        self.fetch(treq, "/ui/x")
        assert seen == [b"/ui/x"]

    def test_own_request_objects(self) -> None:
        """The listener's requests are not twisted.web's: the relay serves them too."""
        handle = console_handler()
        request = FakeRequest(b"GET", b"/ui/static/%63onsole.css?x=1")
        handle(request)
        assert request.finished and request.code == 200
        assert request.responseHeaders.getRawHeaders(b"content-type") == [
            b"text/css; charset=utf-8"
        ]
        assert b"".join(request.written).startswith(b"/*")

        head = FakeRequest(b"HEAD", b"/ui/")
        handle(head)
        assert head.finished and head.code == 200 and head.written == []
        length = head.responseHeaders.getRawHeaders(b"content-length")
        assert length is not None and int(length[0]) > 1000

    def test_client_gone_first(self) -> None:
        request = FakeRequest(b"GET", b"/ui/")
        request._disconnected = True
        console_handler()(request)
        assert not request.finished and request.written == []


class _Plain(Resource):
    isLeaf = True

    def render_GET(self, request: Any) -> bytes:
        request.setHeader(b"content-type", b"text/plain")
        return b"plain:" + b"/".join(request.postpath)


class _Broken(Resource):
    isLeaf = True

    def render_GET(self, request: Any) -> bytes:
        raise RuntimeError("broken")


class RelayTests(SynchronousTestCase):
    def test_plain_resource_answer(self) -> None:
        request = FakeRequest(b"GET", b"/ui/a/b%2Fc")
        relay(_Plain())(request)
        assert request.code == 200 and b"".join(request.written) == b"plain:a/b/c"

    def test_error_is_a_500(self) -> None:
        request = FakeRequest(b"GET", b"/ui/x")
        relay(_Broken())(request)
        assert request.code == 500
        assert b"".join(request.written) == b"500 internal server error\n"
        self.flushLoggedErrors(RuntimeError)
