"""Our HTTP/1.1 server protocol: llhttp (through ``httptools``) for parsing, and a lean
request object with exactly the twisted.web ``Request`` interface the project uses.

Why not twisted.web's ``HTTPChannel``: it parses with ``LineReceiver`` (a Python call per
header line), builds a ``Request`` whose constructor asks the transport for both addresses
and adapts it to ``ISSLTransport``, resets a ``callLater`` on every read, and writes the
status line and headers, the body and the chunk trailer as separate transport writes. In a
py-spy profile of a GET of one event, that was about half of the daemon's CPU time. Here:

- **Parsing** is llhttp, Node.js's C parser (``httptools``, a well-kept binding used by
  uvicorn): one C call per read, a Python callback per header. Measured on the same request
  (``bench/h1_bench.py --parser``): 0.6-1.1 us, against 3.1 us for twisted.web's line
  splitting alone and 5.9 us for a careful pure-Python parser of a whole head, so a
  hand-written parser would be the slower choice as well as the riskier. It is stricter than
  twisted.web where RFC 9112 allows a server to be (obsolete line folding, methods outside
  llhttp's table, ``Transfer-Encoding: identity`` and raw non-ASCII bytes in the request
  target are refused with 400); Go's net/http, which kube-apiserver runs on, refuses most of
  these too.
- **Connection state** (peer and local address, TLS or not) is looked up once per
  connection, not per request.
- **The idle timeout** is one timer per connection that, when it fires, compares the time
  of the last read with ``timeOut`` and re-arms itself for the rest; twisted.web's
  ``TimeoutMixin`` moves a ``DelayedCall`` on every read.
- **A response** goes out in one transport write for the status line, the headers and the
  first body chunk (twisted.web makes two or three, which the TLS transport then joins).
- **The request object** (:mod:`apiserver.http.h1request`) implements only what the project
  uses of twisted.web's ``Request``.

Measured (``bench/h1_bench.py``, in-process, no TLS): about half of the CPU time per request
of ``HTTPChannel`` with our ``ApiRequest``, App included.

What stays exactly as twisted.web does it (the test-suite and clients see no difference):
the status line echoes the request's version (``HTTP/1.0 200 OK`` to an HTTP/1.0 client);
header names in twisted's canonical case, in the order the application set them; no
``Server`` header; ``Transfer-Encoding: chunked`` for an HTTP/1.1 response without
``Content-Length`` (not for HEAD, 204 or 304); ``Connection: close`` added to the response
when the client asked for it; HTTP/1.0 connections close after one response; ``Expect:
100-continue`` on an HTTP/1.1 request is answered ``100 Continue`` before the body is read
(only when a body follows, as Go's server does: twisted.web also sends it before answering a
bodiless one); pipelined requests are answered one at a time, in order (head-of-line, the
next one is handed to the application only once the previous response is finished); the
connection stops reading when more than 16 KiB of pipelined data waits behind a slow
request, and while the transport cannot take more data and no request is being answered; the
idle timeout (``Site.timeOut``) is suspended while a request is being answered, and on
expiry the connection is closed, and aborted 15 s later if it is still open; a lost
connection errbacks the pending request's ``notifyFinish`` Deferreds; producers registered
on the request are paused and resumed with the transport (one registered while the transport
is full starts paused, where twisted.web would let it write until the next pause).

Where Go's server (kube-apiserver's) differs from twisted.web, Go is followed: a request that
cannot be read gets Go's answer (``400 Bad Request`` with a ``text/plain`` body naming the
status, ``431`` for a request line and header block over kube-apiserver's ``MaxHeaderBytes``
of 1 MiB plus Go's 4 KiB of slack, with no limit on the number of fields, ``501`` for a
Transfer-Encoding other than ``chunked``, Go's ``400`` texts for a missing, repeated or
malformed Host header), then the connection closes.

Where twisted.web's rules are loose, Go's net/http server (``net/http/server.go``) decides:
``Connection`` is read as a comma-separated token list over all its fields
(``httpguts.HeaderValuesContainsToken``), so ``close, keep-alive`` closes; and a request
with ``Upgrade`` that we do not upgrade is served as an ordinary request, body included
(llhttp would otherwise treat the body as another protocol's bytes, which would let a
request be smuggled inside it).

ALPN ``h2`` still goes to the HTTP/2 connection class twisted.web's switcher would build
(``twisted.web.http.H2Connection``, which :func:`apiserver.http.h2.configure_http2`
replaces): :class:`H1Channel` is the protocol the factory builds and, on the first bytes of a
connection that negotiated ``h2``, hands the connection over exactly as
``twisted.web.http._GenericHTTPChannelProtocol`` does.
"""

from __future__ import annotations

import tempfile
import time
from collections import deque
from collections.abc import Callable
from io import BytesIO
from typing import IO, Any

import httptools
from twisted.internet import interfaces
from twisted.internet._producer_helpers import _PullToPush
from twisted.internet.protocol import Protocol, connectionDone
from twisted.logger import Logger
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOProtocol
from twisted.python.failure import Failure
from twisted.web import http
from twisted.web.http import _NoPushProducer

from apiserver.http import bodylimit
from apiserver.http.h1request import H1Request, RequestHeaders, canonical_name, names

log = Logger()

#: What Go's server (kube-apiserver's) writes after the status line of a request it cannot
#: read, before closing: net/http ``conn.serve``'s ``errorHeaders``.
_ERROR_HEADERS = b"\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"


def go_read_error(status: bytes) -> bytes:
    """Go's whole answer to an unreadable request: ``status`` is also the body."""
    return b"HTTP/1.1 " + status + _ERROR_HEADERS + status


#: A request that cannot be parsed.
BAD_REQUEST = go_read_error(b"400 Bad Request")
#: A request line and header block over ``totalHeadersSize``.
HEADERS_TOO_LARGE = go_read_error(b"431 Request Header Fields Too Large")
#: A Transfer-Encoding other than one "chunked" (Go does not echo the coding back).
UNSUPPORTED_TRANSFER_ENCODING = (
    b"HTTP/1.1 501 Not Implemented" + _ERROR_HEADERS + b"Unsupported transfer encoding"
)
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
#: Request bodies up to this size stay in memory; larger ones go to a temporary file
#: (twisted.web's threshold).
BODY_IN_MEMORY = 100_000
#: Streamed body pieces at least this long go to TLS at once instead of through Twisted's
#: small-write buffer (see ``H1Channel.writeStreamData``).
DIRECT_TLS_WRITE = 1024

_VERSIONS = {"1.1": b"HTTP/1.1", "1.0": b"HTTP/1.0", "0.9": b"HTTP/0.9"}
_CONNECTION = b"Connection"
_HOST = b"Host"
_EXPECT = b"Expect"
_CONTENT_LENGTH = b"Content-Length"
_TRANSFER_ENCODING = b"Transfer-Encoding"


def _has_token(values: list[bytes] | None, token: bytes) -> bool:
    """Go's ``httpguts.HeaderValuesContainsToken``: a comma-separated token, any case."""
    if not values:
        return False
    for value in values:
        for item in value.split(b","):
            if item.strip(b" \t").lower() == token:
                return True
    return False


class _Unreadable(Exception):
    """A request to answer with ``answer`` and close (raised from a parser callback)."""

    def __init__(self, answer: bytes) -> None:
        super().__init__(answer)
        self.answer = answer


def _host_error(version: bytes, method: bytes, hosts: list[bytes] | None) -> bytes | None:
    """Go's checks of the Host header (net/http ``readRequest``), as its 400 answer."""
    if hosts is None:
        if version == b"HTTP/1.1" and method != b"CONNECT":
            return go_read_error(b"400 Bad Request: missing required Host header")
        return None
    if len(hosts) > 1:
        return go_read_error(b"400 Bad Request: too many Host headers")
    if hosts[0].translate(None, _HOST_BYTES):
        return go_read_error(b"400 Bad Request: malformed Host header")
    return None


#: The bytes Go accepts in a Host header (golang.org/x/net/http/httpguts ``ValidHostHeader``).
_HOST_BYTES = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!$%&'()*+,-.:;=[]_~"


class _Stop(Exception):
    """Raised from ``on_message_complete`` to stop parsing after a closing request."""


class H1Channel(Protocol):
    """An HTTP/1.x server connection (see the module docstring).

    The factory sets ``site``, ``factory``, ``timeOut``, ``callLater`` and ``seconds``
    (from its reactor), ``requestFactory`` (an :class:`H1Request` subclass) and
    ``h2RequestFactory`` (the twisted.web request class HTTP/2 streams are built with).
    """

    site: Any = None
    factory: Any = None
    requestFactory: Callable[..., H1Request] = H1Request
    h2RequestFactory: Any = None
    #: Idle timeout in seconds (twisted.web's ``timeOut``); None: none.
    timeOut: float | None = None
    callLater: Callable[..., Any] | None = None
    seconds: Callable[[], float] = staticmethod(time.time)

    #: Seconds after an idle timeout before a connection that did not close is aborted.
    abortTimeout: float | None = 15
    #: Limit of one request line and header block: kube-apiserver's ``MaxHeaderBytes``
    #: (1 MiB) plus the 4 KiB Go's server reads beyond it. Go counts no headers, so neither
    #: does this: their number is only bounded by the size.
    totalHeadersSize = (1 << 20) + 4096
    #: Pipelined bytes buffered behind a request being answered before reading pauses.
    eagerReadSize = 0x4000
    #: Longest request body kept (kube-apiserver's ``MaxRequestBodyBytes``; see
    #: :mod:`apiserver.http.bodylimit`).
    maxBodySize = bodylimit.MAX_REQUEST_BODY_BYTES
    #: Seconds a body may take to arrive (``--request-timeout``; the site sets it); None: no
    #: bound beyond the idle timeout.
    bodyTimeout: float | None = None

    #: False once the connection is to close after the current response (``App`` sets it
    #: for answers with ``Connection: close``).
    persistent = True

    def __init__(self) -> None:
        self._parser = httptools.HttpRequestParser(self)
        self._queue: deque[H1Request] = deque()
        #: The request handed to the application and not finished yet.
        self._active: H1Request | None = None
        #: The request whose body is being received.
        self._parsing: H1Request | None = None
        self._alpnChecked = False
        self._h2: Any = None
        # Parse state of the current message.
        self._inHeaders = False
        self._url = b""
        self._raw: dict[bytes, list[bytes]] = {}
        #: Wire bytes of the current message's head received in earlier reads (all of a read
        #: in which the head did not end: see ``_headComplete``).
        self._headBefore = 0
        #: The read being parsed, and the last bytes of the one before (a head's blank line
        #: may straddle two reads).
        self._feeding = b""
        self._tail = b""
        self._big = False
        #: When the body being received must be complete (see ``bodyTimeout``); 0: none.
        self._bodyDeadline = 0.0
        #: A synthetic message is being parsed for the body of an Upgrade request.
        self._bodyOnly = False
        self._upgradeHead: bytes | None = None
        # Connection state.
        self._stopped = False
        self._closing = False
        #: The answer owed to an unreadable request, once those before it are answered.
        self._badRequest: bytes | None = None
        self._dispatching = False
        self._buffered = 0
        self._readPaused = False
        self._waitingForTransport = False
        self._networkProducer: Any = None
        self._requestProducer: Any = None
        self._requestProducerStreaming: bool | None = None
        self._timer: Any = None
        self._abortingCall: Any = None
        self._lastActivity = 0.0
        self._peer: Any = None
        self._host: Any = None
        self._secure = False
        #: The transport is Twisted's buffering TLS protocol (see ``writeData``).
        self._directTLS = False
        self._tlsWriteNow: Callable[[bytes], None] | None = None
        self._accessLog: Callable[[Any], None] | None = None

    # -- connection set-up ------------------------------------------------------------

    def connectionMade(self) -> None:
        transport = self.transport
        assert transport is not None
        if interfaces.ITCPTransport.providedBy(transport):
            transport.setTcpNoDelay(True)
        self._peer = transport.getPeer()
        self._host = transport.getHost()
        self._secure = interfaces.ISSLTransport(transport, None) is not None
        self._directTLS = isinstance(transport, BufferingTLSTransport)
        # The listener's TLS protocol (apiserver.tls.lean) writes around its small-write
        # buffer itself, with fewer lookups on the protocol (a ProtocolWrapper, whose every
        # attribute read is slower); looked up once per connection.
        self._tlsWriteNow = getattr(transport, "writeNow", None) if self._directTLS else None
        factory = self.factory
        if factory is not None and getattr(factory, "log_requests", True):
            self._accessLog = factory.log
        self._networkProducer = interfaces.IPushProducer(transport, _NoPushProducer())
        self._networkProducer.registerProducer(self, True)
        self._lastActivity = self.seconds()
        self._armTimer()

    def _switchToH2(self) -> None:
        """Hand the connection to twisted.web's (or our configured) HTTP/2 connection, as
        ``_GenericHTTPChannelProtocol.dataReceived`` does."""
        transport = self.transport
        self._cancelTimer()
        self._networkProducer.unregisterProducer()
        h2: Any = http.H2Connection()
        factory = self.h2RequestFactory
        if not getattr(h2, "servesLeanRequests", False):
            # Twisted's own connection (``configure_http2`` not called): it builds its
            # H2Stream around a twisted.web request class.
            factory = getattr(factory, "twistedRequestFactory", None) or factory
        h2.requestFactory = factory
        h2.site = self.site
        h2.factory = self.factory
        h2.timeOut = self.timeOut
        h2.callLater = self.callLater
        h2.bodyTimeout = self.bodyTimeout
        h2.makeConnection(transport)
        self._networkProducer.registerProducer(h2, True)
        self._h2 = h2
        self._stopped = True
        # The TLS transport calls these on its wrapped protocol (this object) from now on.
        self.dataReceived = h2.dataReceived  # type: ignore[method-assign]
        self.connectionLost = h2.connectionLost  # type: ignore[method-assign]

    # -- reading ----------------------------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        if not self._alpnChecked:
            self._alpnChecked = True
            if getattr(self.transport, "negotiatedProtocol", None) == b"h2":
                self._switchToH2()
                self._h2.dataReceived(data)
                return
        if self._stopped:
            # After a request that closes the connection, or a bad one: ignored, as
            # twisted.web does.
            return
        self._lastActivity = self.seconds()
        if self._active is not None:
            self._buffered += len(data)
            if self._buffered > self.eagerReadSize and not self._readPaused:
                self._readPaused = True
                self._networkProducer.pauseProducing()
        continuing = self._inHeaders
        self._feeding = data
        self._feed(data)
        parsing = self._parsing
        if (
            parsing is not None
            and self._bodyDeadline
            and self._lastActivity > self._bodyDeadline
            and not self._stopped
        ):
            # A body trickled past the request deadline (WithTimeoutForNonLongRunningRequests).
            self._cutBody(parsing, bodylimit.timed_out())
        if self._inHeaders and not self._stopped:
            # A head is incomplete at the end of this read: all of the read is its bytes on
            # the wire (if it began in this read, after a pipelined message, a little more:
            # never less), counted as Go's server counts them, so that a head that never
            # ends, whatever its shape (long lines, whitespace llhttp drops), stops at the
            # limit.
            self._headBefore = (self._headBefore if continuing else 0) + len(data)
            self._tail = data[-3:]
            if self._headBefore > self.totalHeadersSize:
                self._parseFailed(HEADERS_TOO_LARGE)
        if self._active is None and self._queue:
            self._dispatchNext()

    def _feed(self, data: bytes) -> None:
        while True:
            try:
                self._parser.feed_data(data)
                return
            except httptools.HttpParserUpgrade as upgrade:
                # llhttp stops after a request with Upgrade (or CONNECT): we serve it as a
                # plain request, so the rest is HTTP again, for a new parser.
                offset = int(upgrade.args[0])
                self._parser = httptools.HttpRequestParser(self)
                head, self._upgradeHead = self._upgradeHead, None
                if head is not None:
                    # Its body (which llhttp left unread) comes first: read it through a
                    # synthetic head with the same framing.
                    self._bodyOnly = True
                    data = head + data[offset:]
                else:
                    data = data[offset:]
                if not data or self._stopped:
                    return
            except httptools.HttpParserError as error:
                if not self._stopped:
                    cause = error.__context__
                    self._parseFailed(
                        cause.answer if isinstance(cause, _Unreadable) else BAD_REQUEST
                    )
                return

    # llhttp callbacks (httptools calls them during feed_data).

    def on_message_begin(self) -> None:
        if self._bodyOnly:
            return
        self._inHeaders = True
        self._url = b""
        self._raw = {}
        self._headBefore = 0

    def on_url(self, url: bytes) -> None:
        if self._bodyOnly:
            return
        self._url += url
        if len(self._url) > self.totalHeadersSize:
            raise _Unreadable(HEADERS_TOO_LARGE)

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._inHeaders:
            # Chunked trailers: ignored, as twisted.web does.
            return
        canonical = names.get(name) or canonical_name(name)
        if value and (value[-1] in b" \t"):
            value = value.rstrip(b" \t")
        values = self._raw.get(canonical)
        if values is None:
            self._raw[canonical] = [value]
        else:
            values.append(value)

    def on_headers_complete(self) -> None:
        if self._bodyOnly:
            return
        self._inHeaders = False
        if self._headBefore or len(self._feeding) > self.totalHeadersSize:
            self._headComplete()
        parser = self._parser
        # Asked once: httptools formats the text anew on every call.
        versionText = parser.get_http_version()
        if versionText == "0.9":
            # A request line without a version: Go's parseRequestLine refuses it
            # ("malformed HTTP request", answered 400), where llhttp reads HTTP/0.9.
            raise _Unreadable(BAD_REQUEST)
        version = _VERSIONS.get(versionText) or (b"HTTP/" + versionText.encode())
        raw = self._raw
        method = parser.get_method()
        hostError = _host_error(version, method, raw.get(_HOST))
        if hostError is not None:
            raise _Unreadable(hostError)
        codings = raw.get(_TRANSFER_ENCODING)
        if codings is not None and version != b"HTTP/1.0":
            # Go (net/http transfer.go) takes exactly one Transfer-Encoding, "chunked".
            if len(codings) != 1 or codings[0].lower() != b"chunked":
                raise _Unreadable(UNSUPPORTED_TRANSFER_ENCODING)
        connection = raw.get(_CONNECTION)
        keepAlive = version == b"HTTP/1.1" and not _has_token(connection, b"close")
        length = raw.get(_CONTENT_LENGTH)
        chunked = _TRANSFER_ENCODING in raw
        size = int(length[0]) if length else 0
        content: IO[bytes] = tempfile.TemporaryFile() if size > BODY_IN_MEMORY else BytesIO()
        self._big = size > BODY_IN_MEMORY
        request = self.requestFactory(
            self, method, self._url, version, RequestHeaders(raw), content, keepAlive
        )
        if version == b"HTTP/1.1" and connection and not keepAlive:
            request.responseHeaders.setRawHeaders(_CONNECTION, [b"close"])
        self._parsing = request
        hasBody = chunked or size > 0
        if size > self.maxBodySize:
            # Declared too long: answered without reading it (bodylimit).
            self._cutBody(request, bodylimit.too_large())
            raise _Stop()
        if hasBody and self.bodyTimeout:
            self._bodyDeadline = self._lastActivity + self.bodyTimeout
        if hasBody and parser.should_upgrade():
            # llhttp will not read this body (see _feed).
            self._upgradeHead = (
                b"PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                if chunked
                else b"PUT / HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % size
            )
        if hasBody and version == b"HTTP/1.1":
            expect = raw.get(_EXPECT)
            if expect and expect[0].lower() == b"100-continue":
                if self._active is None and not self._queue:
                    self._write(CONTINUE)
                else:
                    # Answered once the requests before it are (head-of-line).
                    request._expectContinue = True

    def _headComplete(self) -> None:
        """A head that began in an earlier read ended in this one: its size on the wire is
        what came before plus this read up to the blank line (net/http reads the request
        line and header block through a reader limited to ``MaxHeaderBytes`` + 4096). A
        read longer than the limit (not from TLS, whose reads are at most 32 KiB) is taken as
        starting with the head."""
        data = self._feeding
        tail = self._tail if self._headBefore else b""
        end = (tail + data).find(b"\r\n\r\n")
        size = self._headBefore + (end + 4 - len(tail) if end >= 0 else len(data))
        self._headBefore = 0
        if size > self.totalHeadersSize:
            raise _Unreadable(HEADERS_TOO_LARGE)

    def on_body(self, body: bytes) -> None:
        request = self._parsing
        if request is None or request.content is None:
            return
        content = request.content
        content.write(body)
        if self._big and content.tell() > self.maxBodySize:
            # A chunked (or Upgrade) body that passed the limit: not kept (bodylimit).
            self._cutBody(request, bodylimit.too_large())
            raise _Stop()
        if not self._big and content.tell() > BODY_IN_MEMORY:
            # A chunked body that outgrew memory: on to a file, as twisted.web keeps
            # bodies of unknown length.
            self._big = True
            spill = tempfile.TemporaryFile()
            spill.write(content.getvalue())  # type: ignore[attr-defined]
            request.content = spill

    def on_message_complete(self) -> None:
        if self._upgradeHead is not None:
            # An Upgrade request whose body llhttp skipped: complete once the body is read.
            return
        self._bodyOnly = False
        request = self._parsing
        if request is None:
            return
        self._parsing = None
        self._bodyDeadline = 0.0
        request._expectContinue = False
        if request.content is not None:
            request.content.seek(0)
        self._queue.append(request)
        if not request.keepAlive:
            # Whatever the client sends after a request that closes the connection is
            # ignored (twisted.web, and Go's server, do the same).
            self._stopped = True
            raise _Stop()

    def _cutBody(self, request: H1Request, standIn: bodylimit.UnreadBody) -> None:
        """Stop keeping ``request``'s body: it is handed on with ``standIn`` as its content
        (reading it raises the 413 or 504), the rest of the connection's bytes are discarded
        and it closes after the answer, as Go's server closes a connection whose request body
        a handler left unread."""
        content = request.content
        if content is not None:
            content.close()
        request.content = standIn  # type: ignore[assignment]
        request.keepAlive = False
        request.responseHeaders.setRawHeaders(_CONNECTION, [b"close"])
        request._expectContinue = False
        self._parsing = None
        self._bodyDeadline = 0.0
        self._upgradeHead = None
        self._stopped = True
        self._queue.append(request)

    def _parseFailed(self, answer: bytes) -> None:
        """A request that cannot be read: ``answer`` (Go's) once those before it are."""
        self._stopped = True
        self._badRequest = answer
        self._parsing = None
        if self._active is None and not self._queue:
            self._answerBadRequest()

    def _answerBadRequest(self) -> None:
        answer, self._badRequest = self._badRequest, None
        self._write(answer or BAD_REQUEST)
        self.loseConnection()

    # -- handing requests to the application --------------------------------------------

    def _dispatchNext(self) -> None:
        """Hand queued requests to the application, one at a time."""
        if self._dispatching:
            return
        self._dispatching = True
        try:
            queue = self._queue
            while self._active is None and queue:
                request = queue.popleft()
                self._active = request
                try:
                    request.process()
                except Exception:
                    log.failure("unhandled error serving {request!r}", request=request)
                    if request is self._active and self.transport is not None:
                        self.transport.loseConnection()
                        return
        finally:
            self._dispatching = False
        if self._active is None:
            self._drained()

    def _drained(self) -> None:
        """Nothing left to answer: resume reading, answer a pending bad request, send a
        deferred ``100 Continue``, restart the idle timeout."""
        if self._closing:
            return
        self._buffered = 0
        if self._readPaused and not self._waitingForTransport:
            self._readPaused = False
            self._networkProducer.resumeProducing()
        if self._badRequest is not None:
            self._answerBadRequest()
            return
        parsing = self._parsing
        if parsing is not None and parsing._expectContinue:
            parsing._expectContinue = False
            self._write(CONTINUE)
        self._lastActivity = self.seconds()
        self._armTimer()

    def requestDone(self, request: H1Request) -> None:
        """Called by a request once its response is finished."""
        if request is not self._active:
            raise TypeError(f"{request!r} is not the request being answered")
        self._active = None
        if not self.persistent or not request.keepAlive:
            self._queue.clear()
            self.loseConnection()
            return
        if not self._dispatching:
            if self._queue:
                self._dispatchNext()
            else:
                self._drained()

    # -- writing (the request's consumer interface) ---------------------------------------

    def _write(self, data: bytes) -> None:
        transport = self.transport
        if transport is not None:
            transport.write(data)

    def writeStreamData(self, data: bytes) -> None:
        """A later piece of a streamed (chunked) body: a coalesced batch of watch events.

        Pieces of DIRECT_TLS_WRITE bytes or more are encrypted at once, after anything still
        waiting in Twisted's small-write buffer, instead of through that buffer, which
        schedules a reactor call per connection only to write this one piece a turn later
        (with a thousand watch connections, a thousand calls per batch). Smaller pieces
        keep going through the buffer, which joins those of one reactor turn (``writeData``
        sends a response's head directly).
        """
        transport = self.transport
        if transport is None:
            return
        if len(data) >= DIRECT_TLS_WRITE and isinstance(transport, BufferingTLSTransport):
            transport._aggregator.flush()
            TLSMemoryBIOProtocol.write(transport, data)
            return
        transport.write(data)

    def writeData(self, data: bytes) -> None:
        """A response's head with its first piece (a whole answer, usually), a later piece
        of a body with a Content-Length, or the last chunk: straight to TLS, after anything
        still waiting in Twisted's small-write buffer.

        The buffer would schedule a reactor call (``callLater(0)``) to encrypt and send these
        bytes a turn later; for a request/response exchange there is nothing to join them
        with, so the call and its timer-heap work only add to every request (measured with
        callgrind, bench/README.md "The GET path"). A pipelined request's answer is therefore
        a TLS record of its own.
        """
        writeNow = self._tlsWriteNow
        if writeNow is not None:
            writeNow(data)
            return
        transport: Any = self.transport
        if transport is None:
            return
        if self._directTLS:
            transport._aggregator.flush()
            TLSMemoryBIOProtocol.write(transport, data)
            return
        transport.write(data)

    def write(self, data: bytes) -> None:
        self._write(data)

    def writeSequence(self, iovec: list[bytes]) -> None:
        self._write(b"".join(iovec))

    def getPeer(self) -> Any:
        return self._peer

    def getHost(self) -> Any:
        return self._host

    def isSecure(self) -> bool:
        return self._secure

    def loseConnection(self) -> None:
        """Close once everything written is sent (twisted.web's ``HTTPChannel``)."""
        self._stopped = True
        self._closing = True
        self._cancelTimer()
        if self._networkProducer is not None:
            self._networkProducer.unregisterProducer()
        if self.transport is not None:
            self.transport.loseConnection()

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        if self._requestProducer is not None:
            raise RuntimeError(
                f"Cannot register producer {producer}, because producer "
                f"{self._requestProducer} was never unregistered."
            )
        if not streaming:
            producer = _PullToPush(producer, self)
        self._requestProducer = producer
        self._requestProducerStreaming = streaming
        if not streaming:
            producer.startStreaming()
        elif self._waitingForTransport:
            # The transport is full already: the new producer waits like the others.
            producer.pauseProducing()

    def unregisterProducer(self) -> None:
        producer = self._requestProducer
        if producer is None:
            return
        if not self._requestProducerStreaming:
            producer.stopStreaming()
        self._requestProducer = None
        self._requestProducerStreaming = None

    # -- the transport's producer interface ------------------------------------------------

    def pauseProducing(self) -> None:
        """The transport's buffer is full: pause the response producer, and stop reading
        unless a request is being answered (twisted.web's ``HTTPChannel``)."""
        self._waitingForTransport = True
        if self._requestProducer is not None:
            self._requestProducer.pauseProducing()
        if self._active is None and not self._readPaused:
            self._readPaused = True
            self._networkProducer.pauseProducing()

    def resumeProducing(self) -> None:
        self._waitingForTransport = False
        if self._requestProducer is not None:
            self._requestProducer.resumeProducing()
        if self._active is None and self._readPaused:
            self._readPaused = False
            self._networkProducer.resumeProducing()

    def stopProducing(self) -> None:
        if self._requestProducer is not None:
            self._requestProducer.stopProducing()

    # -- timeouts -------------------------------------------------------------------------

    def _armTimer(self) -> None:
        # No clock from the factory (a channel built by hand), no idle timer: only tap.py
        # touches the global reactor.
        callLater = self.callLater
        if self.timeOut and callLater is not None and self._timer is None and not self._stopped:
            self._timer = callLater(self.timeOut, self._timerFired)

    def _cancelTimer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def _timerFired(self) -> None:
        self._timer = None
        if self._active is not None or self._stopped or not self.timeOut:
            # Suspended while a response is being produced; re-armed when it is done.
            return
        idle = self.seconds() - self._lastActivity
        if idle >= self.timeOut:
            self.timeoutConnection()
            return
        assert self.callLater is not None
        self._timer = self.callLater(self.timeOut - idle, self._timerFired)

    def timeoutConnection(self) -> None:
        """Idle for ``timeOut`` seconds: close, and abort if still open ``abortTimeout``
        seconds later (twisted.web's ``HTTPChannel.timeoutConnection``)."""
        transport = self.transport
        assert transport is not None
        log.info("Timing out client: {peer}", peer=str(self._peer))
        if self.abortTimeout is not None and self.callLater is not None:
            self._abortingCall = self.callLater(self.abortTimeout, self.forceAbortClient)
        self.loseConnection()

    def forceAbortClient(self) -> None:
        log.info("Forcibly timing out client: {peer}", peer=str(self._peer))
        self._abortingCall = None
        transport: Any = self.transport
        if transport is not None:
            transport.abortConnection()

    # -- the end ---------------------------------------------------------------------------

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self._stopped = True
        self._cancelTimer()
        if self._abortingCall is not None:
            if self._abortingCall.active():
                self._abortingCall.cancel()
            self._abortingCall = None
        self._queue.clear()
        self._parsing = None
        active, self._active = self._active, None
        if active is not None:
            active.connectionLost(reason)
