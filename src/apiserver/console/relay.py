"""Serve a twisted.web resource (the console's Klein app) on the server's own requests.

The listener's requests are :class:`apiserver.http.h1request.H1Request` and its HTTP/2 twin,
lean classes that only look like twisted.web's ``Request`` where the API needs it; Klein
wants the real thing (it adapts ``twisted.web.server.Request`` to its ``IKleinRequest`` and
renders templates into it). :class:`RelayRequest` is a ``twisted.web.server.Request`` that
takes its method, target and headers from the incoming request and collects what the
resource writes; once the resource finishes, the whole answer is written to the incoming
request in one piece (:meth:`apiserver.http.app.App.write`). The console's answers are small
and complete (a page, a stylesheet, a script), so nothing is streamed.

Only ``/ui`` paths come here (:class:`apiserver.http.app.App` checks the prefix), never the
API: this costs the API nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from io import BytesIO
from typing import Any
from urllib.parse import unquote_to_bytes

from twisted.internet.address import IPv4Address
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import IResource
from twisted.web.server import Request

from apiserver.http.app import App
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response

log = Logger()

#: The address Klein sees; it only builds absolute URLs from it, which the console never does.
_HOST = IPv4Address("TCP", "127.0.0.1", 443)


class _Site:
    """What ``twisted.web.server.Request.__init__`` reads of its channel's site in recent
    Twisted releases (older ones read nothing): the console takes no form bodies."""

    _parsePOSTFormSubmission = False


class _Channel:
    """What ``twisted.web.server.Request.__init__`` reads of its channel."""

    transport = None
    site = _Site()

    def getPeer(self) -> IPv4Address:
        return _HOST

    def getHost(self) -> IPv4Address:
        return _HOST

    def isSecure(self) -> bool:
        return True


class RelayRequest(Request):
    """A twisted.web request whose answer goes to ``deliver`` when it finishes."""

    def __init__(
        self, source: HTTPRequest, mount: bytes, deliver: Callable[[Response], None]
    ) -> None:
        super().__init__(_Channel())
        self._deliver = deliver
        self._body: list[bytes] = []
        self.method = source.method
        self.uri = source.uri
        self.path = source.path
        self.clientproto = b"HTTP/1.1"
        self.requestHeaders = source.requestHeaders
        self.args = {}
        self.content = BytesIO()
        # Resource traversal: the mount point is the prefix, the rest is Klein's to route.
        self.sitepath: list[bytes] = []
        self.prepath = [mount]
        rest = self.path[len(mount) + 1 :]
        self.postpath = [unquote_to_bytes(s) for s in rest[1:].split(b"/")] if rest else []

    def write(self, data: bytes) -> None:
        if self.finished:
            raise RuntimeError("write after finish")
        self.startedWriting = 1
        if data:
            self._body.append(data)

    def finish(self) -> None:
        if self.finished:
            return
        self.startedWriting = 1
        self.finished = 1
        headers = tuple(
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, values in self.responseHeaders.getAllRawHeaders()
            for value in values
        )
        self._deliver(Response(self.code, headers, b"".join(self._body)))
        notifications, self.notifications = self.notifications, []
        for waiting in notifications:
            waiting.callback(None)

    def processingFailed(self, reason: Failure) -> None:
        log.failure("console request {path} failed", reason, path=self.path)
        self.responseHeaders.setRawHeaders(b"content-type", [b"text/plain; charset=utf-8"])
        self.setResponseCode(500)
        self._body = [b"500 internal server error\n"]
        self.finish()


def relay(resource: IResource, mount: bytes = b"ui") -> Callable[[HTTPRequest], None]:
    """A handler for :class:`apiserver.http.app.App` ``console=``: renders ``resource`` for
    paths under ``/<mount>`` and writes its answer."""

    def handle(request: HTTPRequest) -> None:
        def deliver(response: Response) -> None:
            if not (request.finished or request._disconnected):
                App.write(request, response)

        relayed = RelayRequest(request, mount, deliver)
        try:
            body: Any = resource.render(relayed)
        except Exception:
            relayed.processingFailed(Failure())
            return
        if isinstance(body, bytes):  # a plain resource that answered at once
            relayed.write(body)
            relayed.finish()

    return handle
