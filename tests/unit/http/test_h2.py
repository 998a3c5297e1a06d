"""apiserver.http.h2: our HTTP/2 connection, driven by the h2 library as a client.

The server side is :class:`FastH2Connection` on a memory transport with a fake clock; the
client is an ``h2.connection.H2Connection(client_side=True)`` whose frames are fed straight
into ``dataReceived``. The tests check what a peer can observe (frames, flow control,
resets, settings) and what a resource can (producer pause/resume, lost connections).
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import h2.utilities
import hpack
import pytest
from http_helpers import fake_buffering_tls, parse_frames, request_headers
from hyperframe.frame import DataFrame, Frame, HeadersFrame, WindowUpdateFrame
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IPushProducer
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.web import http, resource, server
from zope.interface import implementer

from apiserver.http import h2 as fast
from apiserver.http.h2 import MAX_BATCH, FastH2Connection, StockH2Connection, configure_http2
from apiserver.http.h2request import H2Request

SMALL = b'{"kind":"Status","status":"Success"}'
WINDOW = 65535


class CountingTransport(StringTransport):
    """A memory transport that counts ``write`` calls (the batching is the point)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.writes += 1
        super().write(data)


@implementer(IPushProducer)
class Streamer:
    """A streaming response (like a watch): writes when told, records pause/resume."""

    def __init__(self, request: Any) -> None:
        self.request = request
        self.paused = False
        self.pauses = 0
        self.resumes = 0
        self.stopped = False
        self.lost: list[Failure] = []
        request.notifyFinish().addErrback(self.lost.append)
        request.registerProducer(self, True)
        request.write(b"")  # the headers, as a watch sends them at once

    def pauseProducing(self) -> None:
        self.paused = True
        self.pauses += 1

    def resumeProducing(self) -> None:
        self.paused = False
        self.resumes += 1

    def stopProducing(self) -> None:
        self.stopped = True

    def finish(self) -> None:
        self.request.unregisterProducer()
        self.request.finish()


class Routes(resource.Resource):
    """``/small``, ``/big/<n>`` (n bytes), ``/later`` (finished by the test), ``/stream``."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.later: list[Any] = []
        self.streams: list[Streamer] = []
        self.finished: list[Any] = []

    def render(self, request: Any) -> Any:
        request.setHeader(b"content-type", b"application/json")
        path = request.path
        if path == b"/small":
            return SMALL
        if path.startswith(b"/big/"):
            return body_of(int(path[5:]))
        if path == b"/later":
            self.later.append(request)
            request.notifyFinish().addBoth(self.finished.append)
            return server.NOT_DONE_YET
        if path == b"/stream":
            self.streams.append(Streamer(request))
            return server.NOT_DONE_YET
        if path == b"/echo":
            return request.content.read()
        if path.startswith(b"/header/"):
            request.setHeader(b"x-long", b"v" * int(path[8:]))
            return SMALL
        request.setResponseCode(404)
        return b"no"


def body_of(size: int) -> bytes:
    """A body whose every offset is recognisable, so any reordering shows."""
    unit = b"0123456789abcdefghijklmnopqrstuvwxyz"
    return (unit * (size // len(unit) + 1))[:size]


class RoutesH2Request(H2Request):
    """Our lean HTTP/2 request (:mod:`apiserver.http.h2request`) serving :class:`Routes` as
    twisted.web's ``Request.render`` does (a ``content-length`` for a whole body)."""

    twistedRequestFactory = server.Request

    def process(self) -> None:
        site: Any = self._conn.site  # Twisted types H2Connection.site as None
        routes: Any = site.resource
        body = routes.render(self)
        if body is server.NOT_DONE_YET:
            return
        self.setHeader(b"content-length", b"%d" % len(body))
        self.write(body)
        self.finish()


#: The server paths every test runs against: the fast path (:class:`FastH2Connection`) with
#: twisted.web's ``H2Stream`` and ``Request`` or our lean request, each with frames received
#: through h2 or our fast receive path; and the stock path (:class:`StockH2Connection`,
#: Twisted's own, what ``configure_http2`` falls back to when an internal changed).
SERVER_PATHS = [
    ("twisted", False),
    ("twisted", True),
    ("lean", False),
    ("lean", True),
    ("stock", False),
]
SERVER_PATH_IDS = ["twisted-h2", "twisted-fastrecv", "lean-h2", "lean-fastrecv", "stock"]
STOCK = SERVER_PATHS[-1]


@contextlib.contextmanager
def serving(kind: str, fast_receive: bool) -> Iterator[None]:
    saved = Peer.lean, Peer.stock, FastH2Connection.fastReceive
    Peer.lean, Peer.stock = kind == "lean", kind == "stock"
    FastH2Connection.fastReceive = fast_receive
    try:
        yield
    finally:
        Peer.lean, Peer.stock, FastH2Connection.fastReceive = saved


F = TypeVar("F", bound=Callable[..., Any])


def fast_only(reason: str) -> Callable[[F], F]:
    """Mark a test of what only the fast path does (batching, framing, its own state), for
    ``reason``: it runs on the fast paths, not on Twisted's own connection."""

    def mark(test: F) -> F:
        test.fast_only = reason  # type: ignore[attr-defined]
        return test

    return mark


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Hypothesis tests loop over the paths themselves (pytest-twisted wraps a hypothesis
    # test once per function, so it cannot be parametrized).
    if "server_path" in metafunc.fixturenames and not hasattr(metafunc.function, "hypothesis"):
        paths, ids = SERVER_PATHS, SERVER_PATH_IDS
        if getattr(metafunc.function, "fast_only", None):
            paths, ids = paths[:-1], ids[:-1]
        metafunc.parametrize("server_path", paths, ids=ids, indirect=True)


@pytest.fixture(autouse=True)
def server_path(request: pytest.FixtureRequest) -> Iterator[None]:
    with serving(*getattr(request, "param", SERVER_PATHS[-1])):
        yield


class QuietSite(server.Site):
    def log(self, request: Any) -> None:
        return None


@dataclass
class Answer:
    """What the client saw on one stream."""

    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)
    ended: bool = False
    reset: int | None = None

    @property
    def status(self) -> bytes:
        return dict(self.headers)[b":status"]


class Peer:
    """The h2 library as client, wired to a FastH2Connection (or, on the stock path, a
    StockH2Connection) on a memory transport."""

    #: Serve with :class:`RoutesH2Request` instead of twisted.web's (see ``server_path``).
    lean = False
    #: Serve with Twisted's own connection (see ``server_path``).
    stock = False

    def __init__(
        self,
        connection: type[Any] | None = None,
        client_settings: dict[int, int] | None = None,
        auto_ack: bool = True,
        handshake: bool = True,
    ) -> None:
        self.clock = Clock()
        self.routes = Routes()
        self.site = QuietSite(self.routes)
        if connection is None:
            connection = StockH2Connection if self.stock else FastH2Connection
        server: Any = connection(reactor=self.clock)  # Twisted types site and factory as None
        self.server = server
        # Twisted's own connection serves twisted.web requests only (as H1Channel decides).
        lean = self.lean and getattr(self.server, "servesLeanRequests", False)
        self.server.requestFactory = RoutesH2Request if lean else self.site.requestFactory
        self.server.site = self.site
        self.server.factory = self.site
        self.transport = CountingTransport()
        self.client = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        self.client.initiate_connection()
        if client_settings:
            self.client.update_settings(client_settings)
        self.auto_ack = auto_ack
        self.answers: dict[int, Answer] = {}
        self.frames: list[Frame] = []
        self.events: list[h2.events.Event] = []
        self.server.makeConnection(self.transport)
        if handshake:
            self.flush()

    # -- plumbing

    def advance(self) -> None:
        """Run what is due now. Twisted's own connection re-arms a ``callLater(0)`` while a
        window is exhausted (it polls), so on the stock path only the calls due before this
        turn run (:func:`turn`); ``Clock.advance(0)`` would never return."""
        if isinstance(self.server, FastH2Connection):
            self.clock.advance(0)
        else:
            turn(self.clock)

    def flush(self) -> None:
        """Run the reactor turn, exchange bytes both ways until nothing moves."""
        for _ in range(1000):
            self.advance()
            moved = False
            out = self.client.data_to_send()
            if out:
                self.server.dataReceived(out)
                moved = True
            self.advance()
            data = self.transport.value()
            if data:
                self.transport.clear()
                self.receive(data)
                moved = True
            if not moved:
                return
        raise AssertionError("the exchange did not settle")

    def receive(self, data: bytes) -> None:
        self.frames.extend(parse_frames(data))
        for event in self.client.receive_data(data):
            self.events.append(event)
            sid = getattr(event, "stream_id", 0)
            if isinstance(event, h2.events.ResponseReceived):
                self.answers.setdefault(sid, Answer()).headers = list(event.headers)
            elif isinstance(event, h2.events.DataReceived):
                self.answers[sid].body += event.data
                if self.auto_ack:
                    self.client.acknowledge_received_data(event.flow_controlled_length, sid)
            elif isinstance(event, h2.events.StreamEnded):
                self.answers[sid].ended = True
            elif isinstance(event, h2.events.StreamReset):
                self.answers.setdefault(sid, Answer()).reset = event.error_code

    def request(
        self,
        path: bytes,
        method: bytes = b"GET",
        body: bytes = b"",
        **priority: Any,
    ) -> int:
        sid: int = self.client.get_next_available_stream_id()
        headers = request_headers(method, path, b"localhost")
        self.client.send_headers(sid, headers, end_stream=not body, **priority)
        if body:
            self.client.send_data(sid, body, end_stream=True)
        return sid

    def ack(self, sid: int, size: int) -> None:
        """Open the stream's and the connection's window by ``size`` (WINDOW_UPDATEs)."""
        if sid in self.client.streams and not self.client.streams[sid].closed:
            self.client.increment_flow_control_window(size, stream_id=sid)
        self.client.increment_flow_control_window(size)

    def data_frames(self, sid: int) -> list[DataFrame]:
        return [f for f in self.frames if isinstance(f, DataFrame) and f.stream_id == sid]

    def server_state_empty(self) -> bool:
        s = self.server
        if not isinstance(s, FastH2Connection):
            return not (s.streams or s._outboundStreamQueues or s._streamCleanupCallbacks)
        return not (s.streams or s._outboundStreamQueues or s._queuedBytes or s._ready)


def turn(clock: Clock) -> None:
    """One reactor iteration: the calls due now, not those they schedule (unlike
    ``Clock.advance``, which runs those too)."""
    due: list[Any] = [c for c in clock.getDelayedCalls() if c.getTime() <= clock.seconds()]
    for call in due:
        clock.calls.remove(call)
        call.called = True
        call.func(*call.args, **call.kw)


# ---------------------------------------------------------------------------------------


@fast_only("one write per read and END_STREAM on the DATA frame are the fast path's batching")
def test_small_responses_leave_in_one_write_with_end_stream_on_the_data_frame() -> None:
    peer = Peer()
    writes = peer.transport.writes
    ids = [peer.request(b"/small") for _ in range(20)]
    peer.server.dataReceived(peer.client.data_to_send())
    # All twenty answers (and the SETTINGS ack) leave in a single transport write.
    assert peer.transport.writes == writes + 1
    peer.receive(peer.transport.value())
    peer.transport.clear()
    for sid in ids:
        answer = peer.answers[sid]
        assert answer.status == b"200"
        assert bytes(answer.body) == SMALL
        assert answer.ended
        frames = [f for f in peer.frames if f.stream_id == sid]
        # HEADERS, then one DATA frame carrying END_STREAM: no empty closing frame.
        assert [type(f) for f in frames] == [HeadersFrame, DataFrame]
        assert "END_STREAM" in frames[1].flags
    peer.flush()
    assert peer.server_state_empty()


def test_many_concurrent_streams_over_several_reads() -> None:
    peer = Peer()
    ids = []
    for round_ in range(5):
        for _ in range(30):
            ids.append(peer.request(b"/small"))
        if round_ % 2:
            ids.append(peer.request(b"/big/40000"))
        peer.flush()
    assert len(ids) == 152
    for sid in ids:
        answer = peer.answers[sid]
        assert answer.ended, sid
        expected = body_of(40000) if len(answer.body) > len(SMALL) else SMALL
        assert bytes(answer.body) == expected
    assert peer.server_state_empty()


def test_large_body_waits_for_window_update_then_finishes() -> None:
    peer = Peer(auto_ack=False)
    size = 200_000
    sid = peer.request(b"/big/%d" % size)
    peer.flush()
    answer = peer.answers[sid]
    # Exactly the initial window went out, in frames of at most the default 16 KiB.
    assert len(answer.body) == WINDOW
    assert not answer.ended
    assert all(len(f.data) <= 16384 for f in peer.data_frames(sid))
    assert peer.server.remainingOutboundWindow(sid) == -(size - WINDOW)
    if isinstance(peer.server, FastH2Connection):
        assert peer.server._queuedBytes[sid] == size - WINDOW
        # Blocked streams are off the schedule: no timer spins while waiting (Twisted's
        # own connection polls).
        assert peer.clock.getDelayedCalls() == []
    peer.ack(sid, 50_000)
    peer.flush()
    assert len(answer.body) == WINDOW + 50_000
    peer.auto_ack = True
    peer.ack(sid, size)
    peer.flush()
    assert answer.ended
    assert bytes(answer.body) == body_of(size)
    assert peer.server_state_empty()


def test_connection_window_shared_by_streams() -> None:
    # Streams may take 1 MiB each, the connection only its 65,535: they finish as the
    # client opens the connection window, whatever the order.
    peer = Peer(
        client_settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20},
        auto_ack=False,
    )
    ids = [peer.request(b"/big/100000") for _ in range(5)]
    peer.flush()
    assert sum(len(peer.answers[s].body) for s in ids if s in peer.answers) == WINDOW
    # Without priorities from the client, the scarce window goes round the streams one
    # frame each (what Twisted's tree does for equal siblings).
    assert [len(peer.answers[s].body) for s in ids[:4]] == [16384, 16384, 16384, 16383]
    for _ in range(20):
        peer.client.increment_flow_control_window(WINDOW)
        peer.flush()
    for sid in ids:
        assert peer.answers[sid].ended
        assert bytes(peer.answers[sid].body) == body_of(100000)
    assert peer.server_state_empty()


def test_priority_decides_who_gets_a_scarce_connection_window() -> None:
    # Stream 3 depends on stream 1: while both compete for the connection window, all of
    # it goes to stream 1 (RFC 7540 §5.3, Twisted's priority tree).
    peer = Peer(
        client_settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20},
        auto_ack=False,
    )
    first = peer.request(b"/big/150000")
    second = peer.request(b"/big/150000", priority_depends_on=first, priority_weight=16)
    peer.flush()
    assert len(peer.answers[first].body) == WINDOW
    assert second not in peer.answers or not peer.answers[second].body
    peer.client.increment_flow_control_window(2 * WINDOW)
    peer.flush()
    assert len(peer.answers[first].body) == 150000
    assert peer.answers[first].ended
    assert len(peer.answers[second].body) == 3 * WINDOW - 150000
    for _ in range(5):
        peer.client.increment_flow_control_window(WINDOW)
        peer.flush()
    assert bytes(peer.answers[second].body) == body_of(150000)


@fast_only("the priority tree is filled lazily by the fast path only")
def test_priority_frame_mid_connection_takes_over_scheduling() -> None:
    peer = Peer(
        client_settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20},
        auto_ack=False,
    )
    first = peer.request(b"/big/200000")
    second = peer.request(b"/big/200000")
    peer.flush()
    assert len(peer.answers[first].body) == 32768
    assert len(peer.answers[second].body) == 32767
    assert not peer.server._treeInUse
    # The second now depends on the first: the next window all goes to the first.
    peer.client.prioritize(second, depends_on=first)
    peer.client.increment_flow_control_window(WINDOW)
    peer.flush()
    assert peer.server._treeInUse
    assert len(peer.answers[first].body) == 32768 + WINDOW
    assert len(peer.answers[second].body) == 32767
    for _ in range(6):
        peer.client.increment_flow_control_window(WINDOW)
        peer.flush()
    for sid in (first, second):
        assert bytes(peer.answers[sid].body) == body_of(200000)
    assert peer.server_state_empty()
    assert list(peer.server.priority._streams) == [0]


def test_initial_window_setting_change_releases_blocked_streams() -> None:
    peer = Peer(auto_ack=False)
    sid = peer.request(b"/big/100000")
    peer.flush()
    assert len(peer.answers[sid].body) == WINDOW
    # A bigger SETTINGS_INITIAL_WINDOW_SIZE opens the stream's window (not the
    # connection's, which a connection WINDOW_UPDATE opens).
    peer.client.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20})
    peer.client.increment_flow_control_window(1 << 20)
    peer.flush()
    assert peer.answers[sid].ended
    assert bytes(peer.answers[sid].body) == body_of(100000)


@fast_only("one write per pass is the fast path's batching")
def test_async_response_is_sent_on_the_next_reactor_turn_in_one_write() -> None:
    peer = Peer()
    ids = [peer.request(b"/later") for _ in range(3)]
    peer.flush()
    assert len(peer.routes.later) == 3
    writes = peer.transport.writes
    for request in peer.routes.later:
        request.write(b"part one, ")
        request.write(b"part two")
        request.finish()
    assert peer.transport.value() == b""  # nothing until the reactor turns
    peer.clock.advance(0)
    assert peer.transport.writes == writes + 1
    peer.flush()
    for sid in ids:
        assert bytes(peer.answers[sid].body) == b"part one, part two"
        assert peer.answers[sid].ended
        # The two writes were joined into one frame that also ends the stream.
        assert len(peer.data_frames(sid)) == 1


@fast_only("small chunks joined into one frame is the fast path's framing")
def test_streaming_response_pauses_on_exhausted_window_and_resumes() -> None:
    peer = Peer(auto_ack=False)
    sid = peer.request(b"/stream")
    peer.flush()
    (streamer,) = peer.routes.streams
    assert peer.answers[sid].status == b"200"
    # Many small chunks in one turn: joined into frames of up to 16 KiB.
    for i in range(100):
        streamer.request.write(b"event %04d\n" % i)
    peer.flush()
    assert len(peer.answers[sid].body) == 1100
    assert len(peer.data_frames(sid)) == 1
    assert not streamer.paused
    # Write until the peer's window is used up: the producer is paused then.
    chunk = b"x" * 1000
    written = 1100
    while not streamer.paused:
        streamer.request.write(chunk)
        written += len(chunk)
    assert written >= WINDOW
    assert streamer.pauses == 1
    peer.flush()
    assert len(peer.answers[sid].body) == WINDOW
    # A small update that does not cover the queue: still paused.
    peer.ack(sid, 10)
    peer.flush()
    assert streamer.paused
    assert len(peer.answers[sid].body) == WINDOW + 10
    # Enough window: resumed, and everything queued goes out.
    peer.ack(sid, 100_000)
    peer.flush()
    assert not streamer.paused
    assert streamer.resumes == 1
    assert len(peer.answers[sid].body) == written
    # Long-lived: more single events, each sent on the next turn.
    for i in range(10):
        streamer.request.write(b"late %d\n" % i)
        peer.clock.advance(0)
        assert peer.transport.value().endswith(b"late %d\n" % i)
        peer.flush()
    streamer.finish()
    peer.flush()
    assert peer.answers[sid].ended
    assert peer.server_state_empty()


def test_client_reset_stops_the_stream_only() -> None:
    peer = Peer(auto_ack=False)
    big = peer.request(b"/big/300000")
    waiting = peer.request(b"/later")
    stream = peer.request(b"/stream")
    peer.flush()
    assert len(peer.answers[big].body) == WINDOW
    (streamer,) = peer.routes.streams
    peer.client.reset_stream(big)
    peer.client.reset_stream(waiting)
    peer.client.reset_stream(stream)
    peer.flush()
    assert big not in peer.server.streams
    assert peer.server_state_empty()
    # The request still being worked on learns it lost its client.
    assert len(peer.routes.finished) == 1
    assert isinstance(peer.routes.finished[0], Failure)
    assert len(streamer.lost) == 1
    # A late write to the reset stream is dropped; the connection carries on.
    peer.routes.later[0].write(b"too late")
    peer.clock.advance(0)
    peer.auto_ack = True
    peer.ack(big, WINDOW)
    again = peer.request(b"/small")
    peer.flush()
    assert bytes(peer.answers[again].body) == SMALL
    assert peer.server_state_empty()


def test_server_abort_sends_rst_stream() -> None:
    peer = Peer()
    sid = peer.request(b"/stream")
    peer.flush()
    (streamer,) = peer.routes.streams
    streamer.request.write(b"partial")
    streamer.request.channel.abortConnection()  # H2Stream: RST_STREAM for this stream
    peer.flush()
    assert peer.answers[sid].reset is not None
    assert peer.server_state_empty()


def test_goaway_from_client_fails_open_streams_and_closes() -> None:
    peer = Peer()
    peer.request(b"/later")
    peer.request(b"/stream")
    peer.flush()
    peer.client.close_connection()
    peer.server.dataReceived(peer.client.data_to_send())
    assert peer.transport.disconnecting
    assert len(peer.routes.finished) == 1
    assert isinstance(peer.routes.finished[0], Failure)
    assert len(peer.routes.streams[0].lost) == 1
    assert peer.server_state_empty()
    assert peer.clock.getDelayedCalls() == []


@fast_only("the fast path's send-pass timer; Twisted's own polls")
def test_connection_lost_with_data_queued() -> None:
    peer = Peer(auto_ack=False)
    peer.request(b"/big/300000")
    peer.request(b"/later")
    peer.flush()
    peer.routes.later[0].write(b"queued")  # schedules a send pass
    assert peer.clock.getDelayedCalls()
    peer.server.connectionLost(Failure(ConnectionDone()))
    assert peer.clock.getDelayedCalls() == []
    assert len(peer.routes.finished) == 1
    assert peer.server_state_empty()
    peer.clock.advance(0)  # nothing left to run


def test_transport_backpressure_holds_data_until_resumed() -> None:
    peer = Peer()
    sid = peer.request(b"/big/50000")
    peer.server.pauseProducing()  # the transport's buffer is full
    peer.server.dataReceived(peer.client.data_to_send())
    peer.clock.advance(0)
    sent = parse_frames(peer.transport.value())
    assert not [f for f in sent if isinstance(f, DataFrame)]
    peer.server.resumeProducing()
    peer.flush()
    assert bytes(peer.answers[sid].body) == body_of(50000)
    assert peer.answers[sid].ended


def test_request_body_is_received() -> None:
    peer = Peer()
    payload = body_of(100_000)
    sid = peer.client.get_next_available_stream_id()
    peer.client.send_headers(
        sid,
        [
            (b":method", b"POST"),
            (b":scheme", b"https"),
            (b":authority", b"localhost"),
            (b":path", b"/echo"),
            (b"content-length", b"%d" % len(payload)),
        ],
    )
    sent = 0
    while sent < len(payload):
        room = min(peer.client.local_flow_control_window(sid), 16384, len(payload) - sent)
        if room:
            peer.client.send_data(sid, payload[sent : sent + room], end_stream=False)
            sent += room
        if sent == len(payload):
            peer.client.end_stream(sid)
        peer.flush()
    assert bytes(peer.answers[sid].body) == payload


@fast_only("MAX_BATCH is the fast path's budget")
def test_batch_budget_yields_to_the_reactor() -> None:
    size = 3 * MAX_BATCH
    peer = Peer(
        client_settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: (1 << 31) - 1},
        auto_ack=False,
    )
    peer.client.increment_flow_control_window((1 << 31) - 1 - WINDOW)
    sid = peer.request(b"/big/%d" % size)
    peer.server.dataReceived(peer.client.data_to_send())
    peer.receive(peer.transport.value())
    peer.transport.clear()
    assert len(peer.answers[sid].body) == MAX_BATCH
    # The rest follows, one budget per reactor turn.
    turn(peer.clock)
    peer.receive(peer.transport.value())
    peer.transport.clear()
    assert len(peer.answers[sid].body) == 2 * MAX_BATCH
    peer.flush()
    assert bytes(peer.answers[sid].body) == body_of(size)


@fast_only("MAX_BATCH is the fast path's budget")
def test_large_answers_share_the_batch_budget() -> None:
    """Several large answers at once, windows wide open: each pass spends its budget in
    equal shares, each share framed in one go, every body exact in the end."""
    size = 600_000
    peer = Peer(
        client_settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: (1 << 31) - 1},
        auto_ack=False,
    )
    peer.client.increment_flow_control_window((1 << 31) - 1 - WINDOW)
    ids = [peer.request(b"/big/%d" % size) for _ in range(3)]
    peer.server.dataReceived(peer.client.data_to_send())
    peer.receive(peer.transport.value())
    peer.transport.clear()
    sizes = [len(peer.answers[sid].body) for sid in ids]
    assert sum(sizes) == MAX_BATCH
    assert max(sizes) - min(sizes) <= 1
    peer.flush()
    for sid in ids:
        assert bytes(peer.answers[sid].body) == body_of(size)
        frames = peer.data_frames(sid)
        assert all(len(f.data) <= 16384 for f in frames)
        assert [("END_STREAM" in f.flags) for f in frames] == [False] * (len(frames) - 1) + [True]
    assert peer.server_state_empty()


@settings(max_examples=40, deadline=None)
@given(
    chunks=st.lists(st.integers(min_value=0, max_value=40_000), min_size=1, max_size=12),
    acks=st.lists(st.integers(min_value=1, max_value=50_000), min_size=1, max_size=8),
    frame_size=st.sampled_from([16384, 20000, 1 << 20]),
)
def test_any_chunking_and_window_pattern_delivers_the_exact_body(
    chunks: list[int], acks: list[int], frame_size: int
) -> None:
    for path in SERVER_PATHS:
        with serving(*path):
            _deliver_exact_body(chunks, acks, frame_size)


def _deliver_exact_body(chunks: list[int], acks: list[int], frame_size: int) -> None:
    peer = Peer(
        client_settings={h2.settings.SettingCodes.MAX_FRAME_SIZE: frame_size},
        auto_ack=False,
    )
    sid = peer.request(b"/stream")
    peer.flush()
    (streamer,) = peer.routes.streams
    expected = bytearray()
    for i, size in enumerate(chunks):
        data = bytes([65 + i % 26]) * size
        streamer.request.write(data)
        expected += data
        if i % 3 == 0:
            peer.flush()
    streamer.finish()
    for ack in acks:
        peer.ack(sid, ack)
        peer.flush()
    peer.ack(sid, len(expected) + 1)
    peer.flush()
    answer = peer.answers[sid]
    assert answer.ended
    assert bytes(answer.body) == bytes(expected)
    assert all(len(f.data) <= frame_size for f in peer.data_frames(sid))
    assert peer.server_state_empty()


@pytest.fixture
def restore_h2_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "H2Connection", http.H2Connection)


@pytest.fixture(params=["fast", "stock"])
def installed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> type[Any]:
    """The class ``configure_http2`` installs: the fast path, or (an internal reported as
    changed) Twisted's own connection."""
    monkeypatch.setattr(http, "H2Connection", http.H2Connection)
    if request.param == "stock":
        monkeypatch.setattr(fast, "h2_internals_problems", lambda: ["changed"])
        monkeypatch.setattr(fast, "_fallback_reported", True)
        return StockH2Connection
    return FastH2Connection


@pytest.mark.parametrize(("flag", "advertised"), [(0, 100), (250, 250), (7, 7)])
def test_configure_http2_installs_the_class_and_advertises_max_streams(
    flag: int, advertised: int, installed: type[Any]
) -> None:
    assert configure_http2(flag) is (installed is FastH2Connection)
    cls: Callable[..., Any] = http.H2Connection
    assert issubclass(cls, installed)  # type: ignore[arg-type]
    peer = Peer(connection=cls)  # type: ignore[arg-type]
    assert peer.client.remote_settings.max_concurrent_streams == advertised
    ids = [peer.request(b"/later") for _ in range(advertised)]
    peer.flush()
    assert len(peer.routes.later) == advertised
    assert all(sid in peer.server.streams for sid in ids)


def test_streams_beyond_the_advertised_limit_are_refused(installed: type[Any]) -> None:
    configure_http2(3)
    # A client that opens its streams before it has read our SETTINGS.
    peer = Peer(connection=http.H2Connection, handshake=False)
    assert isinstance(peer.server, installed)
    for _ in range(3):
        peer.request(b"/later")
    peer.server.dataReceived(peer.client.data_to_send())
    assert len(peer.routes.later) == 3
    extra = peer.request(b"/later")
    peer.server.dataReceived(peer.client.data_to_send())
    events = peer.client.receive_data(peer.transport.value())
    peer.transport.clear()
    if installed is StockH2Connection:
        # h2 treats it as a connection error (Twisted's behaviour, on the fallback path).
        (goaway,) = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
        assert goaway.error_code == h2.errors.ErrorCodes.PROTOCOL_ERROR
        assert peer.transport.disconnecting
        assert len(peer.routes.later) == 3
        assert len(peer.routes.finished) == 3
        assert peer.server_state_empty()
        return
    # Go's server (x/net/http2 processHeaders) resets that stream only: REFUSED_STREAM while
    # our SETTINGS are not acknowledged (issue 17).
    assert not [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
    (reset,) = [e for e in events if isinstance(e, h2.events.StreamReset)]
    assert (reset.stream_id, reset.error_code) == (extra, h2.errors.ErrorCodes.REFUSED_STREAM)
    assert not peer.transport.disconnecting
    assert len(peer.routes.later) == 3 and peer.routes.finished == []
    # The connection and its streams live on; once one ends, a new stream is served.
    peer.flush()
    peer.routes.later[0].write(b"done")
    peer.routes.later[0].finish()
    peer.flush()
    peer.request(b"/small")
    peer.flush()
    assert [a.status for a in peer.answers.values() if a.ended].count(b"200") == 2


@fast_only("the refusal is the fast connection's; Twisted's own sends GOAWAY")
def test_stream_over_the_limit_after_settings_ack_is_a_protocol_error_reset() -> None:
    configure_http2(2)
    peer = Peer(connection=http.H2Connection)  # the handshake acknowledges our SETTINGS
    first = [peer.request(b"/later") for _ in range(2)]
    peer.flush()
    # A client that ignores the limit it was told (h2 itself would refuse to send).
    limit = h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS
    peer.client.remote_settings._settings[limit] = collections.deque([100])
    extra = peer.request(b"/later", method=b"POST", body=b"x" * 100)
    peer.flush()
    assert peer.answers[extra].reset == h2.errors.ErrorCodes.PROTOCOL_ERROR
    assert not peer.transport.disconnecting
    assert all(sid in peer.server.streams for sid in first)
    # HPACK stayed in step: the next request on the connection decodes.
    peer.routes.later[0].finish()
    peer.flush()
    later = peer.request(b"/small")
    peer.flush()
    assert peer.answers[later].status == b"200"


def test_take_frame_joins_and_splits() -> None:
    from collections import deque

    end = fast._END
    queue: deque[Any] = deque([b"ab", b"cd", b"efgh", end])
    assert fast._takeFrame(queue, 5) == (b"abcde", 5)
    assert list(queue) == [memoryview(b"fgh"), end] or bytes(queue[0]) == b"fgh"
    assert fast._takeFrame(queue, 5) == (b"fgh", 3)
    assert list(queue) == [end]
    queue = deque([b"x" * 10])
    assert fast._takeFrame(queue, 4) == (b"xxxx", 4)
    assert fast._takeFrame(queue, 4) == (b"xxxx", 4)
    assert fast._takeFrame(queue, 4) == (b"xx", 2)
    assert not queue


# -- header blocks: the one-pass checks against h2's own validation ----------------------

_NAMES = st.sampled_from(
    [
        b":method",
        b":scheme",
        b":authority",
        b":path",
        b":status",
        b":protocol",
        b":bogus",
        b"host",
        b"accept",
        b"user-agent",
        b"te",
        b"connection",
        b"keep-alive",
        b"cookie",
        b"Accept",
        b"x-a:b",
        b"x y",
        b"",
        b"x-\xff",
        b"content-length",
    ]
)
_VALUES = st.sampled_from(
    [
        *(b"GET", b"CONNECT", b"https", b"/", b"", b"localhost", b"other", b" pad", b"pad\t"),
        *(b"a\r\nb", b"nul\x00", b"trailers", b"gzip", b"application/json"),
    ]
)
_BLOCKS = st.lists(st.tuples(_NAMES, _VALUES), max_size=9)


def _h2_accepts(headers: list[tuple[bytes, bytes]], flags: Any) -> bool:
    try:
        list(h2.utilities.validate_headers(headers, flags))
    except h2.exceptions.ProtocolError:
        return False
    return True


@settings(max_examples=3000, deadline=None)
@given(
    pseudo=st.permutations([b":method", b":scheme", b":authority", b":path"]),
    extra=_BLOCKS,
    values=st.lists(_VALUES, min_size=4, max_size=4),
)
def test_request_check_never_accepts_what_h2_rejects(
    pseudo: list[bytes], extra: list[tuple[bytes, bytes]], values: list[bytes]
) -> None:
    # Blocks near the valid shape (the usual pseudo-headers, then anything), and
    # arbitrary ones: whenever the one-pass check says yes, h2 says yes too.
    for block in (list(zip(pseudo, values, strict=True)) + extra, extra):
        if fast._plainRequestHeaders(block):
            assert _h2_accepts(block, fast._REQUEST_FLAGS), block


def test_request_check_accepts_everyday_requests() -> None:
    for block in [
        [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"127.0.0.1:6443"),
            (b":path", b"/apis/events.k8s.io/v1/namespaces/default/events?limit=500"),
            (b"user-agent", b"kubectl/v1.32.0 (linux/amd64) kubernetes/abcdef"),
            (b"accept", b"application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
            (b"authorization", b"Bearer abc"),
            (b"accept-encoding", b"gzip"),
        ],
        [
            (b":method", b"POST"),
            (b":path", b"/x"),
            (b":scheme", b"https"),
            (b"host", b"h"),
            (b"content-length", b"3"),
        ],
        [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"h"),
            (b":path", b"/"),
            (b"host", b"h"),
        ],
    ]:
        assert fast._plainRequestHeaders(block)
        assert _h2_accepts(block, fast._REQUEST_FLAGS)


def test_malformed_request_ends_the_connection_like_h2() -> None:
    # An upper-case name (the client's own check bypassed): GOAWAY PROTOCOL_ERROR.
    peer = Peer()
    peer.client.config.normalize_outbound_headers = False
    peer.client.config.validate_outbound_headers = False
    sid = peer.client.get_next_available_stream_id()
    peer.client.send_headers(
        sid,
        [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"h"),
            (b":path", b"/small"),
            (b"X-Upper", b"1"),
        ],
        end_stream=True,
    )
    peer.server.dataReceived(peer.client.data_to_send())
    events = peer.client.receive_data(peer.transport.value())
    (goaway,) = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
    assert goaway.error_code == h2.errors.ErrorCodes.PROTOCOL_ERROR
    assert peer.transport.disconnecting
    assert peer.server_state_empty()


def test_unusual_but_valid_request_goes_through_h2s_check() -> None:
    peer = Peer()
    sid = peer.client.get_next_available_stream_id()
    # ``te: trailers`` is valid but outside the one-pass shape.
    peer.client.send_headers(
        sid,
        [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"h"),
            (b":path", b"/small"),
            (b"te", b"trailers"),
        ],
        end_stream=True,
    )
    peer.flush()
    assert bytes(peer.answers[sid].body) == SMALL


def _h2_response_block(code: bytes, headers: list[tuple[bytes, bytes]]) -> list[Any]:
    flags = fast._RESPONSE_FLAGS
    block = [(b":status", code), *headers]
    return list(
        h2.utilities.validate_outbound_headers(
            h2.utilities.normalize_outbound_headers(block, flags), flags
        )
    )


@settings(max_examples=2000, deadline=None)
@given(
    headers=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    b"Content-Type",
                    b"Content-Length",
                    b"Date",
                    b"Server",
                    b" X-Pad ",
                    b"Connection",
                    b"Transfer-Encoding",
                    b"Keep-Alive",
                    b"Set-Cookie",
                    b"Cookie",
                    b"Authorization",
                    b"TE",
                    b":path",
                    b"Audit-Id",
                ]
            ),
            st.sampled_from([b"v", b" v ", b"", b"close", b"trailers", b"chunked"]),
        ),
        max_size=8,
    )
)
def test_response_block_is_what_h2_would_send(headers: list[tuple[bytes, bytes]]) -> None:
    block = fast._responseHeaderBlock(b"200", list(headers))
    if block is None:
        return
    expected = _h2_response_block(b"200", list(headers))
    assert [tuple(h) for h in block] == [tuple(h) for h in expected]
    # Nothing h2 would have marked never-indexed (HPACK) slips through the fast path; the
    # per-response Audit-Id stays out of the dynamic table.
    assert not any(isinstance(h, hpack.NeverIndexedHeaderTuple) for h in expected)
    for h in block:
        assert isinstance(h, hpack.NeverIndexedHeaderTuple) == (h[0] == b"audit-id")


def test_response_with_special_headers_uses_h2s_pipeline() -> None:
    peer = Peer()
    sid = peer.request(b"/later")
    peer.flush()
    (request,) = peer.routes.later
    request.setHeader(b"Set-Cookie", b"a=b")
    request.setHeader(b"Connection", b"close")
    request.setHeader(b"Cookie", b"short")
    request.write(b"ok")
    request.finish()
    peer.flush()
    headers = dict(peer.answers[sid].headers)
    assert headers[b"set-cookie"] == b"a=b"
    assert headers[b"cookie"] == b"short"
    assert b"connection" not in headers
    assert bytes(peer.answers[sid].body) == b"ok"


@fast_only("the fast path's HPACK encoder")
def test_audit_id_stays_out_of_the_hpack_table() -> None:
    peer = Peer()
    ids = [peer.request(b"/later") for _ in range(3)]
    peer.flush()
    for n, request in enumerate(peer.routes.later):
        request.setHeader(b"Audit-Id", b"0000000%d-aaaa-bbbb-cccc-dddddddddddd" % n)
        request.setHeader(b"Cache-Control", b"no-cache, private")
        request.finish()
    peer.flush()
    for n, sid in enumerate(ids):
        assert dict(peer.answers[sid].headers)[b"audit-id"].startswith(b"0000000%d" % n)
    table = [name for name, _ in peer.client.decoder.header_table.dynamic_entries]
    assert b"cache-control" in table
    assert b"audit-id" not in table


def test_late_window_update_for_a_finished_stream_is_ignored() -> None:
    peer = Peer()
    sid = peer.request(b"/small")
    peer.flush()
    assert peer.answers[sid].ended
    late = WindowUpdateFrame(sid)
    late.window_increment = 1000
    peer.server.dataReceived(late.serialize())
    again = peer.request(b"/small")
    peer.flush()
    assert not peer.transport.disconnecting
    assert bytes(peer.answers[again].body) == SMALL


def test_the_short_frame_repr_is_hyperframes_text() -> None:
    """quiet_frame_repr keeps the text of every payload size, from its first bytes only."""
    import binascii

    from apiserver.http.h2 import _short_data_repr

    def original(data: bytes | None) -> str:
        if not data:
            return "None"
        r = binascii.hexlify(data).decode("ascii")
        if len(r) > 20:
            r = r[:20] + "..."
        return "<hex:" + r + ">"

    for size in (0, 1, 9, 10, 11, 12, 100, 16384):
        data = bytes(range(256)) * (size // 256 + 1)
        assert _short_data_repr(data[:size]) == original(data[:size])
    assert _short_data_repr(None) == original(None)


def test_the_caching_decoder_decodes_as_hpack_does() -> None:
    """Blocks replayed, blocks that grow or evict the table, size updates: same headers as
    a plain hpack Decoder fed the same sequence."""
    import hpack

    from apiserver.http.h2 import _CachingDecoder

    encoder = hpack.Encoder()
    encoder.header_table_size = 256  # small: entries get evicted
    request = [(b":method", b"GET"), (b":path", b"/apis/x"), (b"accept", b"application/json")]
    blocks = [encoder.encode(request) for _ in range(3)]
    for n in range(12):
        blocks.append(encoder.encode([*request, (b"x-custom", b"value-%d" % n)]))
        blocks.append(encoder.encode(request))
    blocks.append(encoder.encode([(b":method", b"GET"), hpack.NeverIndexedHeaderTuple(b"s", b"v")]))
    blocks += [encoder.encode(request)] * 3
    plain, caching = hpack.Decoder(), _CachingDecoder()
    for block in blocks:
        assert caching.decode(block, raw=True) == plain.decode(block, raw=True)
    assert list(caching.header_table.dynamic_entries) == list(plain.header_table.dynamic_entries)
    assert caching._blocks  # the repeated indexed-only blocks were kept


def test_the_caching_decoder_forgets_blocks_when_the_table_changes() -> None:
    import hpack

    from apiserver.http.h2 import _CachingDecoder

    encoder = hpack.Encoder()
    first = encoder.encode([(b"a", b"1")])  # literal with indexing: the table changes
    indexed = encoder.encode([(b"a", b"1")])  # now an index into the table
    decoder = _CachingDecoder()
    decoder.decode(first, raw=True)
    assert not decoder._blocks
    assert decoder.decode(indexed, raw=True) == [(b"a", b"1")]
    assert len(decoder._blocks) == 1
    decoder.decode(encoder.encode([(b"b", b"2")]), raw=True)  # grows the table
    assert not decoder._blocks
    # The same index bytes now mean the newer entry: no stale answer.
    assert decoder.decode(indexed, raw=True) == [(b"b", b"2")]


def test_the_literal_encoder_memo_matches_a_fresh_encoding() -> None:
    """Blocks from the memoizing encoder decode to the headers given, whatever the table
    did in between (new fields, evictions, sensitive fields)."""
    import hpack

    from apiserver.http.h2 import _LiteralEncoder

    encoder = _LiteralEncoder()
    encoder.header_table_size = 200
    decoder = hpack.Decoder()
    decoder.max_allowed_table_size = 200
    decoder.header_table_size = 200
    for n in range(40):
        headers = [
            (b":status", b"200"),
            (b"content-type", b"application/json"),
            (b"date", b"second-%d" % (n // 3)),
            hpack.NeverIndexedHeaderTuple(b"audit-id", b"id-%d" % n),
            (b"x-extra-%d" % (n % 5), b"v" * (n % 7)),
        ]
        block = encoder.encode(headers)
        assert decoder.decode(block, raw=True) == [tuple(h) for h in headers]
    stable = [(b":status", b"200"), (b"content-type", b"application/json")]
    first = encoder.encode(stable)
    assert encoder.encode(stable) == first
    assert set(encoder._memo) == set(stable)
    assert decoder.decode(first, raw=True) == stable


def test_the_local_address_is_asked_once_per_connection() -> None:
    from twisted.internet.address import IPv4Address

    from apiserver.http.h2 import FastH2Connection

    class Transport:
        calls = 0

        def getHost(self) -> IPv4Address:
            Transport.calls += 1
            return IPv4Address("TCP", "127.0.0.1", 6443)

    conn = FastH2Connection.__new__(FastH2Connection)
    conn._host = None
    conn.transport = Transport()  # type: ignore[assignment]
    assert conn.getHost() == IPv4Address("TCP", "127.0.0.1", 6443)
    assert conn.getHost() is conn.getHost()
    assert Transport.calls == 1


@fast_only("every answer of a read in that read's write is the fast path's batching")
def test_response_headers_past_the_frame_size_use_continuation_frames() -> None:
    """Headers sent without h2's machinery: a block longer than the peer's frame size is
    split into HEADERS + CONTINUATION, decoded by the client as one block, and the HPACK
    contexts stay in step across many responses."""
    peer = Peer()
    sizes = [10, 20_000, 10, 40_000, 10]
    ids = [peer.request(b"/header/%d" % n) for n in sizes]
    peer.server.dataReceived(peer.client.data_to_send())
    peer.receive(peer.transport.value())
    peer.transport.clear()
    for sid, size in zip(ids, sizes, strict=True):
        answer = peer.answers[sid]
        assert answer.status == b"200"
        assert dict(answer.headers)[b"x-long"] == b"v" * size
        assert bytes(answer.body) == SMALL and answer.ended
    kinds = [type(f).__name__ for f in peer.frames if f.stream_id == ids[1]]
    assert kinds[:2] == ["HeadersFrame", "ContinuationFrame"]
    peer.flush()
    assert peer.server_state_empty()


def test_large_passes_go_to_tls_at_once_as_a_view(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass writing 64 KiB or more flushes Twisted's small-write buffer, then goes to TLS
    at once as a memoryview (TLS cuts it into records without copying); smaller passes are
    left to that buffer. Order is kept."""
    tls, order = fake_buffering_tls(monkeypatch)
    conn = FastH2Connection(reactor=Clock())
    conn.transport = tls
    conn._writeOut(b"small")
    assert order == []
    big = b"x" * fast._DIRECT_TLS_WRITE
    conn._writeOut(big)
    assert [kind for kind, _ in order] == ["buffered", "direct"]
    assert order[0][1] == b"small"
    assert isinstance(order[1][1], memoryview) and bytes(order[1][1]) == big


def test_header_lists_up_to_go_s_limit_are_taken() -> None:
    """Go's server advertises and takes MaxHeaderBytes (1 MiB) + 320; h2's default is 64 KiB."""
    peer = Peer()
    assert peer.client.remote_settings.max_header_list_size == (1 << 20) + 320
    sid = peer.client.get_next_available_stream_id()
    headers = request_headers(b"GET", b"/small", b"localhost")
    peer.client.send_headers(sid, [*headers, (b"x-big", b"v" * 66_000)], end_stream=True)
    peer.flush()
    assert peer.answers[sid].status == b"200"
    assert bytes(peer.answers[sid].body) == SMALL
