"""Our HTTP/2 server connection: twisted.web's, with the advertised stream limit and a fast
path for sending and for header blocks.

``--http2-max-streams-per-connection`` is the MAX_CONCURRENT_STREAMS we advertise;
kube-apiserver advertises 100 when the flag is 0 (k8s.io/apiserver
``pkg/server/options/serving.go``), which is also the h2 library's default. twisted.web offers
no setting for it: its protocol switcher builds ``twisted.web.http.H2Connection`` by name, so
:func:`configure_http2` installs a subclass there.
One server runs per process, so a process-wide setting is what the flag means here.

The subclass also replaces the parts of Twisted's ``twisted.web._http2.H2Connection`` that
hold HTTP/2 to about a third of HTTP/1.1's request rate. Twisted sends one DATA frame per
reactor turn (a ``callLater(0)`` per frame, spinning while a window is exhausted), sums a
stream's whole send queue on every write to know its remaining window, sends END_STREAM as
an empty frame of its own, and asks the priority tree for the next stream on every frame,
which walks every blocked stream of the connection (100 idle watches: 100 heap operations a
frame). Here instead:

- each stream keeps a running count of the bytes it has queued, so the window left to a
  producer is one subtraction;
- one *send pass* sends everything flow control allows (up to :data:`MAX_BATCH` bytes, then
  it continues on the next reactor turn), with small queued chunks joined into frames of up
  to the peer's frame size, END_STREAM riding on the last DATA frame, and the frames of all
  streams (and HEADERS, WINDOW_UPDATEs, PING acks) leaving in one ``transport.write``;
- the pass runs once at the end of ``dataReceived`` (so a response rendered synchronously
  leaves as HEADERS+DATA+END_STREAM in the same write as the other answers of that read)
  and otherwise once per reactor turn in which something was queued;
- the priority tree (weights, dependencies, exclusivity as the client signals them, RFC 7540
  §5.3) decides the order only when streams compete for a scarce resource, the connection
  window or the per-pass budget, and only once the client has sent priority information;
  until then contention for the connection window is served round-robin, one frame a
  stream, which is what the tree does for equal siblings, and a budget too small for all
  the ready streams is shared equally among them. Without contention every ready stream is
  sent in full; a stream's frames are built in one loop, each a header and a view of the
  body (:meth:`FastH2Connection._sendFrames`), the body copied once, into the pass's write;
- a stream whose window is exhausted leaves the schedule until a WINDOW_UPDATE (or a
  SETTINGS change of the initial window) opens it again, instead of being polled.

Header blocks: h2 validates every received block through a chain of seven generators and
normalises every sent one through five more. Request blocks of the everyday shape are
checked here in one pass against the same rules (:func:`_plainRequestHeaders`); any other
block goes through h2's own validator, and a malformed one ends the connection with
PROTOCOL_ERROR as before. Response blocks are normalised in one pass to what h2 would send
(:func:`_responseHeaderBlock`). HPACK literals are not Huffman-coded (:class:`_LiteralEncoder`)
and ``Audit-Id``, new on every response, stays out of the dynamic table.

Receiving: the frames a client sends all the time (a request's HEADERS, WINDOW_UPDATE) are
parsed here (:meth:`FastH2Connection._receiveFast`) with h2's state moved exactly as h2
would move it; every other frame, and any this path is not sure of, goes through h2. A
request of the everyday shape gets a lean request object that is also its stream
(:class:`apiserver.http.h2request.H2Request`, for ``ApiSite``) instead of Twisted's
``H2Stream`` and a twisted.web ``Request``, and its response header block is encoded
straight from its ``Headers`` (:meth:`_LiteralEncoder.encodeResponse`). Measured with
``bench/h2_bench.py`` (in-process, the App of ``h1_bench.py``, four requests a read): a GET
went from about 80 to 40 us of CPU, a 656 kB answer (a LIST of 500 events) from about 400
to 110 us (the send path above); a pass of 64 KiB or more goes to TLS at once, as a view
(:meth:`FastH2Connection._writeOut`).

The fast path uses private members of h2, hpack, hyperframe and Twisted (setup.cfg bounds
their versions): :func:`configure_http2` installs it only after
:func:`apiserver.http.h2internals.h2_internals_problems` found each of them as expected, and
otherwise serves with Twisted's own connection (:class:`StockH2Connection`), logged once.

Everything else is Twisted's: producers are paused when a stream's window minus its queued
bytes reaches zero and resumed on WINDOW_UPDATE (streaming watches), RST_STREAM and its
Rapid-Reset limit, GOAWAY, timeouts, the cap on buffered control frames while the transport
has paused us, and connection loss. The Go server kube-apiserver runs on
(golang.org/x/net/http2 ``server.go``) likewise writes the frames flow control allows and
flushes them together.
"""

from __future__ import annotations

import binascii
import contextlib
import struct
from collections import deque
from typing import Any

import h2.events
import h2.exceptions
import h2.utilities
import hpack
import hyperframe.frame
import priority
from h2.connection import AllowedStreamIDs, ConnectionState, _decode_headers
from h2.errors import ErrorCodes
from h2.settings import SettingCodes, Settings
from h2.stream import StreamClosedBy, StreamInputs, StreamState
from hyperframe.frame import HeadersFrame, RstStreamFrame
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionLost
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOProtocol
from twisted.python.failure import Failure
from twisted.web import _http2, http

from apiserver.http.h2internals import h2_internals_problems
from apiserver.http.h2request import H2Request

_log = Logger()

DEFAULT_MAX_STREAMS = 100
#: SETTINGS_MAX_HEADER_LIST_SIZE, as Go's HTTP/2 server derives it from kube-apiserver's
#: MaxHeaderBytes (1 MiB) plus 32 bytes for each of ten typical fields
#: (golang.org/x/net/http2 ``maxHeaderListSize``); h2's default is 64 KiB, so a long
#: bearer token or many impersonation headers that kube-apiserver takes were refused.
MAX_HEADER_LIST_SIZE = (1 << 20) + 10 * 32

#: Bytes of DATA one send pass may hand to the transport before it yields to the reactor
#: (the rest follows on the next turn), so that one huge response cannot hold the reactor.
MAX_BATCH = 1 << 20

#: Writes of at least this size go to TLS directly (see ``FastH2Connection._writeOut``).
_DIRECT_TLS_WRITE = 1 << 16

#: DATA bytes after which a pass takes h2's output buffer aside (see ``_drain``).
_DRAIN_AT = 1 << 16

_END = _http2._END_STREAM_SENTINEL

_REQUEST_FLAGS = h2.utilities.HeaderValidationFlags(
    is_client=False, is_trailer=False, is_response_header=False, is_push_promise=False
)
_TRAILER_FLAGS = _REQUEST_FLAGS._replace(is_trailer=True)
_RESPONSE_FLAGS = _REQUEST_FLAGS._replace(is_response_header=True)


class FastH2Connection(_http2.H2Connection):
    """``twisted.web._http2.H2Connection`` with a batched send path (see the module doc).

    ``maxConcurrentStreams`` is the SETTINGS_MAX_CONCURRENT_STREAMS we advertise.
    """

    maxConcurrentStreams: int = DEFAULT_MAX_STREAMS
    #: It builds :class:`H2Request` subclasses itself (``H1Channel`` hands Twisted's own
    #: connection a twisted.web request class instead).
    servesLeanRequests = True
    #: Whether frames of the everyday shape take :meth:`_receiveFast` (tests turn it off to
    #: compare with h2's own path).
    fastReceive = True
    #: Set by twisted.web's protocol switcher, like ``site`` and ``factory``.
    requestFactory: Any
    #: Seconds a request body may take to arrive (``--request-timeout``; ``H1Channel`` passes
    #: its own on); None: no bound (apiserver.http.bodylimit).
    bodyTimeout: float | None = None

    def __init__(self, reactor: Any = None) -> None:
        # Set before the base constructor, which schedules a first send pass.
        self._queuedBytes: dict[int, int] = {}
        self._ready: dict[int, None] = {}
        # The priority tree is filled only once the client sends priority information.
        self._treeInUse = False
        self._sendCall: Any = None
        self._inDataReceived = False
        self._sending = False
        self._sendAgain = False
        # Frames taken out of h2's buffer during a pass (see _drain), and the DATA bytes
        # generated since the last time.
        self._out: list[Any] = []
        self._undrained = 0
        # Cleanup Deferreds of streams a pass ended, fired once their frames are written.
        self._finished: list[tuple[Deferred[int], int]] = []
        self._host: Any = None
        self._peer: Any = None
        self._secure: bool | None = None
        #: The site's access log (``Site.log``), or None when requests are not logged.
        self._accessLog: Any = None
        super().__init__(reactor)
        conn = self.conn
        # Header blocks are checked here instead (same rules, one pass; see
        # _plainRequestHeaders and _responseHeaderBlock).
        conn.config.validate_inbound_headers = False
        conn.config.validate_outbound_headers = False
        conn.config.normalize_outbound_headers = False
        conn.encoder = _LiteralEncoder()
        decoder = _CachingDecoder()
        decoder.max_header_list_size = MAX_HEADER_LIST_SIZE
        decoder.max_allowed_table_size = conn.decoder.max_allowed_table_size
        conn.decoder = decoder
        conn.local_settings = Settings(
            client=False,
            initial_values={
                SettingCodes.MAX_CONCURRENT_STREAMS: self.maxConcurrentStreams,
                SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST_SIZE,
            },
        )
        self._dispatch = {
            h2.events.RequestReceived: self._requestReceived,
            h2.events.TrailersReceived: self._trailersReceived,
            h2.events.DataReceived: self._requestDataReceived,
            h2.events.StreamEnded: self._requestEnded,
            h2.events.StreamReset: self._requestAborted,
            h2.events.WindowUpdated: self._handleWindowUpdate,
            h2.events.PriorityUpdated: self._handlePriorityUpdate,
            h2.events.ConnectionTerminated: self._connectionTerminated,
            h2.events.RemoteSettingsChanged: self._remoteSettingsChanged,
            h2.events.SettingsAcknowledged: self._settingsAcknowledged,
        }
        #: Whether the client acknowledged our SETTINGS (Go's ``unackedSettings == 0``).
        self._settingsAcked = False
        # A HEADERS frame over MAX_CONCURRENT_STREAMS resets that stream only (see
        # _refuseStream); h2 would end the whole connection.
        table = conn._frame_dispatch_table
        receiveHeaders = table[HeadersFrame]

        def receiveHeadersOrRefuse(frame: Any) -> Any:
            try:
                return receiveHeaders(frame)
            except h2.exceptions.TooManyStreamsError:
                return self._refuseStream(frame)

        table[HeadersFrame] = receiveHeadersOrRefuse

    def connectionMade(self) -> None:
        """Twisted's, and the access log looked up once (twisted.web's ``Request.finish``
        calls ``factory.log`` for every request; ``ApiSite`` logs only at ``-v=3``)."""
        factory = self.factory
        if factory is not None and getattr(factory, "log_requests", True):
            self._accessLog = factory.log
        super().connectionMade()

    # -- receiving --------------------------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        """The frames of the everyday shape on our fast path (:meth:`_receiveFast`), the rest
        through h2 and Twisted's event handling, then one send pass for whatever they
        produced."""
        self._inDataReceived = True
        try:
            conn = self.conn
            buffer = conn.incoming_buffer
            if (
                self.fastReceive
                and not buffer._data
                and not buffer._preamble_len
                and not buffer._headers_buffer
                and conn.state_machine.state is ConnectionState.SERVER_OPEN
            ):
                rest = self._receiveFast(data)
                if rest is None:
                    # A protocol error ended the connection, as in h2's receive_data.
                    self._inDataReceived = False
                    return
                if len(rest) != len(data):
                    self.resetTimeout()
                data = rest
            if data and self._stillProducing:
                try:
                    events = conn.receive_data(data)
                except h2.exceptions.ProtocolError:
                    self._inDataReceived = False
                    self._terminate(Failure())
                    return
                self.resetTimeout()
                dispatch = self._dispatch
                for event in events:
                    handler = dispatch.get(type(event))
                    if handler is not None:
                        handler(event)
                        if not self._stillProducing:
                            # GOAWAY received or sent (Rapid Reset): the rest is moot.
                            break
        except BaseException:
            # What the handled events queued still goes out, on the next turn.
            self._inDataReceived = False
            self._scheduleSend()
            raise
        self._inDataReceived = False
        self._sendPrioritisedData()

    def _receiveFast(self, data: bytes) -> bytes | None:
        """Handle the frames at the front of ``data`` that a client sends all the time, and
        return the rest (from the first frame this does not take, or an incomplete one) for
        h2; None if a protocol error ended the connection.

        Why: h2's receive path builds a frame object, a dictionary of flags, a trace of the
        frame's text, a stream state machine transition with its event objects, and
        re-validates what the frame buffer already checked (measured: a third of the
        daemon's CPU time for a GET of one event over HTTP/2). Taken here, only when the
        connection is open, h2's frame buffer is empty (no partial frame, no header block
        waiting for CONTINUATION) and for frames whose every outcome is known:

        - HEADERS opening a new client stream (odd id above the highest so far), with
          END_HEADERS, without padding or priority, within the frame size limit, while
          fewer streams than the advertised MAX_CONCURRENT_STREAMS exist:
          :meth:`_fastHeaders`;
        - WINDOW_UPDATE of a valid increment for the connection, or for an open stream
          (open or half-closed by the client), that keeps the window within 2^31-1.

        h2's state moves exactly as its own receive path moves it (the stream is created
        by ``_begin_new_stream`` and put in the state its state machine would reach, the
        windows are credited as ``guard_increment_window`` does), so that anything h2 does
        later (sending, resets, later frames on its path) finds what it expects; any other
        frame, and any frame this is not sure of, goes to h2 with everything after it, in
        order. Frames are handled one by one as Go's server (golang.org/x/net/http2
        ``serverConn.processFrame``) does, instead of all of a read before any of its
        requests.
        """
        conn = self.conn
        streams = conn.streams
        size = len(data)
        offset = 0
        unpack = _FRAME_HEADER.unpack_from
        maxFrame = conn.max_inbound_frame_size
        maxStreams = -1
        while size - offset >= 9:
            high, low, kind, flags, sid = unpack(data, offset)
            length = (high << 8) | low
            end = offset + 9 + length
            if end > size or length > maxFrame:
                break
            sid &= 0x7FFFFFFF
            if kind == 0x1:
                # HEADERS: END_HEADERS set, PADDED and PRIORITY clear.
                if flags & 0x2C != 0x4 or not sid & 1 or sid <= conn.highest_inbound_stream_id:
                    break
                if maxStreams < 0:
                    maxStreams = conn.local_settings.max_concurrent_streams
                if len(streams) >= maxStreams or not length:
                    break
                if not self._fastHeaders(sid, data[offset + 9 : end], flags & 0x1):
                    return None
            elif kind == 0x8 and length == 4:
                increment = _WINDOW_INCREMENT.unpack_from(data, offset + 9)[0] & 0x7FFFFFFF
                if not increment:
                    break
                if sid:
                    stream = streams.get(sid)
                    if stream is None or stream.state_machine.state not in _DATA_STREAM_STATES:
                        break
                    window = stream.outbound_flow_control_window + increment
                    if window > _MAX_WINDOW:
                        break
                    stream.outbound_flow_control_window = window
                else:
                    window = conn.outbound_flow_control_window + increment
                    if window > _MAX_WINDOW:
                        break
                    conn.outbound_flow_control_window = window
                self._windowOpened(sid)
            else:
                break
            offset = end
            if not self._stillProducing:
                return b""
        return data[offset:] if offset else data

    def _fastHeaders(self, sid: int, block: bytes, endStream: int) -> bool:
        """A request's HEADERS (see :meth:`_receiveFast`): decoded with the connection's
        decoder, the stream opened in h2 in the state its state machine would reach
        (IDLE -> OPEN on the headers, -> HALF_CLOSED_REMOTE on END_STREAM), then the
        request started (and served, with END_STREAM) as the RequestReceived and
        StreamEnded events would start it. False if a protocol error ended the connection
        (as in h2: GOAWAY with the error's code)."""
        conn = self.conn
        try:
            headers: Any = _decode_headers(conn.decoder, block)
            # In h2's order: the stream exists (it counts as the last one processed in a
            # GOAWAY) before its content-length is found wrong.
            stream = conn._begin_new_stream(sid, AllowedStreamIDs.ODD)
            machine = stream.state_machine
            machine.state = StreamState.HALF_CLOSED_REMOTE if endStream else StreamState.OPEN
            machine.client = False
            machine.headers_received = True
            stream._expected_content_length = _contentLength(headers)
        except h2.exceptions.ProtocolError as error:
            conn._terminate_connection(error.error_code)
            self._terminate(Failure())
            return False
        for name, _ in headers:
            if name == b"cookie":
                # h2 joins split cookie fields into one, last (RFC 9113 §8.2.3).
                headers = list(h2.utilities.normalize_inbound_headers(headers, _REQUEST_FLAGS))
                break
        self._openStream(sid, headers, _plainRequestHeaders(headers))
        if endStream and self._stillProducing:
            request = self.streams.get(sid)
            if request is not None:
                request.requestComplete()
        return True

    def _connectionTerminated(self, event: Any) -> None:
        """GOAWAY from the peer: Twisted closes the connection and fails every stream."""
        assert self.transport is not None
        self.transport.loseConnection()
        self.connectionLost(
            Failure(ConnectionLost("Remote peer sent GOAWAY")),
            _cancelTimeouts=False,
        )

    def _settingsAcknowledged(self, event: Any) -> None:
        self._settingsAcked = True

    def _refuseStream(self, frame: Any) -> tuple[list[Any], list[Any]]:
        """A new stream over our MAX_CONCURRENT_STREAMS: reset it, not the connection, as
        Go's server does (golang.org/x/net/http2 server.go ``processHeaders``): REFUSED_STREAM
        while the client may not have seen our SETTINGS yet, PROTOCOL_ERROR once it
        acknowledged them (RFC 9113 section 5.1.2 allows either). The header block is
        decoded all the same, so that the HPACK table stays in step with the client's; the
        stream counts as closed by our reset, so its later frames get h2's answer to frames
        on a reset stream (connection window credited, RST_STREAM STREAM_CLOSED)."""
        conn = self.conn
        sid = frame.stream_id
        if not sid & 1 or sid <= conn.highest_inbound_stream_id:
            raise h2.exceptions.ProtocolError(f"invalid new stream id {sid}")
        _decode_headers(conn.decoder, frame.data)
        conn.highest_inbound_stream_id = sid
        conn._closed_streams[sid] = StreamClosedBy.SEND_RST_STREAM
        reset = RstStreamFrame(sid)
        reset.error_code = (
            ErrorCodes.PROTOCOL_ERROR if self._settingsAcked else ErrorCodes.REFUSED_STREAM
        )
        return [reset], []

    def _remoteSettingsChanged(self, event: Any) -> None:
        """A new SETTINGS_INITIAL_WINDOW_SIZE moves every stream's window (RFC 9113 §6.9.2):
        streams it opened may send again, like after a connection-wide WINDOW_UPDATE."""
        if SettingCodes.INITIAL_WINDOW_SIZE in event.changed_settings:
            self._windowOpened(0)

    def _requestReceived(self, event: Any) -> None:
        """Twisted's, once the header block passed validation; the stream enters the
        priority tree only if the client uses priorities.

        With a lean request class (:class:`apiserver.http.h2request.H2Request`, what
        ``ApiSite`` serves with) a request of the everyday shape is its own stream object;
        any other valid block gets Twisted's ``H2Stream`` and the class's
        ``twistedRequestFactory``, exactly as before.
        """
        headers = event.headers
        self._openStream(event.stream_id, headers, _plainRequestHeaders(headers))

    def _openStream(self, sid: int, headers: list[Any], plain: bool) -> None:
        if not plain and not self._headersValid(headers, _REQUEST_FLAGS):
            return
        factory = self.requestFactory
        stream: Any
        if isinstance(factory, type) and issubclass(factory, H2Request):
            if plain:
                stream = factory(self, sid, headers)
            else:
                stream = _http2.H2Stream(
                    sid, self, headers, factory.twistedRequestFactory, self.site, self.factory
                )
        else:
            stream = _http2.H2Stream(sid, self, headers, factory, self.site, self.factory)
        self.streams[sid] = stream
        self._streamCleanupCallbacks[sid] = Deferred()
        self._outboundStreamQueues[sid] = deque()
        self._queuedBytes[sid] = 0
        if self._treeInUse:
            self._addToTree(sid)

    def _addToTree(self, sid: int) -> None:
        # A PRIORITY frame may have put it there first (Twisted's case too).
        with contextlib.suppress(priority.DuplicateStreamError):
            self.priority.insert_stream(sid)
        if sid not in self._ready:
            self.priority.block(sid)

    def _handlePriorityUpdate(self, event: Any) -> None:
        """Twisted's, after moving the open streams into the tree the first time."""
        if not self._treeInUse:
            self._treeInUse = True
            for sid in sorted(self.streams):
                self._addToTree(sid)
        super()._handlePriorityUpdate(event)

    def _trailersReceived(self, event: Any) -> None:
        # Twisted ignores trailers; they are still checked, as h2 would.
        self._headersValid(event.headers, _TRAILER_FLAGS)

    def _headersValid(self, headers: list[Any], flags: Any) -> bool:
        """h2's own header validation (``h2.utilities.validate_headers``) for the blocks the
        one-pass check does not vouch for; a malformed block ends the connection with
        PROTOCOL_ERROR, as it does when h2 validates inside ``receive_data``."""
        try:
            for _ in h2.utilities.validate_headers(headers, flags):
                pass
        except h2.exceptions.ProtocolError as error:
            self.conn.close_connection(error_code=error.error_code)
            self._terminate(Failure())
            return False
        return True

    def _handleWindowUpdate(self, event: Any) -> None:
        """Put streams that have data and now have window back on the schedule, and let
        paused producers resume (Twisted's rule: window minus queued bytes above zero)."""
        self._windowOpened(event.stream_id)

    def _windowOpened(self, streamID: int) -> None:
        queues = self._outboundStreamQueues
        if streamID:
            stream = self.streams.get(streamID)
            if stream is None:
                # A late WINDOW_UPDATE for a finished stream: harmless.
                return
            if queues[streamID]:
                self._markReady(streamID)
            stream.windowUpdated()
        else:
            for stream in list(self.streams.values()):
                sid = stream.streamID
                if sid not in self.streams:
                    continue
                if queues[sid]:
                    self._markReady(sid)
                stream.windowUpdated()
        self._scheduleSend()

    # -- queueing ---------------------------------------------------------------------

    def getHost(self) -> Any:
        """The local address, asked of the socket once per connection instead of once per
        request (twisted.web's Request reads it for every stream; it cannot change)."""
        host = self._host
        if host is None:
            host = self._host = super().getHost()
        return host

    def getPeer(self) -> Any:
        """The peer's address, once per connection (as :meth:`getHost`)."""
        peer = self._peer
        if peer is None:
            peer = self._peer = super().getPeer()
        return peer

    def _isSecure(self) -> bool:
        """Whether the transport is TLS, once per connection (as :meth:`getHost`)."""
        secure = self._secure
        if secure is None:
            secure = self._secure = super()._isSecure()
        return secure

    def writeHeaders(
        self, version: bytes, code: bytes, reason: bytes, headers: Any, streamID: int
    ) -> None:
        """Encode the HEADERS frame now; it leaves with the pass's single write."""
        block = _responseHeaderBlock(code, headers)
        if block is None:
            headers.insert(0, (b":status", code))
            block = list(
                h2.utilities.validate_outbound_headers(
                    h2.utilities.normalize_outbound_headers(headers, _RESPONSE_FLAGS),
                    _RESPONSE_FLAGS,
                )
            )
        else:
            machine = self._responseMachine(streamID, code)
            if machine is not None:
                machine.headers_sent = True
                self._queueHeaders(streamID, self.conn.encoder.encode(block))
                self._scheduleSend()
                return
        try:
            self.conn.send_headers(streamID, block)
        except h2.exceptions.StreamClosedError:
            # Reset by the client meanwhile: dropped silently, as Twisted does.
            return
        self._scheduleSend()

    def writeResponseHeaders(self, streamID: int, code: int, headers: Any) -> None:
        """The response HEADERS of a lean request (:class:`H2Request`) from its twisted
        ``Headers``: the bytes :meth:`writeHeaders` would queue for the fields in the
        order they were set (``H2Stream.writeHeaders``), encoded without building the
        field list in between (``_LiteralEncoder.encodeResponse``)."""
        status = _STATUS.get(code) or b"%d" % code
        machine = self._responseMachine(streamID, status)
        if machine is not None:
            # conn.encoder is the _LiteralEncoder installed with the connection (above).
            encoded = self.conn.encoder.encodeResponse(  # type: ignore[attr-defined]
                status, headers._rawHeaders
            )
            if encoded is not None:
                machine.headers_sent = True
                self._queueHeaders(streamID, encoded)
                self._scheduleSend()
                return
        self.writeHeaders(
            b"HTTP/2",
            status,
            b"",
            [(k, v) for k, values in headers.getAllRawHeaders() for v in values],
            streamID,
        )

    def _responseMachine(self, streamID: int, code: bytes) -> Any:
        """The h2 state machine of a stream whose final response HEADERS can be queued
        without h2's machinery (see :meth:`_queueHeaders`), or None.

        For a server stream that has received its request and not yet answered (open or
        half-closed remote), h2's ``send_headers`` is a transition to the same state whose
        only effect is marking the headers sent, plus frame objects and a serialisation.
        Informational (1xx) responses, trailers, closed or odd states go through h2.
        """
        conn = self.conn
        stream = conn.streams.get(streamID)
        if stream is None or conn.state_machine.state is not ConnectionState.SERVER_OPEN:
            return None
        machine = stream.state_machine
        if (
            machine.state not in _DATA_STREAM_STATES
            or machine.client is not False
            or machine.headers_sent
            or code[:1] == b"1"
        ):
            return None
        return machine

    def _queueHeaders(self, streamID: int, encoded: bytes) -> None:
        """Frame an encoded block as HEADERS (and CONTINUATION frames past the peer's
        frame size) and append it to h2's own output buffer, so frames keep the order h2
        would give them. The block was encoded with the connection's encoder: the HPACK
        context moves as it does when h2 sends it."""
        conn = self.conn
        limit = conn.max_outbound_frame_size
        size = len(encoded)
        if size <= limit:
            conn._data_to_send += _FRAME_HEADER.pack(size >> 8, size & 0xFF, 0x1, 0x4, streamID)
            conn._data_to_send += encoded
            return
        frames = bytearray()
        for offset in range(0, size, limit):
            piece = encoded[offset : offset + limit]
            last = offset + limit >= size
            frame_type = 0x1 if offset == 0 else 0x9  # HEADERS, then CONTINUATION
            length = len(piece)
            frames += _FRAME_HEADER.pack(
                length >> 8, length & 0xFF, frame_type, 0x4 if last else 0, streamID
            )
            frames += piece
        conn._data_to_send += frames

    def writeDataToStream(self, streamID: int, data: bytes) -> None:
        """Queue ``data``; pause the stream's producer once it has used up the window."""
        self._outboundStreamQueues[streamID].append(data)
        queued = self._queuedBytes[streamID] + len(data)
        self._queuedBytes[streamID] = queued
        window = self.conn.local_flow_control_window(streamID)
        if window > 0:
            self._markReady(streamID)
            self._scheduleSend()
        if window - queued <= 0:
            self.streams[streamID].flowControlBlocked()

    def endRequest(self, streamID: int) -> None:
        """The response is complete: END_STREAM goes on its last DATA frame."""
        self._outboundStreamQueues[streamID].append(_END)
        self._markReady(streamID)
        self._scheduleSend()

    def openStreamWindow(self, streamID: int, increment: int) -> None:
        """Acknowledge request body bytes; a WINDOW_UPDATE, if h2 emits one, leaves with the
        pass's write instead of a write of its own."""
        self.conn.acknowledge_received_data(increment, streamID)
        self._scheduleSend()

    def remainingOutboundWindow(self, streamID: int) -> int:
        """The stream's window minus what is queued for it, from the running count."""
        return int(self.conn.local_flow_control_window(streamID)) - self._queuedBytes[streamID]

    def abortRequest(self, streamID: int, errorCode: int = 0) -> None:
        """Reset the stream with ``errorCode`` (Twisted's ``abortRequest`` sends NO_ERROR only)
        and forget it."""
        self.conn.reset_stream(streamID, error_code=errorCode)
        if self._tryToWriteControlData():
            self._requestDone(streamID)

    def _requestDone(self, streamID: int) -> None:
        """Forget the stream (Twisted's, plus our own state).

        A stream h2 knows as closed leaves h2's table too, as h2 itself drops closed streams
        (``H2Connection._open_streams``, run when the client opens a stream): streams
        opened on our receive path never run it, and would otherwise stay until the table
        reached the stream limit."""
        conn = self.conn
        stream = conn.streams.get(streamID)
        if stream is not None and stream.state_machine.state is StreamState.HALF_CLOSED_LOCAL:
            # Answered before the client's body ended (a body over the limit,
            # apiserver.http.bodylimit): ask it to stop sending, as Go's server does after the
            # response (golang.org/x/net/http2 server.go wroteFrame; RFC 9113 section 8.1).
            conn.reset_stream(streamID, error_code=0)
        if stream is not None and stream.state_machine.state is StreamState.CLOSED:
            del conn.streams[streamID]
            conn._closed_streams[streamID] = stream.state_machine.stream_closed_by
        del self._outboundStreamQueues[streamID]
        del self._queuedBytes[streamID]
        self._ready.pop(streamID, None)
        if self._treeInUse:
            self.priority.remove_stream(streamID)
        del self.streams[streamID]
        done = self._streamCleanupCallbacks.pop(streamID)
        if self._sending:
            # Twisted fires it after the stream's last frame went to the transport.
            self._finished.append((done, streamID))
        else:
            done.callback(streamID)

    def _markReady(self, streamID: int) -> None:
        if streamID not in self._ready:
            self._ready[streamID] = None
            if self._treeInUse:
                self.priority.unblock(streamID)

    def _markIdle(self, streamID: int) -> None:
        if self._ready.pop(streamID, 0) is None and self._treeInUse:
            self.priority.block(streamID)

    def _scheduleSend(self) -> None:
        """One pass per reactor turn; ``dataReceived`` runs its own pass at its end."""
        if self._inDataReceived or self._sendCall is not None or not self._stillProducing:
            return
        if self._sending:
            self._sendAgain = True
            return
        self._sendCall = self._reactor.callLater(0, self._sendPrioritisedData)

    # -- sending ----------------------------------------------------------------------

    def _sendPrioritisedData(self, *args: Any) -> None:
        """The send pass: every frame flow control allows, then one transport write."""
        call = self._sendCall
        if call is not None:
            self._sendCall = None
            if call.active():
                call.cancel()
        if not self._stillProducing:
            return
        if self._sending:
            self._sendAgain = True
            return
        self._sending = True
        more = False
        try:
            while True:
                self._sendAgain = False
                if (
                    self._ready
                    and self._consumerBlocked is None
                    and not self._bufferedControlFrames
                ):
                    more = self._sendReady()
                if not self._stillProducing:
                    return
                out = self._out
                if out:
                    # Not blocked when the pass began, and nothing was written since.
                    out.append(self.conn.data_to_send())
                    data = b"".join(out)
                    out.clear()
                    self._undrained = 0
                    self._writeOut(data)
                elif not self._tryToWriteControlData():
                    return
                if not self._sendAgain or more:
                    break
        finally:
            self._sending = False
            finished = self._finished
            while finished:
                done, sid = finished.pop(0)
                done.callback(sid)
        if more:
            self._scheduleSend()

    def _writeOut(self, data: bytes) -> None:
        """Hand a pass's frames to the transport.

        A large write goes to TLS at once (after whatever waits in Twisted's small-write
        buffer) and as a view: Twisted's TLS transport cuts what it is given into 16 KiB
        records, copying each piece of a ``bytes`` but not of a ``memoryview``, and its
        small-write buffer would only delay it by a reactor turn. Small writes keep the
        buffer, as HTTP/1.1 does (``H1Channel.writeStreamData``).
        """
        transport = self.transport
        assert transport is not None
        if len(data) >= _DIRECT_TLS_WRITE and isinstance(transport, BufferingTLSTransport):
            transport._aggregator.flush()
            TLSMemoryBIOProtocol.write(transport, memoryview(data))
            return
        transport.write(data)

    def _sendReady(self) -> bool:
        """Generate the DATA frames of the ready streams; True if the budget ran out first."""
        self.resetTimeout()
        conn = self.conn
        ready = self._ready
        connWindow = conn.outbound_flow_control_window
        demand = 0
        for sid in ready:
            demand += min(self._queuedBytes[sid], conn.local_flow_control_window(sid))
        if demand <= connWindow and demand <= MAX_BATCH:
            # No contention: send all of each stream, in the order they became ready.
            for sid in list(ready):
                self._sendStream(sid, MAX_BATCH)
            return False
        budget = MAX_BATCH
        frameSize = conn.max_outbound_frame_size
        if demand <= connWindow and not self._treeInUse:
            # Only the budget is short (several large answers at once): each ready stream
            # gets an equal share of it, framed in one go, round after round.
            while ready and budget > 0:
                share = max(frameSize, budget // len(ready))
                before = budget
                for sid in list(ready):
                    budget -= self._sendStream(sid, min(share, budget))
                    if budget <= 0:
                        break
                if budget == before:
                    break
            return bool(ready)
        # Contention for the connection window: one frame at a time, in the order the
        # priority tree gives (Twisted's scheduling), or round-robin while the client has
        # not used priorities (what the tree does for equal siblings).
        if self._treeInUse:
            tree = self.priority
            while budget > 0 and conn.outbound_flow_control_window > 0:
                try:
                    sid = next(tree)
                except priority.DeadlockError:
                    return False
                budget -= self._sendStream(sid, frameSize, frames=1)
        else:
            while ready and budget > 0 and conn.outbound_flow_control_window > 0:
                for sid in list(ready):
                    if sid in ready:
                        budget -= self._sendStream(sid, frameSize, frames=1)
                        if budget <= 0 or conn.outbound_flow_control_window <= 0:
                            break
        return bool(ready) and conn.outbound_flow_control_window > 0

    def _sendStream(self, sid: int, limit: int, frames: int = -1) -> int:
        """Send up to ``limit`` bytes (and at most ``frames`` frames) of a stream's queue,
        ending the stream when its end marker is reached; return the bytes sent."""
        conn = self.conn
        if frames < 0:
            stream = conn.streams.get(sid)
            if (
                stream is not None
                and stream.state_machine.state in _DATA_STREAM_STATES
                and conn.state_machine.state is ConnectionState.SERVER_OPEN
            ):
                return self._sendFrames(sid, stream, limit)
        queue = self._outboundStreamQueues[sid]
        sent = 0
        while queue and frames != 0:
            head = queue[0]
            if head is _END:
                queue.popleft()
                conn.end_stream(sid)
                self._requestDone(sid)
                return sent
            room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            room = min(room, limit - sent)
            if room <= 0:
                break
            frame, size = _takeFrame(queue, room)
            end = bool(queue) and queue[0] is _END
            if end:
                queue.popleft()
            if size or end:
                self._sendData(sid, frame, size, end)
                self._undrained += size
                if self._undrained >= _DRAIN_AT:
                    self._drain()
            self._queuedBytes[sid] -= size
            sent += size
            frames -= 1
            if end:
                self._requestDone(sid)
                return sent
        if not queue or conn.local_flow_control_window(sid) <= 0:
            # Drained, or waiting for a WINDOW_UPDATE: off the schedule until then.
            self._markIdle(sid)
        return sent

    def _sendFrames(self, sid: int, stream: Any, limit: int) -> int:
        """Frame up to ``limit`` bytes of a stream's queue as :meth:`_sendData` frames them,
        all that the windows allow in one loop; return the bytes sent.

        Why: a LIST answer is hundreds of kilobytes, tens of frames of the peer's frame size
        (16 KiB by default). Framed one at a time (the windows asked of h2, a chunk taken,
        copied out of the body, h2's buffer flushed) that cost several microseconds a frame
        and a copy of the body; here a frame is a header and a view of the body, and the
        body is copied once, when the pass joins its frames for the transport. The windows
        are charged and END_STREAM goes through h2's state machine as in :meth:`_sendData`.
        """
        conn = self.conn
        queue = self._outboundStreamQueues[sid]
        room = min(conn.outbound_flow_control_window, stream.outbound_flow_control_window, limit)
        frameSize = conn.max_outbound_frame_size
        out = self._out
        if conn._data_to_send:
            # What h2 queued (HEADERS, control frames) goes first.
            out.append(conn.data_to_send())
        pack = _FRAME_HEADER.pack
        sent = 0
        end = False
        while queue:
            head = queue[0]
            if head is _END:
                # An end with no data left before it: an empty DATA frame ends the stream.
                queue.popleft()
                end = True
                stream.state_machine.process_input(StreamInputs.SEND_END_STREAM)
                out.append(pack(0, 0, 0, 0x1, sid))
                break
            cap = room - sent
            if cap <= 0:
                break
            if cap > frameSize:
                cap = frameSize
                whole = min(len(head) - 1, room - sent) // frameSize
                if whole > 1:
                    # Full frames from inside one large chunk (a LIST's body): the same
                    # header every time, views of the body.
                    view = head if isinstance(head, memoryview) else memoryview(head)
                    header = pack(frameSize >> 8, frameSize & 0xFF, 0, 0, sid)
                    append = out.append
                    end_at = whole * frameSize
                    for offset in range(0, end_at, frameSize):
                        append(header)
                        append(view[offset : offset + frameSize])
                    queue[0] = view[end_at:]
                    sent += end_at
                    continue
            pieces, size = _takePieces(queue, cap)
            flags = 0
            if queue and queue[0] is _END:
                queue.popleft()
                end = True
                stream.state_machine.process_input(StreamInputs.SEND_END_STREAM)
                flags = 0x1
            elif not size:
                continue
            out.append(pack(size >> 8, size & 0xFF, 0, flags, sid))
            out.extend(pieces)
            sent += size
            if end:
                break
        stream.outbound_flow_control_window -= sent
        conn.outbound_flow_control_window -= sent
        self._queuedBytes[sid] -= sent
        if end:
            self._requestDone(sid)
        elif (
            not queue
            or stream.outbound_flow_control_window <= 0
            or conn.outbound_flow_control_window <= 0
        ):
            # Drained, or waiting for a WINDOW_UPDATE: off the schedule until then.
            self._markIdle(sid)
        return sent

    def _sendData(self, sid: int, data: bytes, size: int, end: bool) -> None:
        """One DATA frame of ``size`` bytes (already within the windows and frame size).

        The frame is written here directly: in h2 it is a transition from OPEN (or
        half-closed remote) to the same state with no callback, a frame object, and two
        copies of the payload (serialising, then h2's output buffer), which made up most of
        the cost of sending a large body. END_STREAM still goes through h2's stream state
        machine (it closes the stream); the flow-control windows are charged exactly as h2
        charges them and frames keep their order (whatever h2 queued before goes out
        first). A frame in any other state goes through h2.
        """
        conn = self.conn
        if size or end:
            stream = conn.streams.get(sid)
            if (
                stream is not None
                and stream.state_machine.state in _DATA_STREAM_STATES
                and conn.state_machine.state is ConnectionState.SERVER_OPEN
            ):
                flags = 0
                if end:
                    # The one transition with an effect goes through h2's state machine.
                    stream.state_machine.process_input(StreamInputs.SEND_END_STREAM)
                    flags = 0x1
                stream.outbound_flow_control_window -= size
                conn.outbound_flow_control_window -= size
                out = self._out
                pending = conn.data_to_send()
                if pending:
                    out.append(pending)
                out.append(_FRAME_HEADER.pack(size >> 8, size & 0xFF, 0, flags, sid))
                if size:
                    out.append(data)
                return
        conn.send_data(sid, data, end_stream=end)

    def _drain(self) -> None:
        """Move h2's output buffer aside: it is a bytearray grown frame by frame, which
        costs more than the frames themselves once it holds hundreds of kilobytes."""
        self._out.append(self.conn.data_to_send())
        self._undrained = 0

    # -- flow control of the transport and connection loss ----------------------------

    def resumeProducing(self) -> None:
        """The transport drained: flush buffered control frames, then send again."""
        super().resumeProducing()
        self._scheduleSend()

    def connectionLost(
        self, reason: Failure = connectionDone, _cancelTimeouts: bool = True
    ) -> None:
        call = self._sendCall
        if call is not None:
            self._sendCall = None
            if call.active():
                call.cancel()
        super().connectionLost(reason, _cancelTimeouts)


#: A frame header: 24-bit length (as 16 + 8 bits), type, flags, stream id.
_FRAME_HEADER = struct.Struct(">HBBBL")
_WINDOW_INCREMENT = struct.Struct(">L")
#: Status codes as HEADERS carry them.
_STATUS = {code: b"%d" % code for code in range(200, 600)}
#: The largest flow-control window (RFC 9113 §6.9.1).
_MAX_WINDOW = (1 << 31) - 1


def _contentLength(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The declared body length, by h2's rules (``H2Stream._initialize_content_length``):
    every ``content-length`` all digits and all equal, else a ProtocolError."""
    found = None
    for name, value in headers:
        if name == b"content-length":
            if not value.isdigit():
                raise h2.exceptions.ProtocolError(f"Invalid content-length header: {value!r}")
            parsed = int(value, 10)
            if found is None:
                found = parsed
            elif parsed != found:
                raise h2.exceptions.ProtocolError(
                    f"Conflicting content-length headers: {found} and {parsed}"
                )
    return found


_DATA_STREAM_STATES = (StreamState.OPEN, StreamState.HALF_CLOSED_REMOTE)


def _takePieces(queue: deque[Any], room: int) -> tuple[list[Any], int]:
    """Pop up to ``room`` bytes of data chunks off the front of ``queue`` (not past an end
    marker), splitting the last one if needed (the rest stays queued as a view); return
    the pieces, to be sent as one frame, and their size."""
    head = queue.popleft()
    size = len(head)
    if size > room:
        view = head if isinstance(head, memoryview) else memoryview(head)
        queue.appendleft(view[room:])
        return [view[:room]], room
    parts = [head]
    while queue:
        nxt = queue[0]
        if nxt is _END:
            break
        left = room - size
        if left <= 0:
            break
        n = len(nxt)
        if n > left:
            view = nxt if isinstance(nxt, memoryview) else memoryview(nxt)
            queue[0] = view[left:]
            parts.append(view[:left])
            size += left
            break
        queue.popleft()
        parts.append(nxt)
        size += n
    return parts, size


def _takeFrame(queue: deque[Any], room: int) -> tuple[bytes, int]:
    """:func:`_takePieces` as one ``bytes``: small chunks are joined into one frame."""
    parts, size = _takePieces(queue, room)
    if len(parts) == 1:
        head = parts[0]
        return bytes(head) if isinstance(head, memoryview) else head, size
    return b"".join(parts), size


#: Bytes allowed in a header name after its first byte (RFC 9113 §8.2.1): visible ASCII
#: except upper case and the colon.
_NAME_BYTES = bytes(c for c in range(0x21, 0x7F) if not 0x41 <= c <= 0x5A and c != 0x3A)
_PLAIN_PSEUDO = frozenset((b":method", b":scheme", b":authority", b":path"))
_BLANKS = frozenset((0x20, 0x09))
#: Regular header names already found valid (a name's validity does not depend on
#: anything else), so that each is checked once; bounded, as clients choose them.
_GOOD_NAMES: set[bytes] = set()
_GOOD_NAMES_MAX = 512
_CONNECTION_HEADERS = h2.utilities.CONNECTION_HEADERS
#: Response header names that h2's normalisation treats specially (never-indexed or
#: rejected): left to h2.
_SPECIAL_RESPONSE = frozenset((b"te", b"cookie", b"authorization", b"proxy-authorization"))
#: Response fields whose value is new on every response (kube-apiserver's ``Audit-Id``):
#: sent as literals that stay out of the HPACK dynamic table (RFC 7541 §6.2.3), which they
#: would otherwise churn, evicting the recurring fields that then go out as literals too.
_UNIQUE_RESPONSE = frozenset((b"audit-id",))


def _plainRequestHeaders(headers: list[tuple[bytes, bytes]]) -> bool:
    """True if ``h2.utilities.validate_headers`` would accept this request block as is.

    One pass over the block instead of h2's chain of seven generators. It vouches only for
    the everyday shape (the four usual pseudo-headers first, no CONNECT, no ``te``); a
    False sends the block to h2's validator, which decides. The same rules: names of
    visible lower-case ASCII without a colon after the first byte, values without NUL/CR/LF
    or surrounding blanks, no connection-specific fields, pseudo-headers first, known and
    unique, ``:method``/``:scheme``/a non-empty ``:path``, ``:authority`` or one ``host``
    and equal if both (RFC 9113 §8.2, §8.3).
    """
    seen: set[bytes] = set()
    regular = False
    method = path = authority = host = None
    good = _GOOD_NAMES
    for name, value in headers:
        if name in good:
            regular = True
        elif name in _PLAIN_PSEUDO:
            if regular or name in seen:
                return False
            seen.add(name)
            if name == b":method":
                method = value
            elif name == b":path":
                path = value
            elif name == b":authority":
                authority = value
        elif name == b"host":
            if host is not None:
                return False
            host = value
            regular = True
        else:
            if (
                not name
                or name[0] == 0x3A
                or name.translate(None, _NAME_BYTES)
                or name in _CONNECTION_HEADERS
                or name == b"te"
            ):
                return False
            regular = True
            if len(good) < _GOOD_NAMES_MAX:
                good.add(name)
        if value and (
            13 in value or 10 in value or 0 in value or value[0] in _BLANKS or value[-1] in _BLANKS
        ):
            return False
    if method is None or method == b"CONNECT" or not path or b":scheme" not in seen:
        return False
    if authority is None:
        return host is not None
    return host is None or host == authority


def _responseHeaderBlock(code: bytes, headers: list[tuple[bytes, bytes]]) -> list[Any] | None:
    """The response block as h2's outbound normalisation and validation would make it
    (names lower-cased and stripped, values stripped, connection-specific fields dropped,
    RFC 9113 §8.2.2), with the fields of :data:`_UNIQUE_RESPONSE` kept out of the HPACK
    table; or None for a block with a name h2 treats specially, which then goes through
    h2's own pipeline."""
    block: list[Any] = [(b":status", code)]
    for name, value in headers:
        name = name.lower().strip()
        if name in _CONNECTION_HEADERS:
            continue
        if name[:1] == b":" or name in _SPECIAL_RESPONSE:
            return None
        if name in _UNIQUE_RESPONSE:
            block.append(hpack.NeverIndexedHeaderTuple(name, value.strip()))
        else:
            block.append((name, value.strip()))
    return block


def _table_mark(table: Any) -> tuple[int, Any, int]:
    """What tells an HPACK dynamic table's indices apart: its length, its newest entry
    (compared by identity: re-adding an equal field is still a move) and its size limit."""
    entries = table.dynamic_entries
    return (len(entries), entries[0] if entries else None, table.maxsize)


def _table_moved(before: tuple[int, Any, int], after: tuple[int, Any, int]) -> bool:
    """Whether the table changed between two :func:`_table_mark` readings."""
    return before[0] != after[0] or before[1] is not after[1] or before[2] != after[2]


class _LiteralEncoder(hpack.Encoder):
    """HPACK without Huffman coding of literal strings (RFC 7541 §5.2 leaves the choice to
    the encoder). hpack's Huffman coder is a Python loop over every byte, the costliest
    part of encoding a response header block, and literals are rare once the dynamic table
    holds the recurring fields; a block grows by a few bytes.

    :meth:`encodeResponse` encodes a response straight from the request's headers, without
    hpack's generic loop, to the same bytes (see there)."""

    MAX_MEMO = 256

    def __init__(self) -> None:
        super().__init__()
        #: (name, value) -> its encoding while the dynamic table stays as it is: a response's
        #: recurring fields (content-type, cache-control, the Date of this second) are
        #: indexed references whose bytes only change when the table does.
        self._memo: dict[tuple[bytes, bytes], bytes] = {}
        #: name -> the start of its never-indexed literal (RFC 7541 §6.2.3, a literal name),
        #: for names the table does not hold; valid as long as the memo is.
        self._neverMemo: dict[bytes, bytes] = {}
        #: The table (see _table_mark) the memos were made with.
        self._memoMark = _table_mark(self.header_table)

    def _checkMemo(self) -> None:
        """Forget the memos if the table changed since they were made (a size change asked
        by the peer's SETTINGS evicts entries without going through :meth:`add`)."""
        mark = _table_mark(self.header_table)
        if _table_moved(self._memoMark, mark):
            self._memo.clear()
            self._neverMemo.clear()
            self._memoMark = mark

    def encode(self, headers: Any, huffman: bool = True) -> bytes:
        self._checkMemo()
        return bytes(super().encode(headers, huffman=False))

    def add(self, to_add: tuple[bytes, bytes], sensitive: bool, huffman: bool = False) -> bytes:
        if sensitive:
            return super().add(to_add, sensitive, False)
        memo = self._memo
        known = memo.get(to_add)
        if known is not None:
            return known
        table = self.header_table
        before = _table_mark(table)
        encoded = super().add(to_add, sensitive, False)
        after = _table_mark(table)
        if _table_moved(before, after):
            # The table moved: every remembered index may now be wrong.
            memo.clear()
            self._neverMemo.clear()
            self._memoMark = after
        elif len(memo) < self.MAX_MEMO:
            memo[to_add] = encoded
        return encoded

    def encodeResponse(self, code: bytes, fields: dict[bytes, list[bytes]]) -> bytes | None:
        """The header block of a response with status ``code`` and the fields of a twisted
        ``Headers`` (``{name: [values]}`` in the order they were set), or None, having
        encoded nothing, if a field name needs h2's own pipeline or the table's size just
        changed.

        The same bytes as :func:`_responseHeaderBlock` followed by :meth:`encode`: names
        lower-cased and stripped (:func:`_responseName`), values stripped,
        connection-specific fields dropped, :data:`_UNIQUE_RESPONSE` fields as
        never-indexed literals, the rest through the memo and hpack's ``add``; the
        difference is only that nothing is built twice.
        """
        lowered = _RESPONSE_NAMES
        for name in fields:
            norm = lowered.get(name)
            if norm is None:
                norm = _responseName(name)
            if norm is _SPECIAL_NAME:
                return None
        if self.header_table.resized:
            return None
        self._checkMemo()
        memo = self._memo
        status = (b":status", code)
        parts = [memo.get(status) or self.add(status, False)]
        append = parts.append
        for name, values in fields.items():
            norm = lowered[name]
            if norm is _DROPPED_NAME:
                continue
            if norm in _UNIQUE_RESPONSE:
                for value in values:
                    append(self._neverIndexed(norm, value.strip()))
                continue
            for value in values:
                field = (norm, value.strip())
                known = memo.get(field)
                append(known if known is not None else self.add(field, False))
        return b"".join(parts)

    def _neverIndexed(self, name: bytes, value: bytes) -> bytes:
        """``add((name, value), sensitive=True)``: hpack's bytes, with the name's part
        remembered while the table (which such a field never enters) holds no ``name``."""
        prefix = self._neverMemo.get(name)
        if prefix is None:
            table = self.header_table
            if name in table.STATIC_TABLE_MAPPING or any(
                entry[0] == name for entry in table.dynamic_entries
            ):
                return super().add((name, value), True, False)
            prefix = b"\x10" + bytes(hpack.hpack.encode_integer(len(name), 7)) + name
            self._neverMemo[name] = prefix
        size = len(value)
        if size < 0x7F:
            return prefix + bytes((size,)) + value
        return prefix + bytes(hpack.hpack.encode_integer(size, 7)) + value


#: Markers in :data:`_RESPONSE_NAMES`.
_SPECIAL_NAME = b":special"
_DROPPED_NAME = b":dropped"
#: Response header name (as set) -> as h2 would send it, or a marker; bounded.
_RESPONSE_NAMES: dict[bytes, bytes] = {}
_RESPONSE_NAMES_MAX = 512


def _responseName(name: bytes) -> bytes:
    """A response field's name as :func:`_responseHeaderBlock` sends it, or
    :data:`_DROPPED_NAME` (connection-specific) or :data:`_SPECIAL_NAME` (h2's pipeline)."""
    norm = name.lower().strip()
    if norm in _CONNECTION_HEADERS:
        norm = _DROPPED_NAME
    elif norm[:1] == b":" or norm in _SPECIAL_RESPONSE:
        norm = _SPECIAL_NAME
    if len(_RESPONSE_NAMES) < _RESPONSE_NAMES_MAX:
        _RESPONSE_NAMES[name] = norm
    return norm


class _CachingDecoder(hpack.Decoder):
    """An HPACK decoder that remembers the header blocks that leave its table alone.

    Why: a client sends the same request headers again and again (the same path, accept,
    user-agent, authorization), and once they sit in the dynamic table each block is the same
    few bytes of indexed fields; hpack decodes them anew every time, in Python (measured: 8%
    of a GET over HTTP/2). A block's result depends only on its bytes, the dynamic table and
    the two size limits, so a result is kept for blocks that did not change the table, and
    every kept result is dropped as soon as any block changes it (a literal with
    incremental indexing, an eviction, a size update). RFC 7541 decoding is unchanged.
    """

    MAX_ENTRIES = 64

    def __init__(self) -> None:
        super().__init__()
        self._blocks: dict[tuple[bytes, int, int], list[Any]] = {}

    def decode(self, data: bytes, raw: bool = False) -> Any:
        key = (bytes(data), self.max_allowed_table_size, self.max_header_list_size)
        if raw:
            known = self._blocks.get(key)
            if known is not None:
                return list(known)
        before = _table_mark(self.header_table)
        headers = super().decode(data, raw)
        if _table_moved(before, _table_mark(self.header_table)):
            self._blocks.clear()
        elif raw and len(self._blocks) < self.MAX_ENTRIES:
            self._blocks[key] = list(headers)
        return headers


def _short_data_repr(data: bytes | None) -> str:
    """hyperframe's ``_raw_data_repr`` text, from the first 11 bytes instead of all of them."""
    if not data:
        return "None"
    text = binascii.hexlify(data[:11]).decode("ascii")
    if len(text) > 20:
        text = text[:20] + "..."
    return "<hex:" + text + ">"


def quiet_frame_repr() -> None:
    """Make the text of a frame cost the same whatever its size.

    Why: h2 formats every received frame for a trace log (``connection.py``
    ``_receive_frame``: ``repr(frame)``, evaluated even though the logger drops it), and
    hyperframe's repr hexlifies the whole payload before cutting it to 20 characters. The
    replacement gives the very same text from the payload's first bytes; measured at 13%
    of an HTTP/2 watch client's time and a few percent of a request body's.
    """
    if getattr(hyperframe.frame, "_raw_data_repr", None) is not None:
        hyperframe.frame._raw_data_repr = _short_data_repr


class StockH2Connection(_http2.H2Connection):
    """Twisted's own ``H2Connection`` with only the settings the flags ask for, through h2's
    public API: the fallback when :func:`~apiserver.http.h2internals.h2_internals_problems`
    finds that an internal of the fast path changed.

    It advertises ``--http2-max-streams-per-connection`` and takes header lists up to
    :data:`MAX_HEADER_LIST_SIZE`, as :class:`FastH2Connection` does; everything else is
    Twisted's (it serves twisted.web requests: ``servesLeanRequests`` is false).
    """

    maxConcurrentStreams: int = DEFAULT_MAX_STREAMS

    def __init__(self, reactor: Any = None) -> None:
        super().__init__(reactor)
        conn = self.conn
        conn.local_settings = Settings(
            client=False,
            initial_values={
                SettingCodes.MAX_CONCURRENT_STREAMS: self.maxConcurrentStreams,
                SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST_SIZE,
            },
        )
        conn.decoder.max_header_list_size = MAX_HEADER_LIST_SIZE


#: Whether the fallback was reported already: it is logged once per process.
_fallback_reported = False


def configure_http2(max_streams: int) -> bool:
    """Serve HTTP/2 on every new connection of this process, advertising ``max_streams``
    streams (0: the default 100); True if that is :class:`FastH2Connection`.

    The fast path is installed only when every private internal of h2, hpack and Twisted it
    relies on is as expected (:mod:`apiserver.http.h2internals`); otherwise
    :class:`StockH2Connection` (Twisted's own path) is, and the first such call logs what
    differed.
    """
    global _fallback_reported
    streams = max_streams or DEFAULT_MAX_STREAMS
    problems = h2_internals_problems()
    if problems:
        if not _fallback_reported:
            _fallback_reported = True
            _log.warn(
                "HTTP/2: serving with Twisted's own H2Connection, not the fast path: the "
                "installed h2/hpack/Twisted differ from what it was written for: {problems}",
                problems="; ".join(problems),
            )

        class ApiserverStockH2Connection(StockH2Connection):
            maxConcurrentStreams = streams

        http.H2Connection = ApiserverStockH2Connection  # type: ignore[misc]
        return False
    quiet_frame_repr()

    class ApiserverH2Connection(FastH2Connection):
        maxConcurrentStreams = streams

    http.H2Connection = ApiserverH2Connection  # type: ignore[misc]
    return True
