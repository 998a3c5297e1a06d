"""The twisted.web Site that hands every request straight to :class:`apiserver.http.app.App`.

Why a custom Request: twisted.web's ``Request.process`` adds a ``Server`` header that
kube-apiserver never sends, formats the ``Date`` anew on every request and walks a resource
tree; we need none of that. The access log is off unless ``-v`` is 3 or more (measured: the
default per-request log costs about 40% of throughput; docs/architecture.md).

HTTP/1.x connections are served by :class:`apiserver.http.h1.H1Channel` with
:class:`ApiH1Request` (the site's ``buildProtocol``); HTTP/2 streams (ALPN ``h2``) by
:class:`ApiH2Request` (:mod:`apiserver.http.h2request`), or twisted.web's
:class:`ApiRequest` for the rare header block of an unusual shape. All are served by
:func:`serve`.
"""

from __future__ import annotations

import time
from typing import Any, cast

from twisted.logger import Logger
from twisted.web import server
from twisted.web.http import datetimeToString
from twisted.web.resource import Resource

from apiserver.http import bodylimit
from apiserver.http.app import App
from apiserver.http.h1 import H1Channel, H1Request
from apiserver.http.h2request import H2Request
from apiserver.http.request import HTTPRequest

log = Logger()


class _DateCache:
    """The HTTP ``Date`` value, formatted at most once a second."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def now(self) -> bytes:
        second = int(time.time())
        if second != self._second:
            self._second = second
            self._value = datetimeToString(second)
        return self._value


_dates = _DateCache()


class ApiRequest(server.Request):
    """A Request that skips resource traversal and goes to the site's App."""

    defaultContentType = None

    # The API takes JSON and YAML bodies only: __init__ turns off twisted.web's form parsing,
    # which runs every POST's Content-Type through the email package.
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("parsePOSTFormSubmission", False)
        super().__init__(*args, **kwargs)

    #: The body passed ``bodylimit.MAX_REQUEST_BODY_BYTES``: the rest was dropped, and the
    #: handler reads the 413 stand-in instead.
    _bodyTooLarge = False

    def handleContentChunk(self, data: bytes) -> None:
        """Twisted's, bounded: over HTTP/2 streams of an unusual header shape and on the
        fallback connection (the only users of this class) a body is kept up to kube-apiserver's
        3 MiB and dropped beyond (apiserver.http.bodylimit); the request is served when the
        stream ends, with the 413 stand-in as its body."""
        if self._bodyTooLarge:
            return
        content = self.content
        assert content is not None
        content.write(data)
        if content.tell() > bodylimit.MAX_REQUEST_BODY_BYTES:
            self._bodyTooLarge = True
            content.seek(0, 0)
            content.truncate()

    def process(self) -> None:
        self.site = self.channel.site  # type: ignore[attr-defined]
        self.prepath = []
        self.postpath = []
        if self._bodyTooLarge:
            self.content = bodylimit.too_large()
        serve(self, self.site.app)  # type: ignore[union-attr]


class ApiH2Request(H2Request):
    """An HTTP/2 stream (:mod:`apiserver.http.h2request`) for the site's App."""

    twistedRequestFactory = ApiRequest

    def process(self) -> None:
        site: Any = self._conn.site
        self.site = site
        serve(self, site.app)


class ApiH1Request(H1Request):
    """An HTTP/1.x request (:mod:`apiserver.http.h1`) for the site's App."""

    def process(self) -> None:
        channel = self.channel
        assert channel is not None
        self.site = channel.site
        serve(self, self.site.app)


def serve(request: HTTPRequest, app: App) -> None:
    """Add the ``Date`` and run the App; a 500 if it raises before answering."""
    request.responseHeaders.setRawHeaders(b"date", [_dates.now()])
    try:
        app.handle(request)
    except Exception:
        log.failure("unhandled error serving {path}", path=request.path)
        if not request.finished and not request.startedWriting:
            request.setResponseCode(500)
            request.finish()


class ApiSite(server.Site):
    """A Site bound to one App."""

    requestFactory = ApiRequest

    def __init__(self, app: App, log_requests: bool = False, **kwargs: Any) -> None:
        super().__init__(Resource(), **kwargs)
        self.app = app
        self.log_requests = log_requests
        self.displayTracebacks = False

    def buildProtocol(self, addr: Any) -> Any:
        """An :class:`H1Channel`, which hands ALPN ``h2`` connections to HTTP/2."""
        channel = H1Channel()
        channel.factory = self
        channel.site = self
        channel.requestFactory = ApiH1Request
        channel.h2RequestFactory = ApiH2Request
        channel.timeOut = self.timeOut
        # A body still arriving after --request-timeout is cut (apiserver.http.bodylimit).
        channel.bodyTimeout = self.app.policy.request_timeout or None
        reactor: Any = self.reactor
        channel.callLater = reactor.callLater
        channel.seconds = reactor.seconds
        return channel

    def log(self, request: HTTPRequest) -> None:
        if self.log_requests:
            # The access log reads twisted.web names that all three request classes keep.
            super().log(cast(server.Request, request))
