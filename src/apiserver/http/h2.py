"""Our HTTP/2 server connection: twisted.web's, with the advertised stream limit and a fast
path for sending and for header blocks.

``--http2-max-streams-per-connection`` is the MAX_CONCURRENT_STREAMS we advertise;
kube-apiserver advertises 100 when the flag is 0 (spec/auth-audit-tls.md §10), which is also
the h2 library's default. twisted.web offers no setting for it: its protocol switcher builds
``twisted.web.http.H2Connection`` by name, so :func:`configure_http2` installs a subclass
there. One server runs per process, so a process-wide setting is what the flag means here.

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
  until then contention is served round-robin, one frame a stream, which is what the tree
  does for equal siblings. Without contention every ready stream is sent in full;
- a stream whose window is exhausted leaves the schedule until a WINDOW_UPDATE (or a
  SETTINGS change of the initial window) opens it again, instead of being polled.

Header blocks: h2 validates every received block through a chain of seven generators and
normalises every sent one through five more. Request blocks of the everyday shape are
checked here in one pass against the same rules (:func:`_plainRequestHeaders`); any other
block goes through h2's own validator, and a malformed one ends the connection with
PROTOCOL_ERROR as before. Response blocks are normalised in one pass to what h2 would send
(:func:`_responseHeaderBlock`). HPACK literals are not Huffman-coded (:class:`_LiteralEncoder`)
and ``Audit-Id``, new on every response, stays out of the dynamic table.

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
from h2.connection import ConnectionState
from h2.settings import SettingCodes, Settings
from h2.stream import StreamInputs, StreamState
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionLost
from twisted.internet.protocol import connectionDone
from twisted.python.failure import Failure
from twisted.web import _http2, http

DEFAULT_MAX_STREAMS = 100

#: Bytes of DATA one send pass may hand to the transport before it yields to the reactor
#: (the rest follows on the next turn), so that one huge response cannot hold the reactor.
MAX_BATCH = 1 << 20

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
    #: Set by twisted.web's protocol switcher, like ``site`` and ``factory``.
    requestFactory: Any

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
        self._out: list[bytes] = []
        self._undrained = 0
        # Cleanup Deferreds of streams a pass ended, fired once their frames are written.
        self._finished: list[tuple[Deferred[int], int]] = []
        self._host: Any = None
        super().__init__(reactor)
        conn = self.conn
        # Header blocks are checked here instead (same rules, one pass; see
        # _plainRequestHeaders and _responseHeaderBlock).
        conn.config.validate_inbound_headers = False
        conn.config.validate_outbound_headers = False
        conn.config.normalize_outbound_headers = False
        conn.encoder = _LiteralEncoder()
        decoder = _CachingDecoder()
        decoder.max_header_list_size = conn.decoder.max_header_list_size
        decoder.max_allowed_table_size = conn.decoder.max_allowed_table_size
        conn.decoder = decoder
        if self.maxConcurrentStreams != DEFAULT_MAX_STREAMS:
            conn.local_settings = Settings(
                client=False,
                initial_values={
                    SettingCodes.MAX_CONCURRENT_STREAMS: self.maxConcurrentStreams,
                    SettingCodes.MAX_HEADER_LIST_SIZE: conn.DEFAULT_MAX_HEADER_LIST_SIZE,
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
        }

    # -- receiving --------------------------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        """Twisted's event handling, then one send pass for whatever the events produced."""
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            self._terminate(Failure())
            return
        self.resetTimeout()
        dispatch = self._dispatch
        self._inDataReceived = True
        try:
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

    def _connectionTerminated(self, event: Any) -> None:
        """GOAWAY from the peer: Twisted closes the connection and fails every stream."""
        assert self.transport is not None
        self.transport.loseConnection()
        self.connectionLost(
            Failure(ConnectionLost("Remote peer sent GOAWAY")),
            _cancelTimeouts=False,
        )

    def _remoteSettingsChanged(self, event: Any) -> None:
        """A new SETTINGS_INITIAL_WINDOW_SIZE moves every stream's window (RFC 9113 §6.9.2):
        streams it opened may send again, like after a connection-wide WINDOW_UPDATE."""
        if SettingCodes.INITIAL_WINDOW_SIZE in event.changed_settings:
            self._windowOpened(0)

    def _requestReceived(self, event: Any) -> None:
        """Twisted's, once the header block passed validation; the stream enters the
        priority tree only if the client uses priorities."""
        headers = event.headers
        if not _plainRequestHeaders(headers) and not self._headersValid(headers, _REQUEST_FLAGS):
            return
        sid = event.stream_id
        self.streams[sid] = _http2.H2Stream(
            sid, self, headers, self.requestFactory, self.site, self.factory
        )
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
        elif self._sendResponseHeaders(streamID, block):
            self._scheduleSend()
            return
        try:
            self.conn.send_headers(streamID, block)
        except h2.exceptions.StreamClosedError:
            # Reset by the client meanwhile: dropped silently, as Twisted does.
            return
        self._scheduleSend()

    def _sendResponseHeaders(self, streamID: int, block: list[tuple[bytes, bytes]]) -> bool:
        """Queue the final response HEADERS of a stream without h2's machinery, or False.

        For a server stream that has received its request and not yet answered (open or
        half-closed remote), h2's ``send_headers`` is a transition to the same state whose
        only effect is marking the headers sent, plus frame objects and a serialisation.
        This does exactly that: the block is encoded with the connection's encoder (the
        HPACK context moves the same way), framed as HEADERS (and CONTINUATION frames past
        the peer's frame size), and appended to h2's own output buffer, so frames keep the
        order h2 would give them. Informational (1xx) responses, trailers, closed or odd
        states go through h2.
        """
        conn = self.conn
        stream = conn.streams.get(streamID)
        if stream is None or conn.state_machine.state is not ConnectionState.SERVER_OPEN:
            return False
        machine = stream.state_machine
        if (
            machine.state not in _DATA_STREAM_STATES
            or machine.client is not False
            or machine.headers_sent
            or block[0][0] != b":status"
            or block[0][1][:1] == b"1"
        ):
            return False
        machine.headers_sent = True
        encoded = conn.encoder.encode(block)
        limit = conn.max_outbound_frame_size
        frames = bytearray()
        for offset in range(0, max(len(encoded), 1), limit):
            piece = encoded[offset : offset + limit]
            last = offset + limit >= len(encoded)
            frame_type = 0x1 if offset == 0 else 0x9  # HEADERS, then CONTINUATION
            size = len(piece)
            frames += _FRAME_HEADER.pack(
                size >> 8, size & 0xFF, frame_type, 0x4 if last else 0, streamID
            )
            frames += piece
        conn._data_to_send += frames
        return True

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

    def _requestDone(self, streamID: int) -> None:
        """Forget the stream (Twisted's, plus our own state)."""
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
                    assert self.transport is not None
                    self.transport.write(data)
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
        # Contention for the connection window or the budget: one frame at a time, in
        # the order the priority tree gives (Twisted's scheduling), or round-robin while
        # the client has not used priorities (what the tree does for equal siblings).
        budget = MAX_BATCH
        frameSize = conn.max_outbound_frame_size
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
_DATA_STREAM_STATES = (StreamState.OPEN, StreamState.HALF_CLOSED_REMOTE)


def _takeFrame(queue: deque[Any], room: int) -> tuple[bytes, int]:
    """Pop up to ``room`` bytes of data chunks off the front of ``queue`` (not past an end
    marker), splitting the last one if needed; small chunks are joined into one frame."""
    head = queue.popleft()
    size = len(head)
    if size > room:
        view = head if isinstance(head, memoryview) else memoryview(head)
        queue.appendleft(view[room:])
        return bytes(view[:room]), room
    if not queue or size == room or queue[0] is _END:
        return bytes(head) if isinstance(head, memoryview) else head, size
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
    holds the recurring fields; a block grows by a few bytes."""

    MAX_MEMO = 256

    def __init__(self) -> None:
        super().__init__()
        #: (name, value) -> its encoding while the dynamic table stays as it is: a response's
        #: recurring fields (content-type, cache-control, the Date of this second) are
        #: indexed references whose bytes only change when the table does.
        self._memo: dict[tuple[bytes, bytes], bytes] = {}

    def encode(self, headers: Any, huffman: bool = True) -> bytes:
        return bytes(super().encode(headers, huffman=False))

    def add(self, to_add: tuple[bytes, bytes], sensitive: bool, huffman: bool = False) -> bytes:
        if sensitive:
            return super().add(to_add, sensitive, False)
        memo = self._memo
        known = memo.get(to_add)
        if known is not None:
            return known
        before = _table_mark(self.header_table)
        encoded = super().add(to_add, sensitive, False)
        if _table_moved(before, _table_mark(self.header_table)):
            memo.clear()  # the table moved: every remembered index may now be wrong
        elif len(memo) < self.MAX_MEMO:
            memo[to_add] = encoded
        return encoded


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


def configure_http2(max_streams: int) -> None:
    """Serve HTTP/2 with :class:`FastH2Connection`, advertising ``max_streams`` streams
    (0: the default 100) on every new connection of this process."""
    streams = max_streams or DEFAULT_MAX_STREAMS
    quiet_frame_repr()

    class ApiserverH2Connection(FastH2Connection):
        maxConcurrentStreams = streams

    http.H2Connection = ApiserverH2Connection  # type: ignore[misc]
