"""The request object of our HTTP/1.x server (:mod:`apiserver.http.h1`).

Why not twisted.web's ``Request``: its constructor asks the channel for both addresses and
builds two ``Headers``, and its ``write`` sends the status line and headers, then the body,
then the chunk trailer as separate transport writes (separate TLS records). This class has
the same names and semantics for everything the project uses (``grep -rn 'request\\.'
src/apiserver``: ``method``, ``uri``, ``path``, ``args``, ``clientproto``, ``content``,
``requestHeaders``/``responseHeaders`` (twisted ``Headers``), ``code``, ``finished``,
``startedWriting``, ``_disconnected``, ``channel``, ``transport``, ``notifyFinish``,
``write``, ``finish``, producers, ``getClientAddress``, ``getHost``, ``isSecure``), so
``App.handle`` serves it unchanged, and it sends the head together with the first body
chunk.

Response bytes are exactly twisted.web's: the status line with the request's version, the
headers in the order they were set and in twisted's canonical case, ``Transfer-Encoding:
chunked`` added (last) for an HTTP/1.1 response without ``Content-Length`` unless it is to
a HEAD or a 204/304, chunks as ``<hex length>CRLF<data>CRLF`` and ``0CRLFCRLF`` at the end.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.http import Request as _TwistedRequest
from twisted.web.http import parse_qs
from twisted.web.http_headers import Headers, _nameEncoder, _sanitizeLinearWhitespace

from apiserver.http.statustext import reason_phrase

if TYPE_CHECKING:
    from apiserver.http.h1 import H1Channel

log = Logger()

#: Response codes that never have a body (twisted.web's ``NO_BODY_CODES``).
NO_BODY_CODES = frozenset((204, 304))
_CONTENT_LENGTH = b"Content-Length"
_TRANSFER_ENCODING = b"Transfer-Encoding"
#: CR and LF as the integers a ``bytes`` holds: ``13 in value`` is one ``memchr``, while
#: ``b"\r" in value`` first tries the operand as an integer, and CPython (3.11) builds and
#: discards a TypeError for that on every test (about 1,700 instructions, measured with
#: callgrind; the response headers of one GET made fourteen such tests).
_CR = 13
_LF = 10

#: Canonical (twisted ``Headers``) spelling of received header names, so that each name is
#: canonicalised once; bounded, as clients choose the names.
names: dict[str | bytes, bytes] = {}
NAMES_MAX = 1024


def canonical_name(name: str | bytes) -> bytes:
    """twisted's canonical spelling (``InvalidHeaderName`` for a name that is no token)."""
    canonical = _nameEncoder.encode(name)
    if len(names) < NAMES_MAX:
        names[name] = canonical
    return canonical


class _CanonicalLookups(Headers):
    """twisted.web ``Headers`` whose lookups find the canonical name in one dict.

    The filters look headers up on every request (authentication's clean-up, the gate's and
    negotiation's reads, the answer's ``Cache-Control`` and ``Content-Length`` tests);
    twisted's ``_NameEncoder`` costs a method call each. Same results.
    """

    __slots__ = ()

    def hasHeader(self, name: str | bytes) -> bool:
        return (names.get(name) or canonical_name(name)) in self._rawHeaders

    def removeHeader(self, name: str | bytes) -> None:
        self._rawHeaders.pop(names.get(name) or canonical_name(name), None)

    def getRawHeaders(self, name: Any, default: Any = None) -> Any:
        values = self._rawHeaders.get(names.get(name) or canonical_name(name))
        if not values:
            return default
        if isinstance(name, str):
            return [v.decode("utf8") for v in values]
        return values


class RequestHeaders(_CanonicalLookups):
    """twisted.web ``Headers`` filled from an already canonical ``{name: [values]}`` dict.

    The parser has validated names and values (RFC 9110 tokens, no CR/LF/NUL), which is
    what ``Headers.addRawHeader`` checks one call at a time.
    """

    __slots__ = ()

    def __init__(self, raw: dict[bytes, list[bytes]]) -> None:
        self._rawHeaders = raw

    def copy(self) -> Headers:
        return Headers(self._rawHeaders)


class ResponseHeaders(_CanonicalLookups):
    """twisted.web ``Headers`` whose setters skip work the common case does not need.

    The same results as ``Headers.setRawHeaders``/``addRawHeader`` (canonical names,
    ``str`` values UTF-8 encoded, line breaks in values replaced by a space), with the
    canonical names looked up in one dict and values copied only when they contain a line
    break: the application sets about six response headers per request.
    """

    __slots__ = ()

    def setRawHeaders(self, name: str | bytes, values: Any) -> None:
        canonical = names.get(name) or canonical_name(name)
        encoded: list[bytes] = []
        for value in values:
            if not isinstance(value, bytes):
                value = value.encode("utf8")
            if _CR in value or _LF in value:
                value = _sanitizeLinearWhitespace(value)
            encoded.append(value)
        self._rawHeaders[canonical] = encoded

    def addRawHeader(self, name: str | bytes, value: str | bytes) -> None:
        canonical = names.get(name) or canonical_name(name)
        if not isinstance(value, bytes):
            value = value.encode("utf8")
        if _CR in value or _LF in value:
            value = _sanitizeLinearWhitespace(value)
        values = self._rawHeaders.get(canonical)
        if values is None:
            self._rawHeaders[canonical] = [value]
        else:
            values.append(value)


class H1Request:
    """One HTTP/1.x request and its response: the part of twisted.web's ``Request`` that
    the project uses (``grep -rn 'request\\.' src/apiserver``), with the same names and
    semantics, so that ``App.handle`` serves it unchanged.

    Subclasses override :meth:`process`, as with twisted.web.
    """

    code: int = 200
    code_message: bytes = b"OK"
    finished = 0
    startedWriting = 0
    chunked = 0
    sentLength = 0
    producer: Any = None
    streamingProducer = False
    queued = 0
    _disconnected = False
    _noBody = False
    #: An ``Expect: 100-continue`` not answered yet (the request waits behind another).
    _expectContinue = False
    #: What :meth:`whenFinished` registered, until it runs.
    _finishHooks: list[Callable[[object], None]] | None = None

    def __init__(
        self,
        channel: H1Channel,
        method: bytes,
        uri: bytes,
        clientproto: bytes,
        headers: Headers,
        content: IO[bytes],
        keepAlive: bool,
    ) -> None:
        self.channel: H1Channel | None = channel
        self.transport = channel.transport
        self.client = channel._peer
        self.host = channel._host
        self.method = method
        self.uri = uri
        self.path = uri.partition(b"?")[0]
        self.clientproto = clientproto
        self.requestHeaders = headers
        self.responseHeaders: Headers = ResponseHeaders()
        self.content: IO[bytes] | None = content
        self.keepAlive = keepAlive
        self.notifications: list[Deferred[None]] = []

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} at 0x{id(self):x} method={self.method.decode('latin-1')}"
            f" uri={self.uri.decode('latin-1')} clientproto={self.clientproto.decode()}>"
        )

    # -- what the application reads ---------------------------------------------------

    @property
    def args(self) -> dict[bytes, list[bytes]]:
        """The query, as twisted.web's ``request.args`` (parsed on first use)."""
        args = self.__dict__.get("_args")
        if args is None:
            _, sep, query = self.uri.partition(b"?")
            args = parse_qs(query, 1) if sep else {}
            self.__dict__["_args"] = args
        return args

    @args.setter
    def args(self, value: dict[bytes, list[bytes]]) -> None:
        self.__dict__["_args"] = value

    def getHeader(self, key: Any) -> Any:
        """The last value of a request header, or None."""
        values = self.requestHeaders.getRawHeaders(key)
        if values is not None:
            return values[-1]
        return None

    def getAllHeaders(self) -> dict[bytes, bytes]:
        return {k.lower(): v[-1] for k, v in self.requestHeaders.getAllRawHeaders()}

    def getClientAddress(self) -> Any:
        return self.client

    def getHost(self) -> Any:
        return self.host

    def getRequestHostname(self) -> bytes:
        """The host the client asked for (twisted.web's rules)."""
        return _TwistedRequest.getRequestHostname(self)  # type: ignore[arg-type]

    def isSecure(self) -> bool:
        channel = self.channel
        return channel is not None and channel._secure

    def process(self) -> None:
        """Serve the request (subclasses); called once its body has arrived."""

    # -- the response -----------------------------------------------------------------

    def setResponseCode(self, code: int, message: bytes | None = None) -> None:
        self.code = code
        # Go's reason phrases (kube-apiserver's), not twisted.web's: see http/statustext.py.
        self.code_message = message if message is not None else reason_phrase(code)

    def setHeader(self, name: Any, value: Any) -> None:
        self.responseHeaders.setRawHeaders(name, [value])

    def whenFinished(self, hook: Callable[[object], None]) -> None:
        """``notifyFinish().addBoth(hook)`` without a Deferred: ``hook`` runs with None once
        the response is finished, or with the Failure if the connection is lost first, just
        before the Deferreds of :meth:`notifyFinish` fire. An exception it raises is logged.

        The chain (``App.handle``) waits for the end of every request for its in-flight and
        latency bookkeeping; a Deferred, its callback list and its run cost that on every
        request.
        """
        hooks = self._finishHooks
        if hooks is None:
            self._finishHooks = [hook]
        else:
            hooks.append(hook)

    def _runFinishHooks(self, result: object) -> None:
        hooks, self._finishHooks = self._finishHooks, None
        if hooks is None:
            return
        for hook in hooks:
            try:
                hook(result)
            except Exception:
                log.failure("request finish hook {hook!r} failed", hook=hook)

    def notifyFinish(self) -> Deferred[None]:
        """Fires with None once the response is finished, or fails if the connection is
        lost first (twisted.web's contract)."""
        d: Deferred[None] = Deferred()
        self.notifications.append(d)
        return d

    def _head(self) -> bytes:
        """The status line and headers; decides chunking as twisted.web's ``write`` does."""
        headers = self.responseHeaders
        version = self.clientproto
        code = self.code
        if code in NO_BODY_CODES or self.method == b"HEAD":
            self._noBody = True
        elif version == b"HTTP/1.1" and not headers.hasHeader(_CONTENT_LENGTH):
            headers.setRawHeaders(_TRANSFER_ENCODING, [b"chunked"])
            self.chunked = 1
        # Lines joined by CRLF, each one concatenation: measured, about half the work of
        # formatting each line with ``%``.
        lines = [b"%s %d %s" % (version, code, self.code_message)]
        append = lines.append
        for name, values in headers.getAllRawHeaders():
            for value in values:
                append(name + b": " + value)
        append(b"\r\n")
        return b"\r\n".join(lines)

    def write(self, data: bytes) -> None:
        """Send ``data`` as (part of) the body; the first call sends the head with it."""
        if self.finished:
            raise RuntimeError("Request.write called on a request after Request.finish was called.")
        if self._disconnected:
            # As twisted.web: dropped; finish() raises.
            return
        channel = self.channel
        assert channel is not None
        if not self.startedWriting:
            self.startedWriting = 1
            head = self._head()
            if self._noBody or not data:
                channel.writeData(head)
                return
            self.sentLength = len(data)
            if self.chunked:
                channel.writeData(b"%s%x\r\n%s\r\n" % (head, len(data), data))
            else:
                channel.writeData(head + data)
            return
        if self._noBody or not data:
            return
        self.sentLength += len(data)
        if self.chunked:
            channel.writeStreamData(b"%x\r\n%s\r\n" % (len(data), data))
        else:
            channel.writeData(data)

    def finish(self) -> None:
        """The response is complete (twisted.web's checks and warnings)."""
        if self._disconnected:
            raise RuntimeError(
                "Request.finish called on a request after its connection was lost; "
                "use Request.notifyFinish to keep track of this."
            )
        if self.finished:
            warnings.warn("Warning! request.finish called twice.", stacklevel=2)
            return
        if not self.startedWriting:
            self.write(b"")
        logger = self._endBody()
        if logger is not None:
            logger(self)
        self.finished = 1
        if self.producer is not None:
            log.failure(
                "", Failure(RuntimeError(f"Producer was not unregistered for {self.uri!r}"))
            )
            self.unregisterProducer()
        self._release()
        if self._finishHooks is not None:
            self._runFinishHooks(None)
        notifications, self.notifications = self.notifications, []
        for d in notifications:
            d.callback(None)

    def _endBody(self) -> Callable[[Any], None] | None:
        """Send what ends the body (the last chunk); return the access log, if any."""
        channel = self.channel
        assert channel is not None
        if self.chunked:
            channel.writeData(b"0\r\n\r\n")
        return channel._accessLog

    def _release(self) -> None:
        """The response is sent: let the channel go on to the next request."""
        channel = self.channel
        assert channel is not None
        self.channel = None
        self.content = None
        channel.requestDone(self)

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        if self.producer is not None:
            raise ValueError(
                f"registering producer {producer} before previous one ({self.producer}) was "
                "unregistered"
            )
        channel = self.channel
        if channel is None:
            raise RuntimeError("registerProducer on a finished or disconnected request")
        self.streamingProducer = streaming
        self.producer = producer
        channel.registerProducer(producer, streaming)

    def unregisterProducer(self) -> None:
        channel = self.channel
        if channel is not None:
            channel.unregisterProducer()
        self.producer = None

    def loseConnection(self) -> None:
        if self.channel is not None:
            self.channel.loseConnection()

    def connectionLost(self, reason: Failure) -> None:
        """The connection went away before the response was finished."""
        self._disconnected = True
        self.channel = None
        content, self.content = self.content, None
        if content is not None:
            content.close()
        if self._finishHooks is not None:
            self._runFinishHooks(reason)
        notifications, self.notifications = self.notifications, []
        for d in notifications:
            d.errback(reason)
