"""A complete in-memory request for unit tests that call filters or handlers directly.

It satisfies :class:`apiserver.http.request.HTTPRequest` (``tests/unit/http/
test_request_contract.py`` checks it), records what is written, and finishes like
twisted.web's ``Request``: ``notifyFinish`` Deferreds fire on :meth:`finish`, fail on
:meth:`lose`.
"""

from __future__ import annotations

from io import BytesIO
from typing import IO

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from twisted.web.http_headers import Headers


class FakeRequest:
    """``method``, ``uri`` and headers as given; the body in ``content``."""

    def __init__(
        self,
        method: bytes = b"GET",
        uri: bytes = b"/",
        headers: dict[bytes, list[bytes]] | None = None,
        body: bytes | None = None,
    ) -> None:
        self.method = method
        self.uri = uri
        self.path = uri.partition(b"?")[0]
        self.requestHeaders = Headers(headers or {})
        self.responseHeaders = Headers()
        self.content: IO[bytes] | None = BytesIO(body) if body is not None else None
        self.channel: object = None
        self.transport: object = None
        self.code = 200
        self.startedWriting = 0
        self.sentLength = 0
        self.finished = 0
        self._disconnected = False
        self.written: list[bytes] = []
        self.producer: object = None
        self._notifications: list[Deferred[None]] = []

    def getHeader(self, key: bytes) -> bytes | None:
        values = self.requestHeaders.getRawHeaders(key)
        return values[-1] if values else None

    def setResponseCode(self, code: int, message: bytes | None = None) -> None:
        self.code = code

    def setHeader(self, name: bytes, value: bytes) -> None:
        self.responseHeaders.setRawHeaders(name, [value])

    def write(self, data: bytes) -> None:
        self.startedWriting = 1
        self.sentLength += len(data)
        self.written.append(data)

    def finish(self) -> None:
        self.finished = 1
        notifications, self._notifications = self._notifications, []
        for d in notifications:
            d.callback(None)

    def lose(self) -> None:
        """The client goes away."""
        self._disconnected = True
        notifications, self._notifications = self._notifications, []
        for d in notifications:
            d.errback(Failure(ConnectionError("gone")))

    def notifyFinish(self) -> Deferred[None]:
        d: Deferred[None] = Deferred()
        self._notifications.append(d)
        return d

    def registerProducer(self, producer: object, streaming: bool) -> None:
        self.producer = producer

    def unregisterProducer(self) -> None:
        self.producer = None
