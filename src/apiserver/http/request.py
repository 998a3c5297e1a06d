"""The request contract: what filters and handlers use of a request, as one ``Protocol``.

Three classes serve requests: :class:`apiserver.http.h1request.H1Request` (HTTP/1.x),
:class:`apiserver.http.h2request.H2Request` (HTTP/2 streams) and twisted.web's ``Request``
(the stock HTTP/2 path for unusual header blocks, and the requests ``treq.testing.StubTreq``
makes in unit tests). They share twisted.web's names and semantics; :class:`HTTPRequest` states
the part of that interface the application relies on, so that a handler written against one
class works with the others and mypy says so. ``tests/unit/http/test_request_contract.py``
checks every class against it.

Members are read-only properties where the application only reads them: a ``Protocol``
attribute would be invariant, and twisted.web declares, for example, ``finished`` as ``int``
and ``content`` as ``None`` at class level.

kube-apiserver's handlers take Go's ``*http.Request`` and ``http.ResponseWriter``
(``net/http``); this Protocol is the pair of them in twisted.web's shape.
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Protocol

from twisted.internet.defer import Deferred
from twisted.web.http_headers import Headers


class HTTPRequest(Protocol):
    """One request and its response, as the filters and handlers see it."""

    # -- the request -------------------------------------------------------------------------

    @property
    def method(self) -> bytes:
        """``GET``, ``POST``, ...: as received."""

    @property
    def uri(self) -> bytes:
        """The request target: path and query, still percent-encoded."""

    @property
    def path(self) -> bytes:
        """``uri`` without the query (still percent-encoded)."""

    @property
    def requestHeaders(self) -> Headers:
        """The request headers; the authentication filter removes credentials from them."""

    @property
    def content(self) -> IO[bytes] | None:
        """The request body, or None when there is none."""

    @property
    def channel(self) -> object:
        """The connection (HTTP/1.x) or stream (HTTP/2), while the request is served.

        Afterwards it is None, or absent: twisted.web's ``Request`` deletes it when the
        response is done (``apiserver.tls.peercert`` reads it with ``getattr`` for that reason).
        """

    @property
    def transport(self) -> object:
        """The TLS transport over HTTP/1.x; None for HTTP/2 streams."""

    def getHeader(self, key: bytes) -> bytes | None:
        """The last value of a request header (use ``http.app.header_value`` for the first)."""

    # -- the response ------------------------------------------------------------------------

    @property
    def responseHeaders(self) -> Headers:
        """The response headers, until the first ``write``."""

    @property
    def code(self) -> int:
        """The response status code set so far."""

    @property
    def startedWriting(self) -> int:
        """True once the status line and headers are out."""

    @property
    def sentLength(self) -> int:
        """Bytes of body written so far (``apiserver_response_sizes``)."""

    @property
    def finished(self) -> int:
        """True once ``finish`` was called."""

    @property
    def _disconnected(self) -> bool:
        """True once the client went away (twisted.web's flag, which all three classes keep)."""

    def setResponseCode(self, code: int, message: bytes | None = None) -> None:
        """The status code of the response (before the first ``write``)."""

    def setHeader(self, name: bytes, value: bytes) -> None:
        """Replace a response header."""

    def write(self, data: bytes) -> None:
        """Send part of the body (the headers first, on the first call)."""

    def finish(self) -> object:
        """End the response."""

    def notifyFinish(self) -> Deferred[None]:
        """Fires when the response is done; fails when the client went away first."""

    def registerProducer(self, producer: object, streaming: bool) -> None:
        """Flow control for streamed bodies (watches)."""

    def unregisterProducer(self) -> None:
        """Undo :meth:`registerProducer`."""


if TYPE_CHECKING:
    # mypy checks that the three request classes satisfy the contract (the unit test
    # tests/unit/http/test_request_contract.py checks it at run time).
    from twisted.web.server import Request as _TwistedRequest

    from apiserver.http.h1request import H1Request
    from apiserver.http.h2request import H2Request

    def _conforms(h1: H1Request, h2: H2Request, twisted: _TwistedRequest) -> list[HTTPRequest]:
        return [h1, h2, twisted]
