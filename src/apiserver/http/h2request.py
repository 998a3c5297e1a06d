"""The request object of our HTTP/2 server (:class:`apiserver.http.h2.FastH2Connection`).

Why not twisted.web's: over HTTP/2 Twisted builds, for every stream, an ``H2Stream`` (the
stream's transport, consumer and producer) and a ``twisted.web`` ``Request`` whose
constructor asks the connection for both addresses and builds two ``Headers``; the stream
then converts the header list into the request one ``Headers`` call at a time, and the
request's ``write`` and ``finish`` go back through the stream to the connection. In a
py-spy profile of a GET of one event over HTTP/2 that was about a fifth of the daemon's CPU
time. This class is both at once, as :class:`apiserver.http.h1request.H1Request` is for
HTTP/1.x: the connection keeps it in ``streams`` where Twisted keeps an ``H2Stream`` (it has
the stream's methods the connection calls: ``receiveDataChunk``, ``requestComplete``,
``connectionLost``, ``windowUpdated``, ``flowControlBlocked``), and ``App.handle`` serves it
as a request (the names and semantics of twisted.web's ``Request`` that the project uses,
inherited from ``H1Request``).

What a client and the application see is twisted.web's, step by step
(``twisted/web/_http2.py`` ``H2Stream``, ``twisted/web/http.py`` ``Request``, Twisted 26):

- request headers: the regular fields in their order, names in twisted's canonical case,
  ``:authority`` as a ``Host`` field where it stood; ``clientproto`` is ``HTTP/2``;
- the body goes to memory up to 100,000 declared bytes and to a temporary file beyond, or
  without a ``content-length`` (``GET`` and ``HEAD`` excepted); every DATA frame is
  acknowledged (WINDOW_UPDATE) as it is stored; ``Expect: 100-continue`` is answered at
  once;
- the response: HEADERS from the status and the response headers in the order they were
  set, no body for ``HEAD``, 204 and 304, the body as written, the end of the stream on
  ``finish``; ``write`` after ``finish`` raises, ``finish`` twice warns, ``finish`` after the
  stream was reset raises; a reset or a lost connection errbacks ``notifyFinish``;
- a registered producer is paused when the stream's flow-control window (minus what is
  queued) is used up and resumed when a WINDOW_UPDATE opens it (``H2Stream``'s rule); a
  pull producer is driven through ``_PullToPush``;
- ``request.transport`` is None and ``request.channel`` is the stream (here the request
  itself) while it is answered, with the connection as ``channel._conn``: the client
  certificate is found there (``apiserver.tls.peercert``), and ``App``'s timeout, which
  aborts ``channel.transport`` once headers are out, finds none, as with Twisted's stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet._producer_helpers import _PullToPush
from twisted.web.http import _getContentFile

from apiserver.http import bodylimit
from apiserver.http.h1request import (
    NO_BODY_CODES,
    H1Request,
    RequestHeaders,
    ResponseHeaders,
    canonical_name,
    names,
)

if TYPE_CHECKING:
    from apiserver.http.h2 import FastH2Connection

_HOST = b"Host"
_MAX_BODY = bodylimit.MAX_REQUEST_BODY_BYTES
_EXPECT = b"Expect"


class H2Request(H1Request):
    """One HTTP/2 stream and its request (see the module docstring).

    ``headers`` is the request's header block, already validated (the connection's one-pass
    check, :func:`apiserver.http.h2._plainRequestHeaders`): ``:method`` and ``:path`` are
    present. Subclasses override :meth:`process`, as with twisted.web.
    """

    #: The twisted.web request class for streams this class does not take (header blocks
    #: of an unusual shape, which h2's own validator accepted): served as before, through
    #: Twisted's ``H2Stream``.
    twistedRequestFactory: Any = None
    clientproto = b"HTTP/2"
    #: As twisted.web's ``H2Stream``: HTTP/2 exposes no transport per request.
    transport = None
    keepAlive = True
    #: The producer as the stream drives it (a pull producer wrapped in ``_PullToPush``);
    #: ``producer`` is the one the application registered, as in twisted.web.
    _streamProducer: Any = None
    _streamingProducer: bool | None = None
    _producerProducing = False
    #: The body is over ``bodylimit.MAX_REQUEST_BODY_BYTES``: 1 once ``content`` is the 413
    #: stand-in, 2 once the request was handed on (the rest of the body is discarded).
    _bodyCut = 0
    #: When the body's second DATA frame came (-1: no DATA yet, 0: one frame so far): a body
    #: still arriving ``bodyTimeout`` seconds later is cut (504, bodylimit). The first frame
    #: costs no clock reading: most bodies are one frame.
    _bodyStart = -1.0

    def __init__(
        self, connection: FastH2Connection, streamID: int, headers: list[tuple[bytes, bytes]]
    ) -> None:
        self._conn = connection
        self.streamID = streamID
        #: The stream, while the request is being answered (twisted.web's ``channel``).
        self.channel: Any = self
        self.client = connection.getPeer()
        self.host = connection.getHost()
        raw: dict[bytes, list[bytes]] = {}
        method = path = b""
        length: int | None = None
        for name, value in headers:
            if name[:1] == b":":
                if name == b":authority":
                    name = _HOST
                else:
                    if name == b":method":
                        method = value
                    elif name == b":path":
                        path = value
                    continue
            elif name == b"content-length":
                length = int(value)
            canonical = names.get(name) or canonical_name(name)
            values = raw.get(canonical)
            if values is None:
                raw[canonical] = [value]
            else:
                values.append(value)
        self.method = method
        self.uri = path
        self.path = path.partition(b"?")[0]
        self.requestHeaders = RequestHeaders(raw)
        self.responseHeaders = ResponseHeaders()
        if length is None and method not in (b"GET", b"HEAD"):
            self.content = _getContentFile(None)
        elif length is not None and length > _MAX_BODY:
            # Declared too long: served (413) on its first DATA frame, unread (bodylimit).
            self.content = bodylimit.too_large()  # type: ignore[assignment]
            self._bodyCut = 1
        else:
            self.content = _getContentFile(length or 0)
        self.notifications = []
        expect = raw.get(_EXPECT)
        if expect and expect[0].lower() == b"100-continue":
            connection._send100Continue(streamID)

    # -- what the connection calls (twisted.web's H2Stream interface) -----------------

    def receiveDataChunk(self, data: bytes, flowControlledLength: int) -> None:
        """A piece of the request body: stored, then acknowledged to the client.

        A body over the limit is not kept: the request is served at once (its content
        answers 413, :mod:`apiserver.http.bodylimit`) and what follows is acknowledged and
        dropped; the stream is reset with NO_ERROR once the answer is sent
        (``FastH2Connection._requestDone``), as Go's server does."""
        if self._bodyCut:
            self._conn.openStreamWindow(self.streamID, flowControlledLength)
            if self._bodyCut == 1:
                self._bodyCut = 2
                self.process()
            return
        start = self._bodyStart
        if start < 0:
            self._bodyStart = 0.0
        else:
            conn = self._conn
            timeout = conn.bodyTimeout
            if timeout:
                now = conn._reactor.seconds()
                if not start:
                    self._bodyStart = now
                elif now - start > timeout:
                    self._cutBody(bodylimit.timed_out(), flowControlledLength)
                    return
        content = self.content
        if content is not None:
            content.write(data)
            if content.tell() > _MAX_BODY:
                self._cutBody(bodylimit.too_large(), flowControlledLength)
                return
        self._conn.openStreamWindow(self.streamID, flowControlledLength)

    def _cutBody(self, standIn: bodylimit.UnreadBody, flowControlledLength: int) -> None:
        """Serve the request now with ``standIn`` as its body; what follows is dropped."""
        content = self.content
        if content is not None:
            content.close()
        self.content = standIn  # type: ignore[assignment]
        self._bodyCut = 2
        self._conn.openStreamWindow(self.streamID, flowControlledLength)
        self.process()

    def requestComplete(self) -> None:
        """The whole request is in (END_STREAM): serve it."""
        if self._bodyCut:
            if self._bodyCut == 1:
                self._bodyCut = 2
                self.process()
            return
        content = self.content
        if content is not None:
            content.seek(0, 0)
        self.process()

    def windowUpdated(self) -> None:
        """The stream's window opened: resume a paused producer if it has room now."""
        producer = self._streamProducer
        if producer is None or self._producerProducing:
            return
        if self._conn.remainingOutboundWindow(self.streamID) > 0:
            self._producerProducing = True
            producer.resumeProducing()

    def flowControlBlocked(self) -> None:
        """The stream's window is used up: pause the producer."""
        producer = self._streamProducer
        if producer is not None and self._producerProducing:
            producer.pauseProducing()
            self._producerProducing = False

    # -- the response -----------------------------------------------------------------

    def isSecure(self) -> bool:
        return self.channel is not None and self._conn._isSecure()

    def write(self, data: bytes) -> None:
        """Send ``data`` as (part of) the body; the first call sends the HEADERS."""
        if self.finished:
            raise RuntimeError("Request.write called on a request after Request.finish was called.")
        if self._disconnected:
            return
        if not self.startedWriting:
            self.startedWriting = 1
            code = self.code
            if code in NO_BODY_CODES or self.method == b"HEAD":
                self._noBody = True
            self._conn.writeResponseHeaders(self.streamID, code, self.responseHeaders)
            if self._noBody:
                return
        elif self._noBody:
            return
        self.sentLength += len(data)
        if data:
            self._conn.writeDataToStream(self.streamID, data)

    def _endBody(self) -> Callable[[Any], None] | None:
        return self._conn._accessLog

    def _release(self) -> None:
        """END_STREAM follows the last data; the stream is forgotten once it is sent."""
        self._conn.endRequest(self.streamID)
        self.channel = None
        content, self.content = self.content, None
        if content is not None:
            content.close()

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        if self.producer is not None:
            raise ValueError(
                f"registering producer {producer} before previous one ({self.producer}) was "
                "unregistered"
            )
        if self.channel is None:
            raise RuntimeError("registerProducer on a finished or disconnected request")
        self.streamingProducer = streaming
        self.producer = producer
        if not streaming:
            producer = _PullToPush(producer, self)
            producer.startStreaming()
        self._streamingProducer = streaming
        self._streamProducer = producer
        self._producerProducing = True

    def unregisterProducer(self) -> None:
        producer = self._streamProducer
        if producer is not None and not self._streamingProducer:
            producer.stopStreaming()
        self._producerProducing = False
        self._streamProducer = None
        self._streamingProducer = None
        self.producer = None

    def abortConnection(self) -> None:
        """Reset the stream (RST_STREAM), as ``H2Stream.abortConnection``."""
        self._conn.abortRequest(self.streamID)

    def resetStream(self, errorCode: int) -> None:
        """Reset the stream with ``errorCode`` (the App's timeout after an answer began)."""
        if self.channel is not None:
            self._conn.abortRequest(self.streamID, errorCode)

    def loseConnection(self) -> None:
        """End the stream once what was written is sent (``H2Stream.loseConnection``)."""
        if self.channel is not None:
            self._conn.endRequest(self.streamID)
